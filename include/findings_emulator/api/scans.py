"""Scan search (4.3, cursor pagination, newest first) and scan details (4.4)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Body, Depends
from sqlalchemy import and_, or_, select

from .. import cursors, schema, timefmt
from ..dialect import REAL
from ..errors import invalid, not_found
from ..models import ScanSearchBody
from ..responses import OrjsonResponse
from ..scans import advance, read, render_details, render_summary
from ..state import Emulator
from .deps import by_id

router = APIRouter()
SEARCH_WINDOW = 30 * 86400.0
SQLITE_INT_MAX = 2**63 - 1


@router.post("/deployments/{deploymentId}/scans/search", name="scans_search", operation_id="scans_search",
             summary="List scans (beta)")
def search_scans(body: ScanSearchBody = Body(default_factory=ScanSearchBody),
                 emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """Scans of the last 30 days matching every given filter, newest first."""
    s = schema.scans.c
    now = time.time()
    where = [s.started_at >= now - SEARCH_WINDOW]
    if body.since:
        try:
            where.append(s.started_at > timefmt.parse_iso(body.since))
        except ValueError as exc:
            raise invalid("since", f"{body.since!r} is not an ISO 8601 date-time") from exc
    statuses = [body.statuses] if isinstance(body.statuses, str) else body.statuses
    if statuses:
        where.append(s.status.in_(statuses))
    if body.branch is not None:
        where.append(s.branch == body.branch)
    if body.repository_id is not None:
        where.append(s.repository_id == body.repository_id)
    if body.is_full_scan is not None:
        where.append(s.is_full_scan.is_(body.is_full_scan))
    if body.products:
        where.append(or_(*(s.products.contains(f"|{p}|", autoescape=True) for p in body.products)))
    if body.total_time is not None:
        if body.total_time.min is not None:
            where.append(s.total_time >= body.total_time.min)
        if body.total_time.max is not None:
            where.append(s.total_time <= body.total_time.max)
    if body.cursor:
        started_at, scan_id = cursors.decode(body.cursor)
        where.append(or_(s.started_at < started_at, and_(s.started_at == started_at, s.id < scan_id)))
    with emulator.transaction() as connection:
        advance(connection, now)
        rows = connection.execute(
            select(schema.scans).where(*where).order_by(s.started_at.desc(), s.id.desc()).limit(body.limit + 1)
        ).all()
    page = rows[: body.limit]
    cursor = cursors.encode(page[-1].started_at, page[-1].id) if len(rows) > body.limit else ""
    deployment_id, real = emulator.config.deployment_id, emulator.config.dialect == REAL
    return OrjsonResponse({"scans": [render_summary(row, deployment_id, real) for row in page], "cursor": cursor})


@router.get("/deployments/{deploymentId}/scan/{scanId}", name="scan_get", operation_id="scan_get",
            summary="Get scan details")
def get_scan(scanId: int, emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """One scan; it carries no status (clients derive it from completed_at, exit_code and started_at)."""
    if not 0 <= scanId <= SQLITE_INT_MAX:  # no such scan, and SQLite cannot even compare the value
        raise not_found(f"scan {scanId}")
    with emulator.transaction() as connection:
        advance(connection)
        read(connection, scanId)
        row = connection.execute(select(schema.scans).where(schema.scans.c.id == scanId)).first()
    if row is None:
        raise not_found(f"scan {scanId}")
    return OrjsonResponse(render_details(row, emulator.config.deployment_id, emulator.config.dialect == REAL))
