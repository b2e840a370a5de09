"""
### Autotriage triage

Bulk-triages findings by their autotriage verdict, per the policies in `include/pipeline.yaml`
(`autotriage_triage.policies`). The default policy sets open code (`sast`) findings whose autotriage verdict is
`false_positive` to `ignored` with reason `false_positive` and a note naming the verdict and this DAG run;
findings with another verdict, or none, are never touched. Runs when findings were written (the
`findings://warehouse/findings` Asset; several events merge into one run, which processes everything
outstanding), on its own schedule if configured, and on a manual trigger.

1. **plan_triage** selects the findings from the warehouse and records one `planned` row per request (at most
   3000 ids each) in `triage_actions`.
   Findings a person reopened after a policy triaged them are held back until a scan reintroduces them.
2. **check_approval**: when a policy selects more than its cap (`max_findings`, 5,000 by default) or the
   selection is larger than `approval_threshold`, **approve_triage** asks a person in the UI (Required Actions)
   to approve or reject; otherwise it is skipped. Reject (or no answer within a day): nothing is triaged and
   the plan's rows are marked rejected.
3. **bulk_triage** checks the recorded approval itself (marking the approval task successful by hand is not
   approval), re-reads each policy's findings from the service and drops any that a person changed since the
   last extraction (table `dropped_findings`, with the reason), sends the planned requests with the rest,
   records each response in `triage_actions` and updates the triaged findings in the warehouse (including
   same-fingerprint findings on other branches). In a dry run nothing is sent.
4. **publish_triage** updates the `findings://warehouse/triage_actions` Asset after every run that is not a dry
   run, even when nothing needed triage, so that `ticket_creation` always runs after triage.

**Params**

- `dry_run` (boolean, default false): record the plan in `triage_actions` without calling the API.
- `approval_threshold` (null or integer >= 0, default null): above this many selected findings a person must
  approve first; null never asks.
- `max_findings` (null or integer >= 1, default null): lowers every policy's cap for this run; a larger value
  does not raise a cap (above it, a person approves).
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, TriggerRule
from findings_provider.assets import FINDINGS, TRIAGE
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import approval_steps, cap_param, conn_ids, dag_settings, dry_run_param
from findings_provider.operators.findings import PublishAssetOperator
from findings_provider.operators.triage import BulkTriageOperator, PlanTriageOperator, TriageApprovalOperator

CONFIG = load_pipeline_config()
CFG = CONFIG.autotriage_triage
CONN = conn_ids(CONFIG)

with DAG(
    description="Bulk-triage findings by their autotriage verdict",
    tags=["findings", "security", "triage"],
    **dag_settings(CONFIG, "autotriage_triage", schedule=CFG.schedule, assets=FINDINGS),
    doc_md=__doc__,
    params={
        "dry_run": dry_run_param(CFG.dry_run, "Record the plan in triage_actions without calling the API."),
        "approval_threshold": Param(
            CFG.approval_threshold,
            type=["null", "integer"],
            minimum=0,
            title="Approval threshold",
            description="Above this many selected findings a person approves in the UI first; empty: never ask.",
        ),
        "max_findings": cap_param("max_findings"),
    },
) as dag:
    plan = PlanTriageOperator(
        task_id="plan_triage",
        dry_run="{{ params.dry_run }}",
        approval_threshold="{{ params.approval_threshold }}",
        max_findings="{{ params.max_findings }}",
        policies=CFG.policies,
        chunk_size=CFG.chunk_size,
        pool="default_pool",
        **CONN,
    )
    check, approve = approval_steps(
        CONFIG, plan, approval_task_id="approve_triage", write_task_id="bulk_triage",
        operator=TriageApprovalOperator, action_ids=plan.output["action_ids"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
    )
    triage = BulkTriageOperator(
        task_id="bulk_triage",
        action_ids=plan.output["action_ids"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
        policies=CFG.policies,
        trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        **CONN,
    )
    publish = PublishAssetOperator(
        task_id="publish_triage",
        changed=1,
        what="triage run",
        dry_run="{{ params.dry_run }}",
        asset=TRIAGE,
        trigger_rule=TriggerRule.NONE_FAILED,
        pool="default_pool",
    )
    plan >> check >> [approve, triage]
    approve >> triage >> publish
