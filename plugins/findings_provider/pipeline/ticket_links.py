"""Tickets people made: link findings to an existing ticket, and record what became of our tickets in the service.

:func:`link_ticket` links findings a person names to a ticket that already exists in the tracker (one a person filed
by hand). Right before the write the findings are read again from the service and stored (``freshness.settle``);
one that carries a different ticket by then is left alone and reported, one already linked to it is counted as
such. One request links the rest, at most ``max_links``; a lost or unreadable answer is "maybe done": the findings
are re-read, never linked again blindly, and recorded from what the service says (``ambiguous`` when even the
re-read fails, reconciled by the next ticket run). What was linked is stored on the findings' rows and read back
from the service after the write; each finding gets a ``linked`` row in ``ticket_actions`` and a ticket entry in
the write ledger, so ticket creation never tickets it.

:func:`reconcile_links` compares, per finding whose latest outcome is a ticket of ours (``succeeded`` or
``linked``), that ticket with the one the warehouse holds now (as the last extraction or re-read stored it): none
is recorded ``unlinked`` (unlinked, or its link deleted), another ``replaced``. The ticket planner does not ticket
such a finding again unless its policy says ``reticket_unlinked``. Nothing here unlinks or deletes a link.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, func, or_, select

from findings_provider.client.limits import FINDINGS_PER_TICKET
from findings_provider.client.vocabulary import IssueType
from findings_provider.config import FindingSelector
from findings_provider.pipeline import freshness
from findings_provider.pipeline.selection import TICKET_DONE, select_by_ids
from findings_provider.pipeline.ticket_outcomes import LOST, mark_ticketed, reread_tickets, ticket_in_raw
from findings_provider.pipeline.ticket_plan import TicketGroup
from findings_provider.pipeline.ticket_send import refused_before_processing, sending_client
from findings_provider.warehouse import TicketAction, Warehouse
from findings_provider.warehouse.batches import id_batches
from findings_provider.warehouse.schema import findings, ticket_actions
from findings_provider.warehouse.store import TicketOutcome

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)

#: ``dropped_findings`` kind and policy of the findings a link leaves alone.
LINK_KIND = "link"
LINK_POLICY = "link_ticket"


class LinkNotDone(RuntimeError):
    """Some findings of a link request are not linked and no error says why: run the link again."""


def _held(warehouse: Warehouse, ids: Sequence[int]) -> dict[int, list[tuple[str, str]]]:
    """id -> [(issue type, raw)] of the warehouse rows of ``ids``."""
    out: dict[int, list[tuple[str, str]]] = {}
    with warehouse.engine.connect() as conn:
        for chunk in id_batches(ids):
            for row in conn.execute(select(findings.c.id, findings.c.issue_type, findings.c.raw)
                                    .where(findings.c.id.in_(chunk))):
                out.setdefault(int(row.id), []).append((row.issue_type, row.raw))
    return out


def _describe(ticket: dict[str, Any]) -> str:
    slug = ticket.get("externalSlug")
    return f"ticket {ticket['id']}" + (f" ({slug}, {ticket.get('url')})" if slug else f" ({ticket.get('url')})")


def _selector(warehouse: Warehouse, issue_type: str, ids: Sequence[int]) -> FindingSelector:
    """The narrowest re-read of ``ids``: their repositories (and rules, for code findings)."""
    known = select_by_ids(warehouse, issue_type, ids)
    repos = sorted({f.repository_name for f in known if f.repository_name})
    rules = sorted({f.rule_name for f in known if f.rule_name})
    return FindingSelector(repository_name=repos or None,
                           rule_name=rules if issue_type in (IssueType.SAST, IssueType.AI_SAST) and rules else None)


def _classify(ticket_url: str, ticket: dict[str, Any] | None) -> str | None:
    """None: free to link; ``already``: linked to ``ticket_url``; else the reason it is left alone."""
    if ticket is None:
        return None
    if ticket.get("url") == ticket_url:
        return "already"
    return f"already carries {_describe(ticket)}: not linked; unlink it in the service first"


def link_ticket(
    client: FindingsClient | None,
    warehouse: Warehouse,
    ticket_url: str,
    ids: Sequence[int],
    *,
    max_links: int = FINDINGS_PER_TICKET,
    dry_run: bool = False,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Link the findings ``ids`` to the existing ticket at ``ticket_url`` (see the module); return the counts."""
    wanted = list(dict.fromkeys(int(i) for i in ids))
    out: dict[str, Any] = {"requested": len(wanted), "linked": 0, "already_linked": 0, "planned": 0, "failed": 0,
                           "ambiguous": 0, "requests": 0, "left_alone": [], "deferred": wanted[max_links:],
                           "ticket_id": None, "dry_run": dry_run}
    if out["deferred"]:
        log.warning("%d findings named beyond the cap of %d links per run are not linked in this run: %s",
                    len(out["deferred"]), max_links, out["deferred"][:20])
    wanted = wanted[:max_links]
    if not wanted:
        return out
    left_alone: dict[int, str] = {}
    types: dict[int, str] = {}
    for finding_id, rows in sorted(_held(warehouse, wanted).items()):
        if len(rows) > 1:
            left_alone[finding_id] = (f"held as {' and '.join(sorted(t for t, _ in rows))}: which finding is meant "
                                      "is unclear; not linked")
        else:
            types[finding_id] = rows[0][0]
    for finding_id in wanted:
        if finding_id not in types and finding_id not in left_alone:
            left_alone[finding_id] = "not in the warehouse: run findings_extraction first; not linked"
    by_type: dict[str, list[int]] = {}
    for finding_id in wanted:
        if finding_id in types:
            by_type.setdefault(types[finding_id], []).append(finding_id)

    selectors = {t: _selector(warehouse, t, ids_) for t, ids_ in by_type.items()}
    unseen: set[int] = set()
    if not dry_run:  # fresh state right before the write: read the findings again and store what the service says
        sender = sending_client(client)
        for issue_type, type_ids in by_type.items():
            settled = freshness.settle(sender, warehouse, issue_type, selectors[issue_type], type_ids,
                                       before_write=True)
            out["requests"] += settled.requests
            unseen.update(settled.unseen)
    now = _held(warehouse, [i for i in types if i not in unseen])
    to_link: list[int] = []
    for finding_id in wanted:
        if finding_id in left_alone:
            continue
        if finding_id in unseen:
            left_alone[finding_id] = ("not listed by the service on the re-read right before the write (fixed, "
                                      "removed, or beyond the read's budget): not linked")
            continue
        verdict = _classify(ticket_url, ticket_in_raw(now[finding_id][0][1]))
        if verdict == "already":
            out["already_linked"] += 1
        elif verdict is not None:
            left_alone[finding_id] = verdict
        else:
            to_link.append(finding_id)
    for finding_id, reason in sorted(left_alone.items()):
        log.warning("finding %d: %s", finding_id, reason)
        freshness.record_drops(warehouse, {finding_id: reason}, kind=LINK_KIND, policy=LINK_POLICY,
                               issue_type=types.get(finding_id, "unknown"), run_id=run_id)
    out["left_alone"] = [{"id": i, "reason": r} for i, r in sorted(left_alone.items())]
    if not to_link:
        log.info("link: nothing to link (%d already linked to it, %d left alone)", out["already_linked"],
                 len(left_alone))
        return out
    if dry_run:
        warehouse.record_ticket_actions(
            TicketAction(types[i], i, "planned", run_id=run_id, ticket_url=ticket_url, message="dry run: link")
            for i in to_link)
        out["planned"] = len(to_link)
        log.info("link dry run: %d findings would be linked to the ticket", len(to_link))
        return out

    sender = sending_client(client)
    out["requests"] += 1
    try:
        result = sender.link_ticket(ticket_url, to_link)
    except Exception as exc:
        cause = f"{type(exc).__name__}: {exc}"
        if refused_before_processing(exc):
            warehouse.record_ticket_actions(
                TicketAction(types[i], i, "failed", run_id=run_id, ticket_url=ticket_url, message=cause[:1000])
                for i in to_link)
            out["failed"] = len(to_link)
            raise
        log.warning("link request: outcome unknown (%s); re-reading its %d findings instead of sending it again",
                    cause, len(to_link))
        _resolve(sender, warehouse, ticket_url, to_link, types, out, run_id, cause)
    else:
        ticket = {"id": result.ticket_id, "url": result.ticket_url or ticket_url,
                  "externalSlug": result.external_slug, "linkedIssueIds": list(result.linked_issue_ids)}
        out["ticket_id"] = result.ticket_id
        done = [i for i in to_link if i in set(result.linked_issue_ids)] if result.ticket_id is not None else []
        if result.replaced_issue_ids:  # a person linked another ticket between the re-read and the write
            log.warning("link request replaced the earlier ticket of findings %s (linked in the service after the "
                        "re-read)", sorted(result.replaced_issue_ids)[:20])
        _record_linked(warehouse, types, done, ticket, out, run_id, "linked to an existing ticket")
        silent = [i for i in to_link if i not in set(done)]
        if silent:
            log.warning("link request: %d findings not reported linked by the service; re-reading them",
                        len(silent))
            _resolve(sender, warehouse, ticket_url, silent, types, out, run_id, "not reported by the service")
    counts: dict[str, Any] = {}
    for issue_type, type_ids in by_type.items():  # the warehouse equals the service for what was written
        freshness.settle_written(sender, warehouse, issue_type, selectors[issue_type],
                                 [i for i in type_ids if i in set(to_link)], counts)
    out["settle_requests"] = counts.get("settle_requests", 0)
    out["settled"] = counts.get("settled", 0)
    out["requests"] += out["settle_requests"]
    log.info("link: %d findings linked to ticket %s, %d already linked, %d left alone, %d not linked",
             out["linked"], out["ticket_id"], out["already_linked"], len(left_alone), out["failed"] + out["ambiguous"])
    if out["failed"] or out["ambiguous"]:
        raise LinkNotDone(f"{out['failed'] + out['ambiguous']} of {len(to_link)} findings are not linked (the "
                          "answer was lost and a re-read did not find the link): run the link again; it re-reads "
                          "them first and links only those still without a ticket")
    return out


def _record_linked(warehouse: Warehouse, types: dict[int, str], ids: Sequence[int], ticket: dict[str, Any],
                   out: dict[str, Any], run_id: str | None, message: str) -> None:
    """Store the ticket on the findings' rows, in the ledger and as ``linked`` outcomes."""
    by_type: dict[str, list[int]] = {}
    for finding_id in ids:
        by_type.setdefault(types[finding_id], []).append(finding_id)
    for issue_type, type_ids in by_type.items():
        mark_ticketed(warehouse, issue_type, type_ids, ticket, run_id)
        warehouse.record_ticket_actions(
            TicketAction(issue_type, i, "linked", run_id=run_id, ticket_id=int(ticket["id"]),
                         ticket_url=ticket.get("url"), external_slug=ticket.get("externalSlug"), message=message)
            for i in type_ids)
    out["linked"] += len(ids)


def _resolve(client: FindingsClient, warehouse: Warehouse, ticket_url: str, ids: Sequence[int],
             types: dict[int, str], out: dict[str, Any], run_id: str | None, cause: str) -> None:
    """Settle findings of a link request with an unknown outcome by re-reading them: linked to ``ticket_url`` now
    is recorded ``linked``; anything else ``failed`` (``LOST``: ticket creation re-reads it before sending); when
    the re-read fails too, ``ambiguous`` (the next ticket run reconciles it)."""
    by_type: dict[str, list[int]] = {}
    for finding_id in ids:
        by_type.setdefault(types[finding_id], []).append(finding_id)
    for issue_type, type_ids in by_type.items():
        groups = [TicketGroup(f.repository_name, f.rule_name, [f.id])
                  for f in select_by_ids(warehouse, issue_type, type_ids)]
        try:
            found = reread_tickets(client, issue_type, groups)
        except Exception as reread_exc:
            log.error("re-reading the findings of a link request with an unknown outcome failed (%s); recorded as "
                      "ambiguous, reconciled by the next ticket run", reread_exc)
            warehouse.record_ticket_actions(
                TicketAction(issue_type, i, "ambiguous", run_id=run_id, ticket_url=ticket_url,
                             message=f"link: {cause}"[:1000]) for i in type_ids)
            out["ambiguous"] += len(type_ids)
            continue
        linked: dict[int, list[int]] = {}
        tickets: dict[int, dict[str, Any]] = {}
        failed = []
        for finding_id in type_ids:
            ticket = found.get(finding_id)
            if ticket is not None and ticket.get("url") == ticket_url:
                linked.setdefault(int(ticket["id"]), []).append(finding_id)
                tickets[int(ticket["id"])] = ticket
                out["ticket_id"] = int(ticket["id"])
            else:
                failed.append(finding_id)
        for ticket_id, linked_ids in linked.items():
            _record_linked(warehouse, types, linked_ids, tickets[ticket_id], out, run_id,
                           "recorded from a re-read after a lost response")
        warehouse.record_ticket_actions(
            TicketAction(issue_type, i, "failed", run_id=run_id, ticket_url=ticket_url,
                         message=f"{LOST}; link not confirmed ({cause[:200]})") for i in failed)
        out["failed"] += len(failed)


def reconcile_links(warehouse: Warehouse, issue_types: Iterable[str], run_id: str | None) -> dict[str, int]:
    """Record, per finding whose latest ticket outcome is a ticket of ours, that the warehouse now holds no ticket
    for it (``unlinked``) or another one (``replaced``); return the counts. Idempotent: the recorded outcome is the
    latest from then on."""
    counts = {"unlinked": 0, "replaced": 0}
    t = ticket_actions.c
    for issue_type in dict.fromkeys(issue_types):
        latest = (select(t.finding_id, func.max(t.id).label("last"))
                  .where(t.issue_type == issue_type, t.outcome != "planned").group_by(t.finding_id).subquery())
        stmt = (
            select(t.finding_id, t.ticket_id, t.ticket_url, t.external_slug, findings.c.external_ticket_id,
                   findings.c.raw)
            .join(latest, latest.c.last == t.id)
            .join(findings, and_(findings.c.issue_type == issue_type, findings.c.id == t.finding_id))
            .where(t.outcome.in_(TICKET_DONE), or_(
                findings.c.external_ticket_id.is_(None),
                and_(t.ticket_id.is_not(None), findings.c.external_ticket_id != t.ticket_id)))
            .order_by(t.finding_id)
        )
        with warehouse.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        actions = []
        for row in rows:
            ours = {"id": row.ticket_id, "url": row.ticket_url, "externalSlug": row.external_slug}
            outcome: TicketOutcome
            if row.external_ticket_id is None:
                outcome, message = "unlinked", (f"our {_describe(ours)} is no longer linked in the service "
                                                "(unlinked, or its link deleted)")
            else:
                now = ticket_in_raw(row.raw) or {"id": row.external_ticket_id}
                outcome, message = "replaced", f"our {_describe(ours)} was replaced by {_describe(now)}"
            counts[outcome] += 1
            actions.append(TicketAction(issue_type, row.finding_id, outcome, run_id=run_id, ticket_id=row.ticket_id,
                                        ticket_url=row.ticket_url, external_slug=row.external_slug,
                                        message=message[:1000]))
        warehouse.record_ticket_actions(actions)
        if actions:
            log.warning("%d %s findings lost a ticket of ours in the service (%d unlinked, %d replaced): recorded; "
                        "not ticketed again unless a policy says reticket_unlinked", len(actions), issue_type,
                        sum(a.outcome == "unlinked" for a in actions), sum(a.outcome == "replaced" for a in actions))
    return counts
