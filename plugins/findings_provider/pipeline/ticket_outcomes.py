"""What became of ticket requests: one outcome per finding, and findings whose request had an unknown outcome
resolved from what the service (or the warehouse) says of them.

Every outcome is one ``ticket_actions`` row per finding: ``succeeded`` (the warehouse row gets the ticket at
once), ``failed`` (retried by a later run), ``skipped`` (reported, not retried) or ``planned`` (dry run). A
request whose response was lost is settled by re-reading its findings (:func:`record_lost`); if even the re-read
failed they were recorded ``ambiguous`` and are reconciled the same way at the start of the next run
(:func:`reconcile_ambiguous`).

A finding is never sent again without a fresh re-read when a request may have ticketed it unseen: the batch
being sent is kept in ``pipeline_state`` (``IN_FLIGHT_KEY``) until its outcome is recorded, so a process killed
in between leaves it behind; and a finding found without a ticket right after a lost response may still get
one (a client timeout does not stop the server). :func:`unseen_ticket_suspects` names them; before they are sent
again they are re-read, and those that carry a ticket by then are recorded as succeeded instead.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import func, select

from findings_provider.client.canonical import as_int
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.client.models import ExternalTicket
from findings_provider.client.vocabulary import IssueType
from findings_provider.pipeline import freshness, ledger
from findings_provider.pipeline.patching import patch_findings
from findings_provider.pipeline.selection import latest_ticket_outcomes
from findings_provider.pipeline.ticket_plan import TicketGroup
from findings_provider.warehouse import TicketAction, Warehouse
from findings_provider.warehouse.batches import id_batches
from findings_provider.warehouse.schema import findings, ticket_actions

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)

#: ``pipeline_state`` key of the request being sent (issue type, ids), cleared once its outcome is recorded.
IN_FLIGHT_KEY = "ticket_creation.in_flight"
#: Message of findings that had no ticket on the re-read right after a lost response.
LOST = "no ticket after a lost response"


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


def ticket_in_raw(raw: str) -> dict[str, Any] | None:
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


def mark_ticketed(warehouse: Warehouse, issue_type: str, ids: Sequence[int], ticket: dict[str, Any],
                  run_id: str | None) -> None:
    """Give the warehouse rows of ``ids`` the ticket, and record it as our write (``ledger``)."""
    patch_findings(warehouse, issue_type, ids, {"external_ticket": ticket})
    ledger.record(warehouse, ledger.TICKET, ledger.TICKET_SCOPE, issue_type, ids, run_id)


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
        for finding in client.items(client.list_secrets):
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
            findings = client.items(client.list_findings, issue_type, page_size=FINDINGS_PAGE_SIZE.maximum, **filters)
            for finding in findings:
                if finding.id in todo:
                    found[finding.id] = finding
                    todo.discard(finding.id)
                    if not todo:
                        break
    return {i: found.get(i) for i in wanted}


def record_lost(warehouse: Warehouse, issue_type: str, tickets: dict[int, dict[str, Any] | None],
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
    record_recovered(warehouse, issue_type, tickets, tally, run_id, "recorded from a re-read after a lost response")


def record_recovered(warehouse: Warehouse, issue_type: str, tickets: dict[int, dict[str, Any] | None],
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
        mark_ticketed(warehouse, issue_type, ids, ticket, run_id)
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
            found.update((row.id, ticket_in_raw(row.raw)) for row in conn.execute(
                select(findings.c.id, findings.c.raw).where(findings.c.issue_type == issue_type,
                                                            findings.c.id.in_(chunk),
                                                            findings.c.external_ticket_id.is_not(None))))
    done = record_recovered(warehouse, issue_type, {i: t for i, t in found.items() if t is not None}, TicketTally(),
                             run_id, "recorded from the warehouse: read back with the ticket an earlier request of "
                                     "ours created")
    if done:
        log.info("%d %s findings whose ticket request had an unknown outcome carry its ticket: recorded", len(done),
                 issue_type)
    return len(done)


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
        record_lost(warehouse, issue_type, reread_tickets(client, issue_type, groups), tally, run_id,
                     "reconciled after an ambiguous request")
    return tally
