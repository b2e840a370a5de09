"""Create tickets (4.7): group findings by repository and rule, at most ``limit`` tickets per request.

Not idempotent, like the real service: a repeated request for already-ticketed findings skips them.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi import APIRouter, Depends
from sqlalchemy import Connection, func, insert, select, update

from .. import schema, timefmt
from ..generator.vocabulary import TICKET_PREFIX, TRACKER_URL
from ..models import TicketBody
from ..mutations import rewrite_bodies, selection_filters
from ..responses import OrjsonResponse
from ..selection import conditions
from ..state import Emulator
from .deps import by_slug

router = APIRouter()
MAX_PER_TICKET = 50
SLUG_OFFSET = 1000


def _groups(rows: list[Any], group_issues: bool) -> list[list[Any]]:
    """Findings grouped by (repository, rule) in order of first appearance, split into tickets of 50."""
    grouped: dict[Any, list[Any]] = {}
    for row in rows:
        grouped.setdefault((row.repo_name, row.rule_name) if group_issues else row.id, []).append(row)
    return [members[i:i + MAX_PER_TICKET] for members in grouped.values()
            for i in range(0, len(members), MAX_PER_TICKET)]


def _open_ticket(connection: Connection, body: TicketBody, members: list[Any]) -> dict[str, Any]:
    """Record one ticket for ``members`` and link it from each finding."""
    t = schema.findings.c
    ticket_id = connection.execute(select(func.coalesce(func.max(schema.tickets.c.id), 0) + 1)).scalar_one()
    slug = f"{TICKET_PREFIX}-{SLUG_OFFSET + ticket_id}"
    url = f"{TRACKER_URL}/{slug}"
    ids = [row.id for row in members]
    connection.execute(insert(schema.tickets).values(
        id=ticket_id, external_slug=slug, url=url, issue_type=body.issue_type, repository=members[0].repo_name,
        rule_name=members[0].rule_name, issue_ids=orjson.dumps(ids).decode(),
        tracker_project_id=body.tracker_project_id, created_at=timefmt.iso_z(time.time())))
    connection.execute(update(schema.findings).where(t.id.in_(ids)).values(ticket_id=ticket_id))
    link = {"id": ticket_id, "externalSlug": slug, "url": url, "linkedIssueIds": ids}

    def edit(finding: dict[str, Any]) -> None:
        finding["external_ticket"] = link
        if isinstance(finding.get("usage"), dict):
            finding["usage"]["external_ticket"] = link

    rewrite_bodies(connection, ids, edit)
    return {"ticket_id": ticket_id, "ticket_url": url, "external_slug": slug, "issue_ids": ids}


@router.post("/deployments/{deploymentSlug}/tickets", name="tickets", operation_id="tickets",
             summary="Create tickets")
def create_tickets(body: TicketBody, emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Ticket the selected findings; report each finding as succeeded, skipped or failed."""
    requested = [int(i) for i in body.issue_ids or []]
    filters = selection_filters(body, requested)
    t = schema.findings.c
    failed: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    succeeded: list[dict[str, Any]] = []
    with emulator.change_findings() as connection:
        rows = connection.execute(
            select(t.id, t.status, t.ticket_id, t.repo_name, t.rule_name)
            .where(*conditions(filters)).order_by(t.relevant_since.desc(), t.id)).all()
        found = {row.id for row in rows}
        missing = [i for i in dict.fromkeys(requested) if i not in found]
        if missing:
            failed.append({"error": f"no {body.issue_type} finding with these ids", "issue_ids": missing})
        fixed = [row.id for row in rows if row.status == "fixed"]
        if fixed:
            failed.append({"error": "fixed findings cannot be ticketed", "issue_ids": fixed})
        linked = [row.id for row in rows if row.ticket_id is not None and row.status != "fixed"]
        if linked:
            skipped.append({"reason": "already linked to an external ticket", "issue_ids": linked})
        candidates = [row for row in rows if row.ticket_id is None and row.status != "fixed"]
        for index, members in enumerate(_groups(candidates, body.group_issues)):
            if index < body.limit:
                succeeded.append(_open_ticket(connection, body, members))
            else:
                failed.append({"error": f"ticket limit of {body.limit} per request exceeded; not ticketed",
                               "issue_ids": [row.id for row in members]})
    return OrjsonResponse({"failed": failed, "skipped": skipped, "succeeded": succeeded})
