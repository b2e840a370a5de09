"""Sending ticket requests: one request per batch, its outcome recorded per finding, never a blind resend.

When a response is lost (``AmbiguousWriteError``) the request is never re-sent blindly: the findings are re-read
from the API and those that now carry a ticket are recorded as succeeded; only the rest stay retryable. If even the
re-read fails they are recorded ``ambiguous`` and reconciled at the start of the next run (see
:mod:`.ticket_outcomes`). The one resend in the same run is of a request proven undone (:func:`_send_batch`).
While a request is out, its batch is kept in ``pipeline_state`` (``IN_FLIGHT_KEY``), and findings that an earlier
request may have ticketed unseen are re-read before they are sent again.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from findings_provider.client import AmbiguousWriteError, FindingsApiError, TicketRequest, TransportError
from findings_provider.client.limits import TICKETS_LIMIT
from findings_provider.pipeline import freshness
from findings_provider.pipeline.selection import select_by_ids
from findings_provider.pipeline.ticket_outcomes import (
    IN_FLIGHT_KEY,
    TicketTally,
    mark_ticketed,
    record_lost,
    record_recovered,
    reread_findings,
    reread_tickets,
    ticket_of,
    unseen_ticket_suspects,
)
from findings_provider.pipeline.ticket_plan import TicketBatch, TicketGroup
from findings_provider.warehouse import TicketAction, Warehouse

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)


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


def sending_client(client: FindingsClient | None) -> FindingsClient:
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
    reread: Callable[[TicketBatch, str], TicketBatch] | None = None,
) -> TicketTally:
    """Send each batch (or record it as planned in a dry run) and record one outcome per finding.

    ``reread``: called right before each batch's request with the batch (and which request it is, for the log);
    returns the batch to send, its findings re-read and those a person changed left out (``tickets.BatchRereads``,
    which also records the findings an earlier request of ours ticketed unseen). Without it, only those suspects
    are re-read before sending."""
    tally = TicketTally(batches=len(batches))
    unresolved: Exception | None = None
    suspects = {} if dry_run or reread is not None else {
        t: unseen_ticket_suspects(warehouse, t) for t in {b.issue_type for b in batches}}
    for number, batch in enumerate(batches, 1):
        if dry_run:
            warehouse.record_ticket_actions(
                TicketAction(batch.issue_type, i, "planned", run_id=run_id, message=f"dry run, policy {batch.policy}")
                for i in batch.ids
            )
            tally.planned += len(batch.ids)
            continue
        sender = sending_client(client)
        if reread is not None:
            batch = reread(batch, f"ticket request {number} of {len(batches)}")
            if not batch.groups:
                continue
        elif suspect := suspects[batch.issue_type] & set(batch.ids):
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
            log.info("ticket request %s: %.3f s from its re-read to the request", which, tally.windows[-1])
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
                record_lost(warehouse, batch.issue_type, found, tally, run_id, cause)
                return _Unanswered(None)
            tally.resent += len(batch.ids)
            log.warning("ticket request %s: the service answered %s and none of its %d findings has a ticket %.0f s "
                        "later: sending it again", which, getattr(exc, "status_code", None), len(batch.ids), delay)
    raise AssertionError("unreachable: the last attempt returns")


#: The fields a resend must find as the warehouse had them (``freshness.changes`` compares them). Narrower than the
#: re-read before sending (``freshness.WATCHED``): a ticket is judged first, by ``_send_batch`` (one there is this
#: request's doing, recorded as succeeded, not a person's act), and the resend rule (docs/pipelines.md) names the
#: status and triage state only, so a change of the triage reason alone does not stop a resend.
RESEND_WATCHED = ("status", "triage_state")


def _changed(warehouse: Warehouse, issue_type: str, fresh: dict[int, Any]) -> bool:
    """Whether any of the re-read findings is unlisted, or its status or triage state is not the warehouse's."""
    before = {f.id: f for f in select_by_ids(warehouse, issue_type, sorted(fresh))}
    return any(f is None or i not in before or freshness.changes(before[i], f, RESEND_WATCHED)
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
        mark_ticketed(warehouse, batch.issue_type, ids, ticket, run_id)
    warehouse.record_ticket_actions(actions)


def _resolve_or_hold(client: FindingsClient, warehouse: Warehouse, issue_type: str, groups: Sequence[TicketGroup],
                     tally: TicketTally, run_id: str | None, cause: str) -> Exception | None:
    """Resolve findings of a request with an unknown outcome by a re-read; when even that fails, record them
    ``ambiguous`` (reconciled by the next run) and return the error."""
    try:
        found = reread_tickets(client, issue_type, groups)
    except Exception as reread_exc:
        return _hold(warehouse, issue_type, groups, tally, run_id, cause, reread_exc)
    record_lost(warehouse, issue_type, found, tally, run_id, cause)
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


def _without_unseen_tickets(client: FindingsClient, warehouse: Warehouse, batch: TicketBatch, suspect: set[int],
                            tally: TicketTally, run_id: str | None) -> TicketBatch:
    """Re-read the suspect findings of ``batch``; record those that have a ticket by now; the batch without them."""
    groups = [TicketGroup(g.repository, g.rule, [i for i in g.ids if i in suspect]) for g in batch.groups]
    found = reread_tickets(client, batch.issue_type, [g for g in groups if g.ids])
    done = record_recovered(warehouse, batch.issue_type, found, tally, run_id,
                             "recorded from a re-read before sending again: an earlier request created it")
    if done:
        log.warning("%d %s findings already had a ticket from an earlier request whose outcome was not recorded; "
                    "not sent again", len(done), batch.issue_type)
    rest = [TicketGroup(g.repository, g.rule, [i for i in g.ids if i not in done]) for g in batch.groups]
    return replace(batch, groups=[g for g in rest if g.ids])
