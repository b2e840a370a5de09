"""List secrets findings (4.15): cursor pagination, newest ``relevant_since`` first."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Response
from sqlalchemy import and_, or_, select

from .. import cursors, schema
from ..listing import bodies
from ..responses import raw_json
from ..state import Emulator
from .deps import by_id

router = APIRouter()
SECRETS_RESPONSE = {200: {"description": "`findings` (secrets findings) and `cursor` (empty on the last page)",
                          "content": {"application/json": {}}}}


@router.get("/deployments/{deploymentId}/secrets", name="secrets", operation_id="secrets",
            summary="List secrets findings", response_class=Response, responses=SECRETS_RESPONSE)
def list_secrets(cursor: str = Query(""), limit: int = Query(100, ge=1, le=1000),
                 emulator: Emulator = Depends(by_id)) -> Response:
    """A page of secrets findings after ``cursor``; the next cursor is empty when nothing follows."""
    t = schema.findings.c
    query = select(t.id, t.relevant_since).where(t.issue_type == "secrets")
    if cursor:
        since, last_id = cursors.decode(cursor)
        query = query.where(or_(t.relevant_since < since, and_(t.relevant_since == since, t.id > last_id)))
    with emulator.transaction() as connection:
        rows = connection.execute(query.order_by(t.relevant_since.desc(), t.id).limit(limit + 1)).all()
        page = rows[:limit]
        items = bodies(connection, [row.id for row in page])
    next_cursor = cursors.encode(page[-1].relevant_since, page[-1].id) if len(rows) > limit else ""
    return raw_json(b'{"findings":[' + b",".join(items) + b'],"cursor":"' + next_cursor.encode() + b'"}')
