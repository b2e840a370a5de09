"""policy_tuning: propose, and on approval apply, rule mode changes from triage statistics."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, TriggerRule
from findings_provider.assets import POLICY_RULES
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import approval_steps, conn_ids, dag_settings, dry_run_param
from findings_provider.operators.policies import (
    ApplyPolicyChangesOperator,
    ListPolicyRulesOperator,
    ProposePolicyChangesOperator,
)

CONFIG = load_pipeline_config()
CFG = CONFIG.policy_tuning

DOC = """
### Policy tuning

Proposes rule mode changes from the warehouse's triage statistics and, after a person approves them, applies
them.

1. **list_policy_rules** lists the rules of the policies (cursor pagination) into `policy_rules`. The policies
   are the `policies` param, by default those named in `include/pipeline.yaml` (`policy_tuning.policies`), or,
   when it names none, every policy the deployment lists. A deployment whose policy API was retired (410 Gone,
   `DEPLOYMENT_MIGRATED`: it moved to the service's newer policy system) is said once: one `policy_api_retired`
   alert, a record in the warehouse (`pipeline_state` key `policy_tuning/retired`, shown on the dashboard's
   Policies page), and this task ends **skipped** (the rest of the run is skipped, the run stays green). Later runs
   skip at once, without calling the policy API or alerting again, until the `policies` configuration or the
   connection changes. Move to the newer policy system, then pause or remove this DAG.
2. **propose_policy_changes** computes per rule, from the warehouse's code findings (rule `path` = finding
   `rule_name`): findings, the share of autotriage false and true positives, and the share people triaged as
   false positive; then applies the thresholds of `policy_tuning.rules` (for example a `MODE_BLOCK` or
   `MODE_COMMENT` rule whose false-positive share is above 80% over at least 20 findings goes to
   `MODE_MONITOR`). The proposal is logged, written as an HTML report with a chart and CSV files
   (`$FINDINGS_REPORT_DIR/policy_tuning/`), and stored in the warehouse.
3. **check_approval** goes straight to **apply_policy_changes** on a dry run or when nothing is proposed (it
   applies nothing then, and no one is asked); otherwise to
4. **approve_policy_changes**, which asks a person to approve in the UI (Required Actions; someone is told, with
   a link) and records the answer in the warehouse. Reject, or no answer within 6 days: nothing is applied.
5. **apply_policy_changes** checks the recorded approval itself (marking the approval task successful by hand is
   not approval: it applies nothing and fails), then applies each change with the update-policy call and
   records it in `policy_changes` (previous mode, new mode, status, response) so it can be reverted. A policy
   API retired after the proposal (410 Gone on the apply's read or write) is said as in step 1: the changes
   sent before it stay recorded, the others are recorded `not_applied`, one `policy_api_retired` alert lists
   both, this task ends **skipped**, and later runs skip at step 1.

**Params**

- `dry_run` (boolean, default `true`): propose and report only; nothing changes and no approval is asked.
- `policies` (list of policy ids or null): the policies to tune for this run; null or empty: every policy the
  deployment lists.
"""

with DAG(
    description="Propose, and on approval apply, rule mode changes from triage statistics",
    **dag_settings(CONFIG, "policy_tuning", schedule=CFG.schedule),
    doc_md=DOC,
    tags=["findings", "governance", "policies"],
    params={
        "dry_run": dry_run_param(CFG.dry_run, "Propose and report only: nothing changes and no approval is asked."),
        "policies": Param(
            CFG.policies or None,
            type=["null", "array"],
            items={"type": "string", "pattern": "^[0-9]+$"},
            uniqueItems=True,
            description="Policy ids to tune; null or empty: every policy the deployment lists.",
        ),
    },
) as dag:
    list_rules = ListPolicyRulesOperator(
        task_id="list_policy_rules",
        **conn_ids(CONFIG),
        policy_ids="{{ params.policies }}",
        alerts=CONFIG.alerts,
        outlets=[POLICY_RULES],
    )
    propose = ProposePolicyChangesOperator(
        task_id="propose_policy_changes",
        warehouse_conn_id=CONFIG.connections.warehouse_conn_id,
        policy_ids=list_rules.output["policy_ids"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
        thresholds=CFG.rules,
        dry_run="{{ params.dry_run }}",
    )
    check, approve = approval_steps(
        CONFIG, propose, approval_task_id="approve_policy_changes", write_task_id="apply_policy_changes",
        kind="policies", response_timeout=timedelta(days=6),
    )
    apply = ApplyPolicyChangesOperator(
        task_id="apply_policy_changes",
        **conn_ids(CONFIG),
        propose_task_id="propose_policy_changes",
        dry_run="{{ params.dry_run }}",
        list_task_id="list_policy_rules",
        alerts=CONFIG.alerts,
        trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
    )
    propose >> check >> [approve, apply]
    approve >> apply
