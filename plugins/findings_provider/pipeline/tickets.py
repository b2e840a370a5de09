"""Grouped ticket creation that never creates a second ticket for a finding.

Selection: a policy's findings with no ticket (``external_ticket_id`` NULL, no succeeded ticket request, and a
latest request that was neither ambiguous nor skipped). Findings are grouped locally by (repository, rule), at
most 50 per group (the service's per-ticket cap), and sent in batches of at most ``tickets_per_call`` groups,
never two groups of the same (repository, rule) in one request (the service would merge them into one ticket).

Every outcome is one ``ticket_actions`` row per finding: ``succeeded`` (the warehouse row gets the ticket at
once), ``failed`` (retried by a later run), ``skipped`` (reported, not retried) or ``planned`` (dry run). When a
response is lost (``AmbiguousWriteError``) the request is never re-sent blindly: the findings are re-read from
the API and those that now carry a ticket are recorded as succeeded; only the rest stay retryable. If even the
re-read fails they are recorded ``ambiguous`` and reconciled the same way at the start of the next run.

A finding is never sent again without a fresh re-read when a request may have ticketed it unseen: the batch
being sent is kept in ``pipeline_state`` (``IN_FLIGHT_KEY``) until its outcome is recorded, so a process killed
in between leaves it behind; and a finding found without a ticket right after a lost response may still get
one (a client timeout does not stop the server). Before such findings are sent again they are re-read, and
those that carry a ticket by then are recorded as succeeded instead.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from findings_provider.client import AmbiguousWriteError, FindingsApiError, TicketRequest
from findings_provider.config import TicketPolicy
from findings_provider.pipeline.patching import patch_findings
from findings_provider.pipeline.selection import SelectedFinding, latest_ticket_outcomes, select_findings
from findings_provider.warehouse import TicketAction, Warehouse
from findings_provider.warehouse.schema import findings, ticket_actions

log = logging.getLogger(__name__)

PER_TICKET_MAX = 50
TICKETS_PER_CALL_MAX = 20
#: ``pipeline_state`` key of the request being sent (issue type, ids), cleared once its outcome is recorded.
IN_FLIGHT_KEY = "ticket_creation.in_flight"
#: Message of findings that had no ticket on the re-read right after a lost response.
LOST = "no ticket after a lost response"


@dataclass
class TicketGroup:
    """Findings that become one ticket: same repository and rule, at most 50."""

    repository: str | None
    rule: str | None
    ids: list[int]


@dataclass
class TicketBatch:
    """One ticket-creation request: at most ``tickets_per_call`` groups of one issue type."""

    issue_type: str
    policy: str
    groups: list[TicketGroup] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return [i for g in self.groups for i in g.ids]


@dataclass
class TicketTally:
    """Counts of a ticket run (an XCom-sized summary)."""

    batches: int = 0
    requests: int = 0
    tickets: int = 0
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    ambiguous: int = 0
    recovered: int = 0
    planned: int = 0
    skip_reasons: Counter = field(default_factory=Counter)
    fail_reasons: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if not isinstance(v, Counter)}
        out["skip_reasons"] = dict(self.skip_reasons.most_common(10))
        out["fail_reasons"] = dict(self.fail_reasons.most_common(10))
        return out


# --- planning ---------------------------------------------------------------------------------------------------


def group_findings(selected: Sequence[SelectedFinding], *, group_issues: bool = True) -> list[list[TicketGroup]]:
    """Per (repository, rule) key, its groups of <= 50 findings (one group per finding when not grouping)."""
    if not group_issues:
        return [[TicketGroup(f.repository_name, f.rule_name, [f.id])] for f in selected]
    by_key: dict[tuple[str, str], list[int]] = {}
    for f in selected:
        by_key.setdefault((f.repository_name or "", f.rule_name or ""), []).append(f.id)
    return [
        [
            TicketGroup(repo or None, rule or None, ids[i : i + PER_TICKET_MAX])
            for i in range(0, len(ids), PER_TICKET_MAX)
        ]
        for (repo, rule), ids in sorted(by_key.items())
    ]


def batch_groups(issue_type: str, policy: str, keyed: list[list[TicketGroup]], per_call: int) -> list[TicketBatch]:
    """Batches of at most ``per_call`` groups, never two groups of the same key in one batch."""
    if not 1 <= per_call <= TICKETS_PER_CALL_MAX:
        raise ValueError(f"tickets_per_call {per_call} is outside 1..{TICKETS_PER_CALL_MAX} (the API's limit)")
    queues = [list(groups) for groups in keyed if groups]
    batches = []
    while queues:
        # keys with the most groups left go first: max(ceil(groups / per_call), most groups of one key) batches
        queues.sort(key=len, reverse=True)
        batch = TicketBatch(issue_type, policy)
        for queue in queues[:per_call]:
            batch.groups.append(queue.pop(0))
        queues = [q for q in queues if q]
        batches.append(batch)
    return batches


def plan_tickets(
    warehouse: Warehouse,
    policies: Iterable[TicketPolicy],
    *,
    tickets_per_call: int = TICKETS_PER_CALL_MAX,
    group_issues: bool = True,
) -> list[TicketBatch]:
    """Select each enabled policy's un-ticketed findings and cut them into request batches."""
    batches: list[TicketBatch] = []
    claimed: set[tuple[str, int]] = set()  # a finding selected by two policies is ticketed once
    for policy in policies:
        if not policy.enabled:
            log.info("ticket policy %s is disabled; skipped", policy.name)
            continue
        issue_type = str(policy.issue_type)
        selected = [
            f for f in select_findings(warehouse, issue_type, policy.select, without_ticket=True)
            if (issue_type, f.id) not in claimed
        ]
        claimed.update((issue_type, f.id) for f in selected)
        keyed = group_findings(selected, group_issues=group_issues)
        planned = batch_groups(issue_type, policy.name, keyed, tickets_per_call)
        log.info("policy %s selects %d %s findings without a ticket: %d tickets in %d request(s)",
                 policy.name, len(selected), issue_type, sum(len(g) for g in keyed), len(planned))
        batches.extend(planned)
    return batches


# --- execution --------------------------------------------------------------------------------------------------


def ticket_of(finding: Any) -> dict[str, Any] | None:
    """The ``external_ticket`` of a typed finding (also under ``usage`` for supply-chain findings)."""
    ticket = getattr(finding, "external_ticket", None)
    if ticket is None and isinstance(getattr(finding, "usage", None), dict):
        ticket = finding.usage.get("external_ticket")
    if ticket is None:
        return None
    data = ticket if isinstance(ticket, dict) else ticket.model_dump(exclude_none=True)
    return data if data.get("id") is not None else None


def _mark_ticketed(warehouse: Warehouse, issue_type: str, ids: Sequence[int], ticket: dict[str, Any]) -> None:
    patch_findings(warehouse, issue_type, ids, {"external_ticket": ticket})


def create_tickets(
    client: Any,
    warehouse: Warehouse,
    batches: Sequence[TicketBatch],
    *,
    dry_run: bool = False,
    tracker_project_id: str | None = None,
    group_issues: bool = True,
    run_id: str | None = None,
) -> TicketTally:
    """Send each batch (or record it as planned in a dry run) and record one outcome per finding."""
    tally = TicketTally(batches=len(batches))
    unresolved: Exception | None = None
    suspects = {} if dry_run else {t: unseen_ticket_suspects(warehouse, t) for t in {b.issue_type for b in batches}}
    for number, batch in enumerate(batches, 1):
        if dry_run:
            warehouse.record_ticket_actions(
                TicketAction(batch.issue_type, i, "planned", run_id=run_id, message=f"dry run, policy {batch.policy}")
                for i in batch.ids
            )
            tally.planned += len(batch.ids)
            continue
        suspect = suspects[batch.issue_type] & set(batch.ids)
        if suspect:
            batch = _without_unseen_tickets(client, warehouse, batch, suspect, tally, run_id)
            if not batch.groups:
                continue
        warehouse.set_state(IN_FLIGHT_KEY, {"issue_type": batch.issue_type, "ids": batch.ids, "run_id": run_id})
        request = TicketRequest(
            issue_type=batch.issue_type,
            issue_ids=[str(i) for i in batch.ids],
            group_issues=group_issues,
            limit=TICKETS_PER_CALL_MAX,
            tracker_project_id=tracker_project_id,
        )
        tally.requests += 1
        try:
            result = client.create_tickets(request)
        except AmbiguousWriteError as exc:
            log.warning("ticket request %d of %d: response lost (%s); re-reading its %d findings instead of "
                        "sending it again", number, len(batches), exc, len(batch.ids))
            try:
                _resolve_lost(client, warehouse, batch.issue_type, batch.groups, tally, run_id, str(exc))
            except Exception as reread_exc:
                log.error("re-reading the findings of the lost request failed (%s); recorded as ambiguous, "
                          "reconciled by the next run", reread_exc)
                warehouse.record_ticket_actions(
                    TicketAction(batch.issue_type, i, "ambiguous", run_id=run_id, message=str(exc)[:1000])
                    for i in batch.ids
                )
                tally.ambiguous += len(batch.ids)
                unresolved = reread_exc
                warehouse.set_state(IN_FLIGHT_KEY, None)
                break
            warehouse.set_state(IN_FLIGHT_KEY, None)
            continue
        except FindingsApiError:  # any other client error: the server certainly did not act on the request
            warehouse.set_state(IN_FLIGHT_KEY, None)
            raise
        _record_result(warehouse, batch, result, tally, run_id)
        warehouse.set_state(IN_FLIGHT_KEY, None)
        log.info("ticket request %d of %d: %d findings sent; %d tickets created, %d failed, %d skipped",
                 number, len(batches), len(batch.ids), len(result.succeeded),
                 sum(len(f.issue_ids) for f in result.failed), sum(len(s.issue_ids) for s in result.skipped))
    if unresolved is not None:
        raise unresolved
    return tally


def _record_result(
    warehouse: Warehouse, batch: TicketBatch, result: Any, tally: TicketTally, run_id: str | None
) -> None:
    actions: list[TicketAction] = []
    accounted: set[int] = set()
    for item in result.succeeded:
        ticket = {"id": item.ticket_id, "url": item.ticket_url, "externalSlug": item.external_slug,
                  "linkedIssueIds": list(item.issue_ids)}
        ids = [int(i) for i in item.issue_ids]
        actions += [
            TicketAction(batch.issue_type, i, "succeeded", run_id=run_id, ticket_id=item.ticket_id,
                         ticket_url=item.ticket_url, external_slug=item.external_slug)
            for i in ids
        ]
        accounted.update(ids)
        tally.tickets += 1
        tally.succeeded += len(ids)
        if item.ticket_id is not None:
            _mark_ticketed(warehouse, batch.issue_type, ids, ticket)
    for item in result.failed:
        ids = [int(i) for i in item.issue_ids if int(i) not in accounted]
        actions += [TicketAction(batch.issue_type, i, "failed", run_id=run_id, message=item.error) for i in ids]
        accounted.update(ids)
        tally.failed += len(ids)
        tally.fail_reasons[item.error or "no reason given"] += len(ids)
    for item in result.skipped:
        ids = [int(i) for i in item.issue_ids if int(i) not in accounted]
        actions += [TicketAction(batch.issue_type, i, "skipped", run_id=run_id, message=item.reason) for i in ids]
        accounted.update(ids)
        tally.skipped += len(ids)
        tally.skip_reasons[item.reason or "no reason given"] += len(ids)
    silent = [i for i in batch.ids if i not in accounted]
    actions += [
        TicketAction(batch.issue_type, i, "failed", run_id=run_id, message="not reported by the service")
        for i in silent
    ]
    tally.failed += len(silent)
    if silent:
        tally.fail_reasons["not reported by the service"] += len(silent)
    warehouse.record_ticket_actions(actions)


def reread_tickets(client: Any, issue_type: str, groups: Sequence[TicketGroup]) -> dict[int, dict[str, Any] | None]:
    """Re-read the findings of ``groups`` from the API: id -> its external ticket (None when it has none)."""
    wanted = {i for g in groups for i in g.ids}
    found: dict[int, dict[str, Any] | None] = {}
    if issue_type == "secrets":
        for finding in client.iter_secrets():
            if finding.id in wanted:
                found[finding.id] = ticket_of(finding)
                if len(found) == len(wanted):
                    break
    else:
        for repo, rule in sorted({(g.repository, g.rule) for g in groups}, key=str):
            filters: dict[str, Any] = {"repos": [repo]} if repo else {}
            if issue_type == "sast" and rule:
                filters["rules"] = [rule]
            todo = {i for g in groups if (g.repository, g.rule) == (repo, rule) for i in g.ids}
            for finding in client.iter_findings(issue_type, page_size=3000, **filters):
                if finding.id in todo:
                    found[finding.id] = ticket_of(finding)
                    todo.discard(finding.id)
                    if not todo:
                        break
    return {i: found.get(i) for i in wanted}


def _resolve_lost(
    client: Any,
    warehouse: Warehouse,
    issue_type: str,
    groups: Sequence[TicketGroup],
    tally: TicketTally,
    run_id: str | None,
    cause: str,
) -> None:
    """Record the findings of a request with an unknown outcome from what the API now says about them."""
    tickets = reread_tickets(client, issue_type, groups)
    actions = []
    for finding_id, ticket in sorted(tickets.items()):
        if ticket is None:
            actions.append(TicketAction(issue_type, finding_id, "failed", run_id=run_id,
                                        message=f"{LOST}; retried next run ({cause[:200]})"))
            tally.failed += 1
            tally.fail_reasons[LOST] += 1
    warehouse.record_ticket_actions(actions)
    _record_recovered(warehouse, issue_type, tickets, tally, run_id, "recorded from a re-read after a lost response")


def _record_recovered(warehouse: Warehouse, issue_type: str, tickets: dict[int, dict[str, Any] | None],
                      tally: TicketTally, run_id: str | None, message: str) -> set[int]:
    """Record the findings that a re-read found with a ticket as succeeded; return their ids."""
    actions = []
    by_ticket: dict[int, list[int]] = {}
    for finding_id, ticket in sorted(tickets.items()):
        if ticket is None:
            continue
        actions.append(TicketAction(issue_type, finding_id, "succeeded", run_id=run_id, ticket_id=int(ticket["id"]),
                                    ticket_url=ticket.get("url"), external_slug=ticket.get("externalSlug"),
                                    message=message))
        by_ticket.setdefault(int(ticket["id"]), []).append(finding_id)
        tally.succeeded += 1
        tally.recovered += 1
    for ticket_id, ids in by_ticket.items():
        ticket = next(t for t in tickets.values() if t is not None and int(t["id"]) == ticket_id)
        _mark_ticketed(warehouse, issue_type, ids, ticket)
    tally.tickets += len(by_ticket)
    warehouse.record_ticket_actions(actions)
    return {i for ids in by_ticket.values() for i in ids}


def unseen_ticket_suspects(warehouse: Warehouse, issue_type: str) -> set[int]:
    """Findings that a request may have ticketed without the warehouse knowing.

    Those of the request in flight when an earlier run stopped (killed before recording its outcome), and those
    whose latest outcome is "no ticket right after a lost response" (the server may have acted later).
    """
    suspects: set[int] = set()
    marker = warehouse.get_state(IN_FLIGHT_KEY)
    if isinstance(marker, dict) and marker.get("issue_type") == issue_type:
        suspects.update(int(i) for i in marker.get("ids") or ())
    t = ticket_actions.c
    latest = (
        select(t.finding_id, func.max(t.id).label("last"))
        .where(t.issue_type == issue_type, t.outcome != "planned")
        .group_by(t.finding_id)
        .subquery()
    )
    stmt = select(t.finding_id).join(latest, latest.c.last == t.id).where(t.outcome == "failed",
                                                                           t.message.startswith(LOST))
    with warehouse.engine.connect() as conn:
        suspects.update(conn.execute(stmt).scalars())
    return suspects


def _without_unseen_tickets(client: Any, warehouse: Warehouse, batch: TicketBatch, suspect: set[int],
                            tally: TicketTally, run_id: str | None) -> TicketBatch:
    """Re-read the suspect findings of ``batch``; record those that have a ticket by now; the batch without them."""
    groups = [TicketGroup(g.repository, g.rule, [i for i in g.ids if i in suspect]) for g in batch.groups]
    found = reread_tickets(client, batch.issue_type, [g for g in groups if g.ids])
    done = _record_recovered(warehouse, batch.issue_type, found, tally, run_id,
                             "recorded from a re-read before sending again: an earlier request created it")
    if done:
        log.warning("%d %s findings already had a ticket from an earlier request whose outcome was not recorded; "
                    "not sent again", len(done), batch.issue_type)
    rest = [TicketGroup(g.repository, g.rule, [i for i in g.ids if i not in done]) for g in batch.groups]
    return TicketBatch(batch.issue_type, batch.policy, [g for g in rest if g.ids])


def reconcile_ambiguous(
    client: Any, warehouse: Warehouse, issue_types: Iterable[str], run_id: str | None
) -> TicketTally:
    """Resolve findings whose latest ticket request had an unknown outcome, by re-reading them from the API."""
    tally = TicketTally()
    for issue_type in dict.fromkeys(issue_types):
        ids = latest_ticket_outcomes(warehouse, issue_type, "ambiguous")
        if not ids:
            continue
        with warehouse.engine.connect() as conn:
            rows = conn.execute(
                select(findings.c.id, findings.c.repository_name, findings.c.rule_name).where(
                    findings.c.issue_type == issue_type, findings.c.id.in_(ids)
                )
            ).all()
        known = {r.id: r for r in rows}
        groups = [TicketGroup(known[i].repository_name if i in known else None,
                              known[i].rule_name if i in known else None, [i]) for i in ids]
        log.info("reconciling %d %s findings whose ticket request had an unknown outcome", len(ids), issue_type)
        _resolve_lost(client, warehouse, issue_type, groups, tally, run_id, "reconciled after an ambiguous request")
    return tally
