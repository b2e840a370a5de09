"""Link findings to an existing tracker ticket, unlink them, delete a ticket's links (the real service's ticket
operations besides creation). Each change is written to the findings' ``external_ticket`` (and
``usage.external_ticket``), and the ``linkedIssueIds`` of every ticket it touches are brought up to date."""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi import APIRouter, Depends
from sqlalchemy import Connection, func, insert, select, update

from .. import schema, timefmt
from ..errors import invalid, not_found
from ..models import TicketLinkBody, TicketUnlinkBody
from ..mutations import rewrite_bodies
from ..responses import OrjsonResponse
from ..state import Emulator
from .deps import by_id

router = APIRouter()


def _set_link(finding: dict[str, Any], link: dict[str, Any] | None) -> None:
    finding["external_ticket"] = link
    if isinstance(finding.get("usage"), dict):
        finding["usage"]["external_ticket"] = link


def _known_ids(connection: Connection, ids: list[int]) -> list[Any]:
    """The findings ``ids`` (id and ticket); 400 naming those that do not exist."""
    t = schema.findings.c
    rows = connection.execute(select(t.id, t.ticket_id, t.issue_type, t.repo_name, t.rule_name)
                              .where(t.id.in_(ids))).all()
    missing = sorted(set(ids) - {row.id for row in rows})
    if missing:
        raise invalid("issue_ids", f"no finding with the ids {missing}")
    return list(rows)


def _ticket_of(connection: Connection, ticket_id: int) -> tuple[str, str] | None:
    """(external slug, url) of a ticket: from the tickets made through the API, else from a finding that links it
    (the generated data's tickets live only there)."""
    k = schema.tickets.c
    row = connection.execute(select(k.external_slug, k.url).where(k.id == ticket_id)).first()
    if row is not None:
        return row.external_slug, row.url
    t, b = schema.findings.c, schema.finding_bodies.c
    body = connection.execute(select(b.body).where(b.id == select(t.id).where(t.ticket_id == ticket_id)
                                                   .limit(1).scalar_subquery())).scalar()
    ticket = (orjson.loads(body).get("external_ticket") or {}) if body else {}
    slug = ticket.get("externalSlug", ticket.get("external_slug"))
    return (slug, ticket["url"]) if slug and ticket.get("url") else None


def _sync(connection: Connection, ticket_id: int) -> list[int]:
    """Write the ticket's current link (all findings it is linked to) into each of those findings; returns them."""
    t = schema.findings.c
    linked = list(connection.execute(select(t.id).where(t.ticket_id == ticket_id).order_by(t.id)).scalars())
    known = _ticket_of(connection, ticket_id)
    if not linked or known is None:
        return linked
    slug, url = known
    link = {"id": ticket_id, "externalSlug": slug, "url": url, "linkedIssueIds": linked}
    rewrite_bodies(connection, linked, lambda finding: _set_link(finding, link))
    connection.execute(update(schema.tickets).where(schema.tickets.c.id == ticket_id)
                       .values(issue_ids=orjson.dumps(linked).decode()))
    return linked


def _unlink(connection: Connection, ids: list[int]) -> None:
    """Remove the ticket links of ``ids`` (findings that have one) and update what their tickets list."""
    t = schema.findings.c
    old = set(connection.execute(select(t.ticket_id).where(t.id.in_(ids), t.ticket_id.is_not(None))).scalars())
    connection.execute(update(schema.findings).where(t.id.in_(ids)).values(ticket_id=None))
    rewrite_bodies(connection, ids, lambda finding: _set_link(finding, None))
    for ticket_id in old:
        _sync(connection, ticket_id)


@router.post("/deployments/{deploymentId}/tickets/link", name="tickets_link", operation_id="tickets_link",
             summary="Link findings to an existing ticket")
def link_ticket(body: TicketLinkBody, emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """Link ``issue_ids`` to the ticket at ``ticket_url`` (known by that URL, or recorded now), replacing any
    other ticket they had; ``linked_issue_ids`` is every finding the ticket links afterwards,
    ``replaced_issue_ids`` those of the request that had another ticket."""
    ids = list(dict.fromkeys(int(i) for i in body.issue_ids))
    k = schema.tickets.c
    with emulator.change_findings() as connection:
        rows = _known_ids(connection, ids)
        known = connection.execute(select(k.id, k.external_slug).where(k.url == body.ticket_url)
                                   .order_by(k.id).limit(1)).first()
        if known is None:
            ticket_id = connection.execute(select(func.coalesce(func.max(k.id), 0) + 1)).scalar_one()
            slug = body.ticket_url.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or f"LINKED-{ticket_id}"
            connection.execute(insert(schema.tickets).values(
                id=ticket_id, external_slug=slug, url=body.ticket_url, issue_type=rows[0].issue_type,
                repository=rows[0].repo_name, rule_name=rows[0].rule_name, issue_ids="[]",
                tracker_project_id=None, created_at=timefmt.iso_z(time.time())))
        else:
            ticket_id, slug = known.id, known.external_slug
        replaced = sorted(row.id for row in rows if row.ticket_id not in (None, ticket_id))
        _unlink(connection, replaced)
        t = schema.findings.c
        connection.execute(update(schema.findings).where(t.id.in_(ids)).values(ticket_id=ticket_id))
        linked = _sync(connection, ticket_id)
    return OrjsonResponse({"ticket_id": ticket_id, "ticket_url": body.ticket_url, "external_slug": slug,
                           "linked_issue_ids": linked, "replaced_issue_ids": replaced})


@router.post("/deployments/{deploymentId}/tickets/unlink", name="tickets_unlink", operation_id="tickets_unlink",
             summary="Unlink findings from their tickets")
def unlink_tickets(body: TicketUnlinkBody, emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """Remove the ticket link of each of ``issue_ids``; ``unlinked_issue_ids`` are those that had one."""
    ids = list(dict.fromkeys(int(i) for i in body.issue_ids))
    with emulator.change_findings() as connection:
        rows = _known_ids(connection, ids)
        linked = sorted(row.id for row in rows if row.ticket_id is not None)
        _unlink(connection, linked)
    return OrjsonResponse({"unlinked_issue_ids": linked})


@router.delete("/deployments/{deploymentId}/ticketing/v2/tickets/{externalTicketId}", name="ticket_delete",
               operation_id="ticket_delete", summary="Delete a ticket's links")
def delete_ticket(externalTicketId: str, emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """Unlink every finding from the ticket ``externalTicketId`` (its ``external_ticket.id``, or the external
    slug of a ticket made through the API); answers ``{"issueIds": [...]}`` with those findings."""
    t, k = schema.findings.c, schema.tickets.c
    with emulator.change_findings() as connection:
        ticket_id: int | None = int(externalTicketId) if externalTicketId.isdigit() \
            and len(externalTicketId) < 19 else None
        if ticket_id is None:
            ticket_id = connection.execute(select(k.id).where(k.external_slug == externalTicketId)).scalar()
        linked = [] if ticket_id is None else list(connection.execute(
            select(t.id).where(t.ticket_id == ticket_id).order_by(t.id)).scalars())
        in_tracker = ticket_id is not None and connection.execute(
            select(k.id).where(k.id == ticket_id)).first() is not None
        if not linked and not in_tracker:
            raise not_found(f"ticket {externalTicketId!r}")
        _unlink(connection, linked)
    return OrjsonResponse({"issueIds": linked})
