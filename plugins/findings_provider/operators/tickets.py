"""Operators of ticket creation: plan (and ask a person above a cap), then grouped tickets, never twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from findings_provider.client.limits import FINDINGS_PER_TICKET, TICKETS_LIMIT
from findings_provider.config import TicketConfig, TicketPolicy
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.operators.links import FindingsTicketedLink, TicketsCreatedLink
from findings_provider.pipeline import approval
from findings_provider.values import as_bool, as_http_url, as_int, as_int_list, as_optional_digits, as_optional_int

#: The defaults of pipeline.yaml's ``ticket_creation``: an argument left out takes its value from here.
_TICKETS = TicketConfig()


class PlanTicketsOperator(FindingsBaseOperator):
    """Select the findings the ticket policies would ticket, group them, and record whether a person must approve.

    A person approves first when a policy would create more tickets than its cap (``max_tickets`` in
    pipeline.yaml, lowered for one run by ``max_tickets`` here). Nothing is sent and nothing is recorded in
    ``ticket_actions`` but what became of tickets of ours (``unlinked``, ``replaced``: see
    ``pipeline.ticket_links``); the plan (counts per policy, the reasons) is recorded where ``CreateTicketsOperator``
    checks it. Returns counts, ``needs_approval`` (also under its own XCom key) and the approval's subject and
    body.

    :param max_tickets: lowers every policy's cap for this run; None: the policies' caps (templated; >= 1).
    :param policies: the ticket policies (``ticket_creation.policies`` of pipeline.yaml: ``TicketPolicy`` models or
        their dicts).
    :param group_issues: one ticket per (repository, rule) group.
    """

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "max_tickets")
    ui_color = "#e3f1f9"

    def __init__(
        self,
        *,
        max_tickets: Any = None,
        policies: Sequence[TicketPolicy | dict[str, Any]],
        group_issues: bool = _TICKETS.group_issues,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.max_tickets = max_tickets
        self.policies = TicketPolicy.coerce_all(policies)
        self.group_issues = group_issues

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import ticket_links, ticket_plan

        group_issues = as_bool(self.group_issues, "group_issues")
        warehouse = self.warehouse_hook.get_warehouse()
        ticket_links.reconcile_links(warehouse, [str(p.issue_type) for p in self.policies], context.get("run_id"))
        plans = ticket_plan.plan_policies(warehouse, self.policies, group_issues=group_issues,
                                          max_tickets=as_optional_int(self.max_tickets, "max_tickets", minimum=1))
        reasons = [r for p in plans if (r := p.over_cap)]
        approval.record_plan(warehouse, approval.TICKETS, context.get("run_id"), reasons=reasons,
                             planned={p.policy.name: p.tickets for p in plans})
        subject, body = ticket_plan.approval_text(plans, reasons)
        self.log.info("plan: %d tickets for %d findings%s", sum(p.tickets for p in plans),
                      sum(len(p.selected) for p in plans),
                      f"; a person approves first: {'; '.join(reasons)}" if reasons else "")
        context["ti"].xcom_push(key="needs_approval", value=bool(reasons))
        return {"tickets": sum(p.tickets for p in plans), "findings": sum(len(p.selected) for p in plans),
                "needs_approval": bool(reasons), "approval_reasons": reasons,
                "policies": [p.summary for p in plans], "approval_subject": subject, "approval_body": body}


class CreateTicketsOperator(FindingsBaseOperator):
    """Create grouped tickets for the findings the ticket policies select that have no ticket yet.

    Findings are grouped by (repository, rule), at most 50 per ticket and ``tickets_per_call`` tickets per
    request; every outcome is recorded per finding in ``ticket_actions``. Failed findings are retried by a
    later run; skipped ones are reported; a finding is never ticketed twice, across retries and reruns: a
    request whose response was lost is resolved by re-reading the findings, never by sending it again.
    Right before sending, each policy's findings are read again from the service: any a person changed since
    the last extraction (or whose ticket of ours a person closed or removed) is dropped with the reason in
    ``dropped_findings``. A policy above its cap (``max_tickets``) needs the approval recorded by
    ``PlanTicketsOperator`` and ``PlanApprovalOperator``; without a recorded plan it stops the run instead.
    Returns the counts and pushes ``tickets`` (tickets created) under its own XCom key.

    :param dry_run: record the plan (``planned`` rows) without calling the API (templated).
    :param tracker_project_id: issue-tracker project (digits); None: the integration's default (templated).
    :param max_tickets: lowers every policy's cap for this run; None: the policies' caps (templated; >= 1).
    :param policies: the ticket policies (``ticket_creation.policies`` of pipeline.yaml: ``TicketPolicy`` models or
        their dicts).
    :param tickets_per_call: tickets per request, 1..20.
    :param group_issues: one ticket per (repository, rule) group.
    """

    operator_extra_links = (FindingsTicketedLink(), TicketsCreatedLink(),)

    lineage_reads = ("findings", "secrets")
    lineage_writes = ("ticket_actions", "findings", "write_ledger", "dropped_findings")

    template_fields: Sequence[str] = (
        *FindingsBaseOperator.template_fields, "is_dry_run", "tracker_project_id", "max_tickets",
    )
    ui_color = "#d9edf7"

    def __init__(
        self,
        *,
        dry_run: Any = False,
        tracker_project_id: Any = None,
        max_tickets: Any = None,
        policies: Sequence[TicketPolicy | dict[str, Any]],
        tickets_per_call: int = _TICKETS.tickets_per_call,
        group_issues: bool = _TICKETS.group_issues,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.tracker_project_id = tracker_project_id
        self.max_tickets = max_tickets
        self.policies = TicketPolicy.coerce_all(policies)
        self.tickets_per_call = tickets_per_call
        self.group_issues = group_issues

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import tickets

        dry_run = as_bool(self.is_dry_run, "dry_run")
        tracker = as_optional_digits(self.tracker_project_id, "tracker_project_id")
        per_call = as_int(self.tickets_per_call, "tickets_per_call",
                          minimum=TICKETS_LIMIT.minimum, maximum=TICKETS_LIMIT.maximum)
        group_issues = as_bool(self.group_issues, "group_issues")
        out = tickets.run_tickets(
            None if dry_run else self.api_hook.client,
            self.warehouse_hook.get_warehouse(),
            self.policies,
            dry_run=dry_run,
            tracker_project_id=tracker,
            tickets_per_call=per_call,
            group_issues=group_issues,
            max_tickets=as_optional_int(self.max_tickets, "max_tickets", minimum=1),
            run_id=context.get("run_id"),
        )
        context["ti"].xcom_push(key="tickets", value=out["created"])
        return out


class LinkTicketOperator(FindingsBaseOperator):
    """Link findings to a ticket that already exists in the tracker (one a person filed by hand).

    Right before the write the findings are read again from the service and stored in the warehouse: one that
    carries a different ticket by then is left alone (logged, and in ``dropped_findings`` with the reason), one
    already linked to this ticket is counted as such, one the warehouse does not hold is left alone (run
    ``findings_extraction`` first). At most ``max_links`` findings are linked per run, in one request; those
    named beyond it are reported in ``deferred``. A lost or unreadable answer is "maybe done": the findings are
    re-read and recorded from what the service says, never linked again blindly; the task then fails when some
    are not linked, so that a retry re-reads and links what is left. What the service answers is stored on the
    findings' rows (then read back from the service), recorded per finding as ``linked`` in ``ticket_actions`` and
    in the write ledger: ticket creation never tickets these findings, and a later loss of the link is recorded
    (``unlinked``) like that of a ticket it created. Nothing is done when ``finding_ids`` is empty. Returns the
    counts and pushes ``linked`` under its own XCom key.

    :param ticket_url: the ticket's address in the tracker, an http(s) URL (templated; required when
        ``finding_ids`` names any).
    :param finding_ids: the findings to link, positive integer ids (a list or its JSON text; templated).
    :param max_links: most findings linked in one run, 1..50 (templated).
    :param dry_run: record the plan (``planned`` rows, from the warehouse) without calling the API (templated).
    """

    operator_extra_links = (FindingsTicketedLink(),)

    lineage_reads = ("findings", "secrets")
    lineage_writes = ("ticket_actions", "findings", "write_ledger", "dropped_findings")

    template_fields: Sequence[str] = (
        *FindingsBaseOperator.template_fields, "ticket_url", "finding_ids", "max_links", "is_dry_run",
    )
    ui_color = "#d9edf7"

    def __init__(
        self,
        *,
        ticket_url: Any = None,
        finding_ids: Any = (),
        max_links: Any = FINDINGS_PER_TICKET,
        dry_run: Any = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ticket_url = ticket_url
        self.finding_ids = finding_ids
        self.max_links = max_links
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import ticket_links

        ids = as_int_list(self.finding_ids, "finding_ids", minimum=1)
        dry_run = as_bool(self.is_dry_run, "dry_run")
        cap = as_int(self.max_links, "max_links", minimum=1, maximum=FINDINGS_PER_TICKET)
        if not ids:
            self.log.info("no finding ids given: nothing to link")
            context["ti"].xcom_push(key="linked", value=0)
            return {"requested": 0, "linked": 0, "dry_run": dry_run}
        url = as_http_url(self.ticket_url, "ticket_url")
        out = ticket_links.link_ticket(
            None if dry_run else self.api_hook.client,
            self.warehouse_hook.get_warehouse(),
            url,
            ids,
            max_links=cap,
            dry_run=dry_run,
            run_id=context.get("run_id"),
        )
        context["ti"].xcom_push(key="linked", value=out["linked"])
        return out
