"""A ticket run: grouped ticket creation that never creates a second ticket for a finding.

:func:`run_tickets` reconciles what earlier runs left unknown, plans (:mod:`.ticket_plan`: selection, grouping,
caps), re-reads each request's findings right before that request (:class:`BatchRereads`), sends the requests and
records one outcome per finding (:mod:`.ticket_send`, :mod:`.ticket_outcomes`). After the run's requests, every finding
they named is read back from the service and stored (:func:`settle_batches`, ``freshness.settle``), so the
warehouse holds what the service holds, a person's act of a moment before the write included.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from findings_provider.client.limits import TICKETS_LIMIT
from findings_provider.config import FindingSelector, TicketPolicy
from findings_provider.pipeline import approval, freshness, ledger, ticket_links
from findings_provider.pipeline.selection import TICKET_GONE, SelectedFinding, latest_ticket_outcomes
from findings_provider.pipeline.ticket_outcomes import (
    TicketTally,
    reconcile_ambiguous,
    record_known_tickets,
    record_recovered,
    ticket_in_raw,
    unseen_ticket_suspects,
)
from findings_provider.pipeline.ticket_plan import (
    TicketBatch,
    TicketGroup,
    TicketPlan,
    batch_groups,
    group_findings,
    limit_tickets,
    plan_batches,
    plan_policies,
)
from findings_provider.pipeline.ticket_send import create_tickets, sending_client
from findings_provider.warehouse import FINDING_COLUMNS, Warehouse

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)


def fresh_batches(
    client: FindingsClient,
    warehouse: Warehouse,
    plans: Sequence[TicketPlan],
    *,
    allowed: dict[str, int],
    tickets_per_call: int = TICKETS_LIMIT.maximum,
    group_issues: bool = True,
    run_id: str | None = None,
) -> tuple[list[TicketBatch], BatchRereads]:
    """Batch at most ``allowed`` tickets per policy, and the re-read that each batch gets right before its own
    request (:class:`BatchRereads`, given to ``create_tickets``). A finding the re-read drops leaves its ticket's
    room unused in this run: the cap counts the tickets planned."""
    batches: list[TicketBatch] = []
    rereads = BatchRereads(client, warehouse, run_id=run_id)
    for plan in plans:
        name, issue_type = plan.policy.name, str(plan.policy.issue_type)
        rereads.policies[name] = plan.policy
        rereads.known[name] = {f.id: f for f in plan.selected}
        rereads.redo[name] = (latest_ticket_outcomes(warehouse, issue_type, TICKET_GONE)
                              if plan.policy.reticket_unlinked else [])
        keyed = group_findings(plan.selected, group_issues=group_issues)
        limited = limit_tickets(keyed, allowed.get(name, plan.cap.value))
        deferred = sum(len(g) for g in keyed) - sum(len(g) for g in limited)
        if deferred:
            log.warning("policy %s: %d tickets above the %d this run may create wait for the next run", name,
                        deferred, allowed.get(name, plan.cap.value))
            rereads.stats["deferred_tickets"] += deferred
        batches += batch_groups(issue_type, name, limited, tickets_per_call)
    return batches, rereads


@dataclass
class BatchRereads:
    """The re-read of each ticket batch right before its request (``create_tickets`` calls it per batch).

    The batch's findings are read again (``freshness.reread``: the policy's filters narrowed to the batch's
    repositories and rules); those a person changed are dropped with the reason, those an earlier request of ours
    ticketed unseen (``unseen_ticket_suspects``) are recorded, never sent again. The batch goes out with the rest,
    stamped with the time of the re-read (``read_at``, the start of its race window). ``batches``: the batches as
    re-read (what was sent, or was about to be); ``stats``: the re-reads' counts."""

    client: FindingsClient
    warehouse: Warehouse
    run_id: str | None = None
    policies: dict[str, TicketPolicy] = field(default_factory=dict)
    known: dict[str, dict[int, SelectedFinding]] = field(default_factory=dict)
    redo: dict[str, list[int]] = field(default_factory=dict)
    batches: list[TicketBatch] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=lambda: {
        "reread_requests": 0, "dropped": 0, "deferred_tickets": 0, "recovered_before_sending": 0})

    def __call__(self, batch: TicketBatch, label: str) -> TicketBatch:
        name, issue_type = batch.policy, batch.issue_type
        known = self.known[name]
        fresh = freshness.reread(self.client, self.warehouse, kind=ledger.TICKET, policy=name, issue_type=issue_type,
                                 selector=self.policies[name].selector, candidates=[known[i] for i in batch.ids],
                                 ours=unseen_ticket_suspects(self.warehouse, issue_type), redo=self.redo[name],
                                 run_id=self.run_id, label=label, budget_for=len(known))
        self.stats["reread_requests"] += fresh.requests
        self.stats["dropped"] += len(fresh.dropped)
        if fresh.ours:  # an earlier request of ours ticketed them after all: record it, never send again
            found = {i: ticket_in_raw(row[FINDING_COLUMNS.index("raw")]) for i, row in fresh.ours.items()}
            self.stats["recovered_before_sending"] += len(record_recovered(
                self.warehouse, issue_type, found, TicketTally(), self.run_id,
                "recorded from the re-read before sending: an earlier request of ours created it"))
        kept = set(fresh.kept)
        groups = [TicketGroup(g.repository, g.rule, [i for i in g.ids if i in kept]) for g in batch.groups]
        out = replace(batch, groups=[g for g in groups if g.ids], read_at=fresh.read_at)
        if out.groups:
            self.batches.append(out)
        return out


def run_tickets(
    client: FindingsClient | None,
    warehouse: Warehouse,
    policies: Sequence[TicketPolicy],
    *,
    dry_run: bool = False,
    tracker_project_id: str | None = None,
    tickets_per_call: int = TICKETS_LIMIT.maximum,
    group_issues: bool = True,
    max_tickets: int | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """One ticket run: record tickets of ours the service lost, reconcile unknown outcomes, plan, check caps and
    approval, re-read, create, record.

    Raises ``approval.ApprovalError`` (nothing sent) when the run's recorded plan needed a person's approval
    and has none, or when there is no recorded plan and a policy is above its cap.
    """
    record = approval.get_plan(warehouse, approval.TICKETS, run_id)
    if not dry_run and (problem := approval.missing_approval(record)):
        raise approval.ApprovalError(f"not creating tickets: {problem}")
    # tickets of ours the service no longer links (as the last extraction or re-read stored them): recorded
    lost = ticket_links.reconcile_links(warehouse, [str(p.issue_type) for p in policies], run_id)
    reconciled = None if dry_run else reconcile_ambiguous(
        sending_client(client), warehouse, [str(p.issue_type) for p in policies], run_id)
    if not dry_run:  # what an extraction has shown since: tickets a lost answer did create
        for issue_type in dict.fromkeys(str(p.issue_type) for p in policies):
            record_known_tickets(warehouse, issue_type, run_id)
    plans = plan_policies(warehouse, policies, group_issues=group_issues, max_tickets=max_tickets)
    # without a recorded plan (no approval step) a policy above its cap stops the run; with one, a run acts on at
    # most what was approved (or the cap), and what arrived since waits for the next run
    over = [r for p in plans if (r := p.over_cap)]
    if record is None and over and not dry_run:
        raise approval.ApprovalError("; ".join(over) + ". Nothing was sent: run with an approval step (the "
                                     "ticket_creation DAG asks a person in the UI), or raise the cap")
    allowed = {p.policy.name: max(p.cap.value, approval.approved_count(record, p.policy.name)) for p in plans}
    stats: dict[str, Any] = {}
    rereads: BatchRereads | None = None
    if dry_run:
        batches = plan_batches(plans, tickets_per_call)
    else:
        batches, rereads = fresh_batches(sending_client(client), warehouse, plans, allowed=allowed,
                                         tickets_per_call=tickets_per_call, group_issues=group_issues, run_id=run_id)
        stats = rereads.stats
    try:
        tally = create_tickets(client, warehouse, batches, dry_run=dry_run, tracker_project_id=tracker_project_id,
                               group_issues=group_issues, run_id=run_id, reread=rereads)
    finally:  # read back what the requests named, also when one failed: the warehouse equals the service for them
        if rereads is not None:
            batches = rereads.batches
            settle_batches(sending_client(client), warehouse, batches, {p.name: p.selector for p in policies}, stats,
                           run_id)
    if tally.skipped:
        log.warning("%d findings skipped by the service (not retried): %s", tally.skipped,
                    dict(tally.skip_reasons.most_common(10)))
    if tally.failed:
        log.warning("%d findings failed (retried by the next run): %s", tally.failed,
                    dict(tally.fail_reasons.most_common(10)))
    log.info("tickets: %d request(s), %d tickets created for %d findings%s", tally.requests, tally.tickets,
             tally.succeeded, f"; dry run planned {tally.planned} findings" if dry_run else "")
    out = tally.as_dict()
    out["findings_selected"] = sum(len(b.ids) for b in batches)
    out["dry_run"] = dry_run
    out["created"] = tally.tickets + (reconciled.tickets if reconciled else 0)
    out.update({"settle_requests": 0, "settled": 0, "settle_named": 0, **stats})
    out["tickets_lost"] = lost
    if reconciled is not None and (reconciled.succeeded or reconciled.failed):
        out["reconciled"] = {"succeeded": reconciled.succeeded, "failed": reconciled.failed}
    return out


def settle_batches(client: FindingsClient, warehouse: Warehouse, batches: Sequence[TicketBatch],
                   selectors: dict[str, FindingSelector], counts: dict[str, Any], run_id: str | None = None) -> None:
    """``freshness.settle_written`` for the findings of ``batches``, one re-read per policy and issue type; then
    the findings of a lost answer that were read back with a ticket are recorded (:func:`record_known_tickets`)."""
    named: dict[tuple[str, str], list[int]] = {}
    for batch in batches:
        named.setdefault((batch.policy, batch.issue_type), []).extend(batch.ids)
    for (policy, issue_type), ids in named.items():
        freshness.settle_written(client, warehouse, issue_type, selectors[policy], ids, counts)
    for issue_type in dict.fromkeys(t for _, t in named):
        counts["recovered_after_write"] = counts.get("recovered_after_write", 0) + record_known_tickets(
            warehouse, issue_type, run_id)
