"""List secrets findings (4.15): cursor pagination, newest ``relevant_since`` first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Query, Response
from sqlalchemy import ColumnElement, and_, or_, select

from .. import cursors, schema, timefmt
from ..dialect import REAL, SECRET_STATUS, VALIDATION, secret_to_real
from ..errors import invalid
from ..listing import bodies
from ..responses import OrjsonResponse, raw_json
from ..state import Emulator
from .deps import by_id

router = APIRouter()
SECRETS_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"description": "`findings` (secrets findings) and `cursor` (empty on the last page)",
          "content": {"application/json": {}}}}
_STATUSES = {value: tuple(k for k, v in SECRET_STATUS.items() if v == value) for value in SECRET_STATUS.values()}
_VALIDATION = {value: key for key, value in VALIDATION.items()}


def _enum_values(name: str, values: list[str], prefix: str, mapping: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Stored values for filter values given as ``PREFIX_VALUE`` (real) or the stored value itself."""
    stored: list[str] = []
    for value in values:
        if value in mapping:
            stored.extend(mapping[value])
        elif value.startswith(prefix):
            stored.append(value.removeprefix(prefix).lower())
        else:
            stored.append(value)
    if not stored:
        raise invalid(name, f"no known value in {values!r}")
    return stored


def _filters(since: str | None, validation_state: list[str], status: str | None, severity: list[str],
             repo: list[str]) -> list[ColumnElement[bool]]:
    t = schema.findings.c
    where: list[ColumnElement[bool]] = []
    if since:
        try:
            where.append(t.relevant_since >= timefmt.parse_iso(since))
        except ValueError as exc:
            raise invalid("since", f"{since!r} is not an ISO 8601 date-time") from exc
    if validation_state:
        mapping = {k: (v,) for k, v in _VALIDATION.items()}
        where.append(t.validation_state.in_(_enum_values("validationState", validation_state,
                                                         "VALIDATION_STATE_", mapping)))
    if status:
        where.append(t.status.in_(_enum_values("status", [status], "FINDING_STATUS_", _STATUSES)))
    if severity:
        where.append(t.severity.in_(_enum_values("severity", severity, "SEVERITY_", {})))
    if repo:
        where.append(t.repo_name.in_(repo))
    return where


@router.get("/deployments/{deploymentId}/secrets", name="secrets", operation_id="secrets",
            summary="List secrets findings", response_class=Response, responses=SECRETS_RESPONSE)
def list_secrets(cursor: str = Query(""), limit: int = Query(100, ge=1, le=1000),
                 since: str | None = Query(None, description="ISO 8601 date-time; filters on relevant_since"),
                 validationState: list[str] = Query([]), status: str | None = None,
                 severity: list[str] = Query([]), repo: list[str] = Query([]),
                 emulator: Emulator = Depends(by_id)) -> Response:
    """A page of secrets findings after ``cursor``; the next cursor is empty when nothing follows."""
    t = schema.findings.c
    query = select(t.id, t.relevant_since).where(t.issue_type == "secrets",
                                                  *_filters(since, validationState, status, severity, repo))
    if cursor:
        since_key, last_id = cursors.decode(cursor)
        query = query.where(or_(t.relevant_since < since_key, and_(t.relevant_since == since_key, t.id > last_id)))
    with emulator.transaction() as connection:
        rows = connection.execute(query.order_by(t.relevant_since.desc(), t.id).limit(limit + 1)).all()
        page = rows[:limit]
        items = bodies(connection, [row.id for row in page])
    next_cursor = cursors.encode(page[-1].relevant_since, page[-1].id) if len(rows) > limit else ""
    if emulator.config.dialect == REAL:
        return OrjsonResponse({"findings": [secret_to_real(orjson.loads(item)) for item in items],
                               "cursor": next_cursor, "previous": cursor})
    return raw_json(b'{"findings":[' + b",".join(items) + b'],"cursor":"' + next_cursor.encode() + b'"}')
