"""Operator of ticket creation: grouped issue-tracker tickets for findings that need work, never twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from findings_provider.config import TicketPolicy, load_pipeline_config
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.pipeline import tickets
from findings_provider.values import as_bool, as_int, as_optional_digits


class CreateTicketsOperator(FindingsBaseOperator):
    """Create grouped tickets for the findings the ticket policies select that have no ticket yet.

    Findings are grouped by (repository, rule), at most 50 per ticket and ``tickets_per_call`` tickets per
    request; every outcome is recorded per finding in ``ticket_actions``. Failed findings are retried by a
    later run; skipped ones are reported; a finding is never ticketed twice, across retries and reruns: a
    request whose response was lost is resolved by re-reading the findings, never by sending it again.
    Returns the counts and pushes ``tickets`` (tickets created) under its own XCom key.

    :param dry_run: record the plan (``planned`` rows) without calling the API (templated).
    :param tracker_project_id: issue-tracker project (digits); None: the integration's default (templated).
    :param policies: ticket policies (default: ``ticket_creation.policies`` of pipeline.yaml).
    :param tickets_per_call: tickets per request, 1..20 (default from pipeline.yaml).
    :param group_issues: one ticket per (repository, rule) group (default from pipeline.yaml).
    """

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "dry_run", "tracker_project_id")
    ui_color = "#d9edf7"

    def __init__(
        self,
        *,
        dry_run: Any = False,
        tracker_project_id: Any = None,
        policies: Sequence[TicketPolicy | dict] | None = None,
        tickets_per_call: int | None = None,
        group_issues: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run
        self.tracker_project_id = tracker_project_id
        self.policies = policies
        self.tickets_per_call = tickets_per_call
        self.group_issues = group_issues

    def run(self, context: Any) -> dict[str, Any]:
        cfg = load_pipeline_config().ticket_creation
        dry_run = as_bool(self.dry_run, "dry_run")
        tracker = as_optional_digits(self.tracker_project_id, "tracker_project_id") or cfg.tracker_project_id
        per_call = as_int(self.tickets_per_call or cfg.tickets_per_call, "tickets_per_call", minimum=1)
        group_issues = cfg.group_issues if self.group_issues is None else as_bool(self.group_issues, "group_issues")
        policies = (
            list(cfg.policies) if self.policies is None
            else [p if isinstance(p, TicketPolicy) else TicketPolicy.model_validate(p) for p in self.policies]
        )
        warehouse = self.warehouse_hook.get_warehouse()
        run_id = context.get("run_id")
        reconciled = None
        if not dry_run:
            types = [str(p.issue_type) for p in policies]
            reconciled = tickets.reconcile_ambiguous(self.api_hook.client, warehouse, types, run_id)
        batches = tickets.plan_tickets(warehouse, policies, tickets_per_call=per_call, group_issues=group_issues)
        tally = tickets.create_tickets(
            self.api_hook.client if not dry_run else None,
            warehouse,
            batches,
            dry_run=dry_run,
            tracker_project_id=tracker,
            group_issues=group_issues,
            run_id=run_id,
        )
        if tally.skipped:
            self.log.warning("%d findings skipped by the service (not retried): %s", tally.skipped,
                             dict(tally.skip_reasons.most_common(10)))
        if tally.failed:
            self.log.warning("%d findings failed (retried by the next run): %s", tally.failed,
                             dict(tally.fail_reasons.most_common(10)))
        self.log.info("tickets: %d request(s), %d tickets created for %d findings%s", tally.requests, tally.tickets,
                      tally.succeeded, f"; dry run planned {tally.planned} findings" if dry_run else "")
        created = tally.tickets + (reconciled.tickets if reconciled else 0)
        context["ti"].xcom_push(key="tickets", value=created)
        out = tally.as_dict()
        out["findings_selected"] = sum(len(b.ids) for b in batches)
        out["dry_run"] = dry_run
        if reconciled is not None and (reconciled.succeeded or reconciled.failed):
            out["reconciled"] = {"succeeded": reconciled.succeeded, "failed": reconciled.failed}
        return out
