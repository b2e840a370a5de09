"""Scan life cycle: running scans finish (or fail) after their duration (or after so many reads of their details),
or are never finished after an hour."""

from __future__ import annotations

import time
from typing import Any

import orjson
from sqlalchemy import Connection, and_, update

from . import schema, timefmt

NEVER_FINISHED_AFTER = 3600.0
RUNNING = "SCAN_STATUS_RUNNING"
NOT_STARTED_OR_RUNNING = ("SCAN_STATUS_RUNNING", "SCAN_STATUS_PENDING")
FINISHED = ("SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR", "SCAN_STATUS_CANCELLED")


def advance(connection: Connection, now: float | None = None) -> None:
    """Move scans on to where time has taken them."""
    now = time.time() if now is None else now
    s = schema.scans.c
    connection.execute(
        update(schema.scans)
        .where(s.status.in_(NOT_STARTED_OR_RUNNING), s.finish_after.is_not(None),
               s.finish_after <= NEVER_FINISHED_AFTER, s.started_at + s.finish_after <= now)
        .values(status=s.final_status, exit_code=s.final_exit_code, completed_at=s.started_at + s.finish_after,
                total_time=s.finish_after)
    )
    connection.execute(
        update(schema.scans)
        .where(and_(s.status == RUNNING, s.completed_at.is_(None), s.started_at < now - NEVER_FINISHED_AFTER))
        .values(status="SCAN_STATUS_NEVER_FINISHED")
    )


def read(connection: Connection, scan_id: int, now: float | None = None) -> None:
    """Count one read of a scan's details: a running or pending scan added with ``finish_after_reads`` finishes
    (with its final status, now) at its last read."""
    now = time.time() if now is None else now
    s = schema.scans.c
    mine = and_(s.id == scan_id, s.status.in_(NOT_STARTED_OR_RUNNING), s.reads_left.is_not(None))
    connection.execute(update(schema.scans).where(mine).values(reads_left=s.reads_left - 1))
    connection.execute(
        update(schema.scans)
        .where(mine, s.reads_left <= 0)
        .values(status=s.final_status, exit_code=s.final_exit_code, completed_at=now, total_time=now - s.started_at,
                reads_left=None)
    )


def _products(row: Any) -> list[str]:
    return row.products.strip("|").split("|")


def _counts(row: Any) -> dict[str, int]:
    return {"code": row.code_count, "secrets": row.secrets_count, "supply_chain": row.sca_count,
            "total": row.code_count + row.secrets_count + row.sca_count}


def render_summary(row: Any, deployment_id: str, real: bool = False) -> dict[str, Any]:
    """A scan as listed by scan search (reference 2.5); unset times and exit codes are null. The real dialect
    sends int64 values (``exit_code``, the counts) as digit strings."""
    counts: dict[str, Any] = _counts(row)
    exit_code: Any = row.exit_code
    if real:
        counts = {key: str(value) for key, value in counts.items()}
        exit_code = None if exit_code is None else str(exit_code)
    return {
        "id": str(row.id), "deployment_id": deployment_id, "repository_id": str(row.repository_id),
        "branch": row.branch, "commit": row.commit, "started_at": timefmt.iso_z(row.started_at),
        "completed_at": None if row.completed_at is None else timefmt.iso_z(row.completed_at),
        "status": row.status, "exit_code": exit_code, "total_time": row.total_time,
        "is_full_scan": bool(row.is_full_scan), "enabled_products": _products(row), "findings_counts": counts,
    }


def _real_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """Scan metadata as the real service sends it: titles as plain strings, ``pull_request_id`` a string (as
    the schema types it), the trigger under ``on``."""
    def plain(value: Any) -> Any:
        return value.get("value") if isinstance(value, dict) else value
    pr_id = meta.get("pull_request_id")
    return {**meta, "commit_title": plain(meta.get("commit_title")),
            "pull_request_title": plain(meta.get("pull_request_title")),
            "pull_request_id": None if pr_id is None else str(pr_id),
            "on": "push" if meta.get("pull_request_id") is None else "pull_request"}


def render_details(row: Any, deployment_id: str, real: bool = False) -> dict[str, Any]:
    """A scan as read alone (reference 2.6): no status, the client derives it; unset values are null."""
    meta = orjson.loads(row.meta)
    return {
        "id": row.id, "deployment_id": int(deployment_id), "repository_id": row.repository_id,
        "started_at": timefmt.iso_z(row.started_at),
        "completed_at": None if row.completed_at is None else timefmt.iso_z(row.completed_at),
        "exit_code": row.exit_code, "enabled_products": _products(row), "has_logs": bool(row.has_logs),
        "stats": {"findings": _counts(row)["total"], "total_time": row.total_time or 0.0},
        "meta": _real_meta(meta) if real else meta,
    }
