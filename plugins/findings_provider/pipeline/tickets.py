"""Grouped ticket creation that never creates a second ticket for a finding.

Selection: a policy's findings with no ticket (``external_ticket_id`` NULL, no succeeded ticket request, and a
latest request that was neither ambiguous nor skipped). Findings are grouped locally by (repository, rule), at
most 50 per group (the service's per-ticket cap), and sent in batches of at most ``tickets_per_call`` groups,
never two groups of the same (repository, rule) in one request (the service would merge them into one ticket).

Every outcome is one ``ticket_actions`` row per finding: ``succeeded`` (the warehouse row gets the ticket at
once), ``failed`` (retried by a later run), ``skipped`` (reported, not retried) or ``planned`` (dry run). After the
run's requests, every finding they named is read back from the service and stored (``freshness.settle``), so
the warehouse holds what the service holds, a person's act of a moment before the write included. When a
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
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import func, select

from findings_provider.client import AmbiguousWriteError, FindingsApiError, TicketRequest, TransportError
from findings_provider.client.canonical import as_int
from findings_provider.client.limits import FINDINGS_PAGE_SIZE, TICKETS_LIMIT
from findings_provider.client.models import ExternalTicket
from findings_provider.client.vocabulary import IssueType
from findings_provider.config import FindingSelector, TicketPolicy
from findings_provider.pipeline import approval, freshness, ledger
from findings_provider.pipeline.approval import Cap
from findings_provider.pipeline.patching import patch_findings
from findings_provider.pipeline.selection import (
    SelectedFinding,
    latest_ticket_outcomes,
    select_by_ids,
    select_findings,
)
from findings_provider.text import md_escape
from findings_provider.warehouse import FINDING_COLUMNS, TicketAction, Warehouse
from findings_provider.warehouse.batches import id_batches
from findings_provider.warehouse.schema import findings, ticket_actions

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)

PER_TICKET_MAX = 50
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
    #: When its findings were re-read from the service (``time.monotonic()``; None: not re-read, a dry run's).
    read_at: float | None = None

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
    resent: int = 0
    planned: int = 0
    skip_reasons: Counter[str] = field(default_factory=Counter)
    fail_reasons: Counter[str] = field(default_factory=Counter)
    #: Seconds from each request's re-read to the request (``freshness.window_summary``).
    windows: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if not isinstance(v, (Counter, list))}
        out["skip_reasons"] = dict(self.skip_reasons.most_common(10))
        out["fail_reasons"] = dict(self.fail_reasons.most_common(10))
        out.update(freshness.window_summary(self.windows))
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
    TICKETS_LIMIT.check(per_call, "tickets_per_call")
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


@dataclass
class TicketPlan:
    """One policy's un-ticketed findings, grouped into tickets, and the cap it is held to."""

    policy: TicketPolicy
    selected: list[SelectedFinding]
    keyed: list[list[TicketGroup]]
    cap: Cap

    @property
    def tickets(self) -> int:
        return sum(len(groups) for groups in self.keyed)

    @property
    def over_cap(self) -> str | None:
        return self.cap.excess(self.tickets, "tickets")

    @property
    def summary(self) -> dict[str, Any]:
        return {"policy": self.policy.name, "issue_type": str(self.policy.issue_type),
                "findings": len(self.selected), "tickets": self.tickets, "cap": self.cap.value}


def plan_policies(
    warehouse: Warehouse,
    policies: Iterable[TicketPolicy],
    *,
    group_issues: bool = True,
    max_tickets: int | None = None,
) -> list[TicketPlan]:
    """Select each enabled policy's un-ticketed findings and group them; ``max_tickets`` lowers every cap."""
    plans: list[TicketPlan] = []
    claimed: set[tuple[str, int]] = set()  # a finding selected by two policies is ticketed once
    for policy in policies:
        if not policy.enabled:
            log.info("ticket policy %s is disabled; skipped", policy.name)
            continue
        issue_type = str(policy.issue_type)
        selected = [
            f for f in select_findings(warehouse, issue_type, policy.selector, without_ticket=True)
            if (issue_type, f.id) not in claimed
        ]
        claimed.update((issue_type, f.id) for f in selected)
        plan = TicketPlan(policy, selected, group_findings(selected, group_issues=group_issues),
                          Cap(policy.name, policy.max_tickets, max_tickets))
        log.info("policy %s selects %d %s findings without a ticket: %d tickets", policy.name, len(selected),
                 issue_type, plan.tickets)
        plans.append(plan)
    return plans


def _ticket_in(raw: str) -> dict[str, Any] | None:
    """The external ticket in a finding's raw JSON (:func:`ticket_in_data`)."""
    return ticket_in_data(orjson.loads(raw))


def ticket_in_data(data: dict[str, Any]) -> dict[str, Any] | None:
    """The external ticket in a finding's parsed raw JSON, canonical (``id`` an int, ``url``, ``externalSlug``), in
    either dialect: ``external_ticket`` or ``externalTicket`` (secrets), at the top level or under ``usage``
    (supply chain); None without one, or without an id."""
    ticket = _either_ticket(data)
    if ticket is None and isinstance(data.get("usage"), dict):
        ticket = _either_ticket(data["usage"])
    ident = as_int(ticket.get("id")) if isinstance(ticket, dict) else None
    if ticket is None or ident is None:
        return None
    return {"id": ident, "url": ticket.get("url"),
            "externalSlug": ticket.get("externalSlug", ticket.get("external_slug"))}


def _either_ticket(data: dict[str, Any]) -> Any:
    ticket = data.get("external_ticket")
    return ticket if ticket is not None else data.get("externalTicket")


def limit_tickets(keyed: list[list[TicketGroup]], most: int) -> list[list[TicketGroup]]:
    """At most ``most`` tickets, whole keys first (a key's later groups wait for the next run)."""
    out: list[list[TicketGroup]] = []
    left = most
    for groups in keyed:
        if left <= 0:
            break
        out.append(groups[:left])
        left -= len(out[-1])
    return out


def plan_batches(plans: Sequence[TicketPlan], tickets_per_call: int) -> list[TicketBatch]:
    """Request batches of every plan, as they stand (a dry run's preview)."""
    return [b for p in plans for b in batch_groups(str(p.policy.issue_type), p.policy.name, p.keyed, tickets_per_call)]


def plan_tickets(
    warehouse: Warehouse,
    policies: Iterable[TicketPolicy],
    *,
    tickets_per_call: int = TICKETS_LIMIT.maximum,
    group_issues: bool = True,
) -> list[TicketBatch]:
    """Select each enabled policy's un-ticketed findings and cut them into request batches (no caps, no re-read)."""
    return plan_batches(plan_policies(warehouse, policies, group_issues=group_issues), tickets_per_call)


def fresh_batches(
    client: FindingsClient,
    warehouse: Warehouse,
    plans: Sequence[TicketPlan],
    *,
    allowed: dict[str, int],
    tickets_per_call: int = TICKETS_LIMIT.maximum,
    group_issues: bool = True,
    run_id: str | None = None,
) -> tuple[list[TicketBatch], dict[str, Any]]:
    """Re-read each plan's findings from the service, keep the unchanged ones, and batch at most ``allowed``
    tickets per policy; return the batches and the re-read's counts."""
    batches: list[TicketBatch] = []
    stats = {"reread_requests": 0, "dropped": 0, "deferred_tickets": 0, "recovered_before_sending": 0}
    for plan in plans:
        name, issue_type = plan.policy.name, str(plan.policy.issue_type)
        fresh = freshness.reread(client, warehouse, kind=ledger.TICKET, policy=name, issue_type=issue_type,
                                 selector=plan.policy.selector, candidates=plan.selected,
                                 ours=unseen_ticket_suspects(warehouse, issue_type), run_id=run_id)
        stats["reread_requests"] += fresh.requests
        stats["dropped"] += len(fresh.dropped)
        if fresh.ours:  # an earlier request of ours ticketed them after all: record it, never send again
            found = {i: _ticket_in(row[FINDING_COLUMNS.index("raw")]) for i, row in fresh.ours.items()}
            stats["recovered_before_sending"] += len(_record_recovered(
                warehouse, issue_type, found, TicketTally(), run_id,
                "recorded from the re-read before sending: an earlier request of ours created it"))
        kept = set(fresh.kept)
        keyed = group_findings([f for f in plan.selected if f.id in kept], group_issues=group_issues)
        limited = limit_tickets(keyed, allowed.get(name, plan.cap.value))
        deferred = sum(len(g) for g in keyed) - sum(len(g) for g in limited)
        if deferred:
            log.warning("policy %s: %d tickets above the %d this run may create wait for the next run", name,
                        deferred, allowed.get(name, plan.cap.value))
            stats["deferred_tickets"] += deferred
        read_at = time.monotonic()
        batches += [replace(b, read_at=read_at) for b in batch_groups(issue_type, name, limited, tickets_per_call)]
    return batches, stats


def approval_text(plans: Sequence[TicketPlan], reasons: Sequence[str]) -> tuple[str, str]:
    """Subject and Markdown body of the approval request (data from the service escaped)."""
    total = sum(p.tickets for p in plans)
    subject = f"Create {total} tickets?"
    lines = [
        f"Approve to create up to **{total}** tickets; reject to create none. Right before sending, each "
        "finding is read again from the service: any that a person changed in the meantime is left alone.",
        "", "Why a person is asked:", "", *[f"- {md_escape(r, 300)}" for r in reasons], "",
        "| policy | issue type | findings | tickets | cap |", "|---|---|---|---|---|",
        *[f"| {md_escape(p.policy.name)} | {p.policy.issue_type} | {len(p.selected)} | {p.tickets} | "
          f"{p.cap.value} |" for p in plans],
    ]
    sample = [g for p in plans for groups in p.keyed for g in groups][:10]
    if sample:
        lines += ["", "Sample tickets:", "", "| repository | rule | findings |", "|---|---|---|"]
        lines += [f"| {md_escape(g.repository, 80)} | {md_escape(g.rule, 80)} | {len(g.ids)} |" for g in sample]
    return subject, "\n".join(lines)


# --- execution --------------------------------------------------------------------------------------------------


def ticket_of(finding: Any) -> dict[str, Any] | None:
    """The external ticket of a typed finding in canonical form (``id`` an int, ``externalSlug``, ...), also under
    ``usage`` for supply-chain findings; either key style (``external_ticket``/``externalTicket``)."""
    ticket = getattr(finding, "external_ticket", None)
    if ticket is None and isinstance(getattr(finding, "usage", None), dict):
        ticket = _either_ticket(finding.usage)
    if ticket is None:
        return None
    if isinstance(ticket, dict):
        try:
            ticket = ExternalTicket.model_validate(ticket)
        except ValueError:
            return None
    data = ticket.model_dump(exclude_none=True) if isinstance(ticket, ExternalTicket) else None
    return data if data and data.get("id") is not None else None


def _mark_ticketed(warehouse: Warehouse, issue_type: str, ids: Sequence[int], ticket: dict[str, Any],
                   run_id: str | None) -> None:
    patch_findings(warehouse, issue_type, ids, {"external_ticket": ticket})
    ledger.record(warehouse, ledger.TICKET, ledger.TICKET_SCOPE, issue_type, ids, run_id)


def refused_before_processing(exc: BaseException) -> bool:
    """Whether a failed ticket request certainly did nothing: a 4xx answer, or a connection that never opened.

    The client raises ``TransportError`` for ticket creation only when the connection never opened (anything
    later is ``AmbiguousWriteError``). Every other failure, whatever its type, may have created tickets.
    """
    if not isinstance(exc, FindingsApiError) or isinstance(exc, AmbiguousWriteError):
        return False
    if exc.status_code is not None:
        return 400 <= exc.status_code < 500
    return isinstance(exc, TransportError)


def _sender(client: FindingsClient | None) -> FindingsClient:
    """The client of a run that sends (only a dry run goes without one)."""
    if client is None:
        raise ValueError("only a dry run goes without an API client")
    return client


def create_tickets(
    client: FindingsClient | None,
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
        sender = _sender(client)
        suspect = suspects[batch.issue_type] & set(batch.ids)
        if suspect:
            batch = _without_unseen_tickets(sender, warehouse, batch, suspect, tally, run_id)
            if not batch.groups:
                continue
        warehouse.set_state(IN_FLIGHT_KEY, {"issue_type": batch.issue_type, "ids": batch.ids, "run_id": run_id})
        request = TicketRequest(
            issue_type=batch.issue_type,
            issue_ids=[str(i) for i in batch.ids],
            group_issues=group_issues,
            limit=TICKETS_LIMIT.maximum,
            tracker_project_id=tracker_project_id,
        )
        sent = _send_batch(sender, warehouse, batch, request, tally, run_id, f"{number} of {len(batches)}")
        if isinstance(sent, _Unanswered):
            warehouse.set_state(IN_FLIGHT_KEY, None)
            unresolved = sent.error
            if unresolved is not None:
                break
            continue
        result, actions, tickets = sent
        _record_result(warehouse, batch, actions, tickets, run_id)
        reported = {a.finding_id for a in actions}
        silent = {i for i in batch.ids if i not in reported}
        if silent:  # the service acted on the request but did not say what became of these: re-read them
            log.warning("ticket request %d of %d: %d findings not reported by the service; re-reading them",
                        number, len(batches), len(silent))
            groups = [TicketGroup(g.repository, g.rule, [i for i in g.ids if i in silent]) for g in batch.groups]
            unresolved = _resolve_or_hold(sender, warehouse, batch.issue_type, [g for g in groups if g.ids], tally,
                                          run_id, "not reported by the service")
        warehouse.set_state(IN_FLIGHT_KEY, None)
        log.info("ticket request %d of %d: %d findings sent; %d tickets created, %d failed, %d skipped",
                 number, len(batches), len(batch.ids), len(result.succeeded),
                 sum(len(f.issue_ids) for f in result.failed), sum(len(s.issue_ids) for s in result.skipped))
        if unresolved is not None:
            break
    if unresolved is not None:
        raise unresolved
    return tally


#: Seconds waited before each same-run resend of a ticket request the service answered with a server error and whose
#: findings a re-read then found untouched; their count bounds the resends of one request.
RESEND_DELAYS = (2.0, 10.0)
#: The answers that end the service's handling of a request (an error of the service itself, or "unavailable"): a
#: gateway's 502 or 504 does not, the service behind it may still be working.
RESENDABLE_STATUSES = (500, 503)


@dataclass
class _Unanswered:
    """A request whose outcome was settled by re-reading its findings (``error``: the re-read failed too)."""

    error: Exception | None


def _send_batch(sender: FindingsClient, warehouse: Warehouse, batch: TicketBatch, request: TicketRequest,
                tally: TicketTally, run_id: str | None, which: str) -> Any:
    """Send one request: its parsed outcome ``(result, actions, tickets)``, or :class:`_Unanswered` when its answer
    was lost and its findings were recorded from a re-read.

    A lost answer is resent in this run only when it is proven that nothing happened: the service answered with a
    server error of its own (``RESENDABLE_STATUSES``: its handling of the request is over; a client timeout, a
    dropped connection or a gateway's answer proves nothing, the service may still be working) and, after a pause
    (``RESEND_DELAYS``), not one of the request's findings has a ticket and each is listed with the status and
    triage state the warehouse had (the state read right before). Otherwise (some got one, or no answer came)
    nothing is sent again: the findings are recorded from the re-read, as ``ambiguous`` when even that fails.
    """
    for delay in (*RESEND_DELAYS, None):
        tally.requests += 1
        if batch.read_at is not None:
            tally.windows.append(time.monotonic() - batch.read_at)
        try:
            result = sender.create_tickets(request)
            return (result, *_result_actions(batch, result, tally, run_id))
        except Exception as exc:
            if refused_before_processing(exc):
                warehouse.set_state(IN_FLIGHT_KEY, None)
                raise
            cause = f"{type(exc).__name__}: {exc}"
            log.warning("ticket request %s: outcome unknown (%s); re-reading its %d findings instead of sending it "
                        "again blindly", which, cause, len(batch.ids))
            answered = isinstance(exc, FindingsApiError) and exc.status_code in RESENDABLE_STATUSES
            if delay is None or not answered:
                return _Unanswered(_resolve_or_hold(sender, warehouse, batch.issue_type, batch.groups, tally,
                                                    run_id, cause))
            time.sleep(delay)
            try:
                fresh = reread_findings(sender, batch.issue_type, batch.groups)
            except Exception as reread_exc:
                return _Unanswered(_hold(warehouse, batch.issue_type, batch.groups, tally, run_id, cause, reread_exc))
            found = {i: None if f is None else ticket_of(f) for i, f in fresh.items()}
            if any(ticket is not None for ticket in found.values()) or _changed(warehouse, batch.issue_type, fresh):
                # it did something, or a person acted meanwhile: nothing is sent again in this run
                _record_lost(warehouse, batch.issue_type, found, tally, run_id, cause)
                return _Unanswered(None)
            tally.resent += len(batch.ids)
            log.warning("ticket request %s: the service answered %s and none of its %d findings has a ticket %.0f s "
                        "later: sending it again", which, getattr(exc, "status_code", None), len(batch.ids), delay)
    raise AssertionError("unreachable: the last attempt returns")


def _changed(warehouse: Warehouse, issue_type: str, fresh: dict[int, Any]) -> bool:
    """Whether any of the re-read findings is unlisted, or its status or triage state is not the warehouse's."""
    before = {f.id: f for f in select_by_ids(warehouse, issue_type, sorted(fresh))}
    return any(f is None or i not in before or (f.status, f.triage_state) != (before[i].status, before[i].triage_state)
               for i, f in fresh.items())


def _result_actions(
    batch: TicketBatch, result: Any, tally: TicketTally, run_id: str | None
) -> tuple[list[TicketAction], list[tuple[list[int], dict[str, Any]]]]:
    """The outcome rows of a parsed response, and the tickets to mark; raises (before anything is written)
    when the response does not make sense."""
    actions: list[TicketAction] = []
    accounted: set[int] = set()
    tickets: list[tuple[list[int], dict[str, Any]]] = []
    counts: Counter[str] = Counter()
    for item in result.succeeded:
        ids = [int(i) for i in item.issue_ids]
        ticket = {"id": item.ticket_id, "url": item.ticket_url, "externalSlug": item.external_slug,
                  "linkedIssueIds": ids}
        actions += [
            TicketAction(batch.issue_type, i, "succeeded", run_id=run_id, ticket_id=item.ticket_id,
                         ticket_url=item.ticket_url, external_slug=item.external_slug)
            for i in ids
        ]
        accounted.update(ids)
        counts["tickets"] += 1
        counts["succeeded"] += len(ids)
        if item.ticket_id is not None:
            tickets.append((ids, ticket))
    fail_reasons: Counter[str] = Counter()
    skip_reasons: Counter[str] = Counter()
    for item in result.failed:
        ids = [int(i) for i in item.issue_ids if int(i) not in accounted]
        actions += [TicketAction(batch.issue_type, i, "failed", run_id=run_id, message=item.error) for i in ids]
        accounted.update(ids)
        counts["failed"] += len(ids)
        fail_reasons[item.error or "no reason given"] += len(ids)
    for item in result.skipped:
        ids = [int(i) for i in item.issue_ids if int(i) not in accounted]
        actions += [TicketAction(batch.issue_type, i, "skipped", run_id=run_id, message=item.reason) for i in ids]
        accounted.update(ids)
        counts["skipped"] += len(ids)
        skip_reasons[item.reason or "no reason given"] += len(ids)
    tally.tickets += counts["tickets"]
    tally.succeeded += counts["succeeded"]
    tally.failed += counts["failed"]
    tally.skipped += counts["skipped"]
    tally.fail_reasons.update(fail_reasons)
    tally.skip_reasons.update(skip_reasons)
    return actions, tickets


def _record_result(warehouse: Warehouse, batch: TicketBatch, actions: list[TicketAction],
                   tickets: list[tuple[list[int], dict[str, Any]]], run_id: str | None) -> None:
    for ids, ticket in tickets:
        _mark_ticketed(warehouse, batch.issue_type, ids, ticket, run_id)
    warehouse.record_ticket_actions(actions)


def _resolve_or_hold(client: FindingsClient, warehouse: Warehouse, issue_type: str, groups: Sequence[TicketGroup],
                     tally: TicketTally, run_id: str | None, cause: str) -> Exception | None:
    """Resolve findings of a request with an unknown outcome by a re-read; when even that fails, record them
    ``ambiguous`` (reconciled by the next run) and return the error."""
    try:
        found = reread_tickets(client, issue_type, groups)
    except Exception as reread_exc:
        return _hold(warehouse, issue_type, groups, tally, run_id, cause, reread_exc)
    _record_lost(warehouse, issue_type, found, tally, run_id, cause)
    return None


def _hold(warehouse: Warehouse, issue_type: str, groups: Sequence[TicketGroup], tally: TicketTally,
          run_id: str | None, cause: str, reread_exc: Exception) -> Exception:
    log.error("re-reading the findings of a request with an unknown outcome failed (%s); recorded as "
              "ambiguous, reconciled by the next run", reread_exc)
    ids = [i for g in groups for i in g.ids]
    warehouse.record_ticket_actions(
        TicketAction(issue_type, i, "ambiguous", run_id=run_id, message=cause[:1000]) for i in ids
    )
    tally.ambiguous += len(ids)
    return reread_exc


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
    """One ticket run: reconcile unknown outcomes, plan, check caps and approval, re-read, create, record.

    Raises ``approval.ApprovalError`` (nothing sent) when the run's recorded plan needed a person's approval
    and has none, or when there is no recorded plan and a policy is above its cap.
    """
    record = approval.get_plan(warehouse, approval.TICKETS, run_id)
    if not dry_run and (problem := approval.missing_approval(record)):
        raise approval.ApprovalError(f"not creating tickets: {problem}")
    reconciled = None if dry_run else reconcile_ambiguous(
        _sender(client), warehouse, [str(p.issue_type) for p in policies], run_id)
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
    if dry_run:
        batches = plan_batches(plans, tickets_per_call)
    else:
        batches, stats = fresh_batches(_sender(client), warehouse, plans, allowed=allowed,
                                       tickets_per_call=tickets_per_call, group_issues=group_issues, run_id=run_id)
    try:
        tally = create_tickets(client, warehouse, batches, dry_run=dry_run, tracker_project_id=tracker_project_id,
                               group_issues=group_issues, run_id=run_id)
    finally:  # read back what the requests named, also when one failed: the warehouse equals the service for them
        if not dry_run:
            settle_batches(_sender(client), warehouse, batches, {p.name: p.selector for p in policies}, stats, run_id)
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


def reread_tickets(
    client: FindingsClient, issue_type: str, groups: Sequence[TicketGroup]
) -> dict[int, dict[str, Any] | None]:
    """Re-read the findings of ``groups`` from the API: id -> its external ticket (None when it has none)."""
    return {i: None if f is None else ticket_of(f) for i, f in reread_findings(client, issue_type, groups).items()}


def reread_findings(client: FindingsClient, issue_type: str, groups: Sequence[TicketGroup]) -> dict[int, Any]:
    """Re-read the findings of ``groups`` from the API: id -> the typed finding (None when it is not listed)."""
    wanted = {i for g in groups for i in g.ids}
    found: dict[int, Any] = {}
    if issue_type == IssueType.SECRETS:
        for finding in client.iter_secrets():
            if finding.id in wanted:
                found[finding.id] = finding
                if len(found) == len(wanted):
                    break
    else:
        for repo, rule in sorted({(g.repository, g.rule) for g in groups}, key=str):
            filters: dict[str, Any] = {"repos": [repo]} if repo else {}
            if issue_type == IssueType.SAST and rule:
                filters["rules"] = [rule]
            todo = {i for g in groups if (g.repository, g.rule) == (repo, rule) for i in g.ids}
            for finding in client.iter_findings(issue_type, page_size=FINDINGS_PAGE_SIZE.maximum, **filters):
                if finding.id in todo:
                    found[finding.id] = finding
                    todo.discard(finding.id)
                    if not todo:
                        break
    return {i: found.get(i) for i in wanted}


def _record_lost(warehouse: Warehouse, issue_type: str, tickets: dict[int, dict[str, Any] | None],
                 tally: TicketTally, run_id: str | None, cause: str) -> None:
    """Record the findings of a request with an unknown outcome from what a re-read (``tickets``) says of them."""
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
        _mark_ticketed(warehouse, issue_type, ids, ticket, run_id)
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


def record_known_tickets(warehouse: Warehouse, issue_type: str, run_id: str | None) -> int:
    """Record as succeeded the suspects (:func:`unseen_ticket_suspects`) whose warehouse row carries a ticket by now
    (read back after a write, or pulled by an extraction): the request whose answer was lost did create it. Returns
    how many. Without this, a finding the warehouse knows as ticketed would keep a "failed" latest outcome."""
    suspects = sorted(unseen_ticket_suspects(warehouse, issue_type))
    found: dict[int, dict[str, Any] | None] = {}
    with warehouse.engine.connect() as conn:
        for chunk in id_batches(suspects):
            found.update((row.id, _ticket_in(row.raw)) for row in conn.execute(
                select(findings.c.id, findings.c.raw).where(findings.c.issue_type == issue_type,
                                                            findings.c.id.in_(chunk),
                                                            findings.c.external_ticket_id.is_not(None))))
    done = _record_recovered(warehouse, issue_type, {i: t for i, t in found.items() if t is not None}, TicketTally(),
                             run_id, "recorded from the warehouse: read back with the ticket an earlier request of "
                                     "ours created")
    if done:
        log.info("%d %s findings whose ticket request had an unknown outcome carry its ticket: recorded", len(done),
                 issue_type)
    return len(done)


def _without_unseen_tickets(client: FindingsClient, warehouse: Warehouse, batch: TicketBatch, suspect: set[int],
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
    return replace(batch, groups=[g for g in rest if g.ids])


def reconcile_ambiguous(
    client: FindingsClient, warehouse: Warehouse, issue_types: Iterable[str], run_id: str | None
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
        _record_lost(warehouse, issue_type, reread_tickets(client, issue_type, groups), tally, run_id,
                     "reconciled after an ambiguous request")
    return tally
