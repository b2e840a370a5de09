"""
### Ticket creation

Creates grouped issue-tracker tickets for findings that need work, per the policies in `include/pipeline.yaml`
(`ticket_creation.policies`). Default: open findings with no ticket that are code findings with autotriage
verdict `true_positive` and severity `high`/`critical`, or supply-chain findings that are `reachable` or
`always_reachable` with severity `high`/`critical` (a `secrets` policy exists, disabled by default). Runs after
each triage run (the `findings://warehouse/triage_actions` Asset), on its own schedule if configured, and on a
manual trigger.

- **link_tickets** links the findings of `link_finding_ids` to the existing ticket `link_ticket_url` (one a
  person filed by hand), when given: right before the write it re-reads them, leaves alone any that carries
  another ticket, and records each link in `ticket_actions` (`linked`); ticket creation never tickets them.
- **plan_tickets** records tickets of ours the service no longer links (`unlinked`, `replaced`), then selects
  the findings and counts the tickets per policy; above a policy's cap (`max_tickets`, 100 by default)
  **approve_tickets** asks a person in the UI (Required Actions) first.
- **create_tickets** checks the recorded approval itself, re-reads each policy's findings from the service and
  drops any that a person changed since the last extraction, or whose ticket of ours a person closed or removed
  (table `dropped_findings`, with the reason), then groups findings by repository and rule (at most 50 per
  ticket), sends at most 20 tickets per request with `group_issues: true`, and records every outcome per
  finding in `ticket_actions` (`succeeded`, `failed`, `skipped`). Failed findings are retried by a later run;
  skipped ones are reported. A
  finding is never ticketed twice, across retries and reruns: when a response is lost, the findings are
  re-read from the API instead of sending the request again.
- **publish_tickets** updates the `findings://warehouse/ticket_actions` Asset when tickets were created.

**Params**

- `dry_run` (boolean, default false): record the plan (`planned` rows) without calling the API.
- `tracker_project_id` (null or digits, default null): the issue-tracker project; null uses the integration's
  default project.
- `max_tickets` (null or integer >= 1, default null): lowers every policy's cap for this run; a larger value
  does not raise a cap (above it, a person approves).
- `link_ticket_url` (null or an http(s) URL, default null) and `link_finding_ids` (integer ids, default empty,
  at most 50): link these findings to that existing ticket before planning; empty: nothing is linked.

The DAG never unlinks a ticket nor deletes a link: a finding whose ticket of ours a person unlinked, deleted or
replaced is recorded and not ticketed again, unless its policy sets `reticket_unlinked`.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, TriggerRule
from findings_provider.assets import TICKETS, TRIAGE
from findings_provider.client.limits import FINDINGS_PER_TICKET as LINK_CAP
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import approval_steps, cap_param, conn_ids, dag_settings, dry_run_param
from findings_provider.operators.findings import PublishAssetOperator
from findings_provider.operators.tickets import CreateTicketsOperator, LinkTicketOperator, PlanTicketsOperator

CONFIG = load_pipeline_config()
CFG = CONFIG.ticket_creation
CONN = conn_ids(CONFIG)

with DAG(
    description="Create grouped issue-tracker tickets for findings that need work",
    tags=["findings", "security", "tickets"],
    **dag_settings(CONFIG, "ticket_creation", schedule=CFG.schedule, assets=TRIAGE),
    doc_md=__doc__,
    params={
        "dry_run": dry_run_param(CFG.dry_run, "Record the plan in ticket_actions without calling the API."),
        "tracker_project_id": Param(
            CFG.tracker_project_id,
            type=["null", "string"],
            pattern="^[0-9]+$",
            title="Tracker project id",
            description="Issue-tracker project id (digits); empty: the integration's default project.",
        ),
        "max_tickets": cap_param("max_tickets"),
        "link_ticket_url": Param(
            None,
            type=["null", "string"],
            pattern="^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/]+",
            title="Link to an existing ticket (URL)",
            description="An existing tracker ticket (http or https URL) to link the findings below to, e.g. one a "
            "person filed by hand; empty: nothing is linked.",
        ),
        "link_finding_ids": Param(
            [],
            type="array",
            items={"type": "integer", "minimum": 1},
            maxItems=LINK_CAP,
            title="Finding ids to link",
            description=f"Findings to link to that ticket (at most {LINK_CAP}); empty: nothing is linked.",
        ),
    },
) as dag:
    link = LinkTicketOperator(
        task_id="link_tickets",
        ticket_url="{{ params.link_ticket_url }}",
        finding_ids="{{ params.link_finding_ids }}",
        dry_run="{{ params.dry_run }}",
        **CONN,
    )
    plan = PlanTicketsOperator(
        task_id="plan_tickets",
        max_tickets="{{ params.max_tickets }}",
        policies=CFG.policies,
        group_issues=CFG.group_issues,
        pool="default_pool",
        **CONN,
    )
    check, approve = approval_steps(
        CONFIG, plan, approval_task_id="approve_tickets", write_task_id="create_tickets", kind="tickets",
    )
    create = CreateTicketsOperator(
        task_id="create_tickets",
        dry_run="{{ params.dry_run }}",
        tracker_project_id="{{ params.tracker_project_id }}",
        max_tickets="{{ params.max_tickets }}",
        policies=CFG.policies,
        tickets_per_call=CFG.tickets_per_call,
        group_issues=CFG.group_issues,
        trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS,
        **CONN,
    )
    publish = PublishAssetOperator(
        task_id="publish_tickets",
        changed=create.output["tickets"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
        what="tickets",
        asset=TICKETS,
        pool="default_pool",
    )
    link >> plan >> check >> [approve, create]
    approve >> create >> publish
