"""
### Ticket creation

Creates grouped issue-tracker tickets for findings that need work, per the policies in `include/pipeline.yaml`
(`ticket_creation.policies`). Default: open findings with no ticket that are code findings with autotriage
verdict `true_positive` and severity `high`/`critical`, or supply-chain findings that are `reachable` or
`always_reachable` with severity `high`/`critical` (a `secrets` policy exists, disabled by default). Runs after
each triage run (the `findings://warehouse/triage_actions` Asset), on its own schedule if configured, and on a
manual trigger.

- **create_tickets** groups findings by repository and rule (at most 50 per ticket), sends at most 20 tickets
  per request with `group_issues: true`, and records every outcome per finding in `ticket_actions`
  (`succeeded`, `failed`, `skipped`). Failed findings are retried by a later run; skipped ones are reported. A
  finding is never ticketed twice, across retries and reruns: when a response is lost, the findings are
  re-read from the API instead of sending the request again.
- **publish_tickets** updates the `findings://warehouse/ticket_actions` Asset when tickets were created.

**Params**

- `dry_run` (boolean, default false): record the plan (`planned` rows) without calling the API.
- `tracker_project_id` (null or digits, default null): the issue-tracker project; null uses the integration's
  default project.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from findings_provider.assets import TICKETS, TRIAGE
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import conn_ids, dag_settings, dry_run_param
from findings_provider.operators.findings import PublishAssetOperator
from findings_provider.operators.tickets import CreateTicketsOperator

CONFIG = load_pipeline_config()
CFG = CONFIG.ticket_creation
CONN = conn_ids(CONFIG)

with DAG(
    dag_id="ticket_creation",
    description="Create grouped issue-tracker tickets for findings that need work",
    tags=["findings", "security", "tickets"],
    **dag_settings(CONFIG, schedule=CFG.schedule, assets=TRIAGE),
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
    },
) as dag:
    create = CreateTicketsOperator(
        task_id="create_tickets",
        dry_run="{{ params.dry_run }}",
        tracker_project_id="{{ params.tracker_project_id }}",
        **CONN,
    )
    publish = PublishAssetOperator(
        task_id="publish_tickets",
        changed=create.output["tickets"],
        what="tickets",
        asset=TICKETS,
        pool="default_pool",
    )
    create >> publish
