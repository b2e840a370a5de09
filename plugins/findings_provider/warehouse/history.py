"""Findings history: the changes the pipeline observes (``finding_events``) and daily counts (``finding_snapshots``).

Nothing here asks the service anything: every upsert of findings (the extraction's pages, the fresh re-reads
before a write, the re-read after one) compares the stored values of ``HISTORY_FIELDS`` with the values it is
about to write and records each difference, in the upsert's own transaction. So a change is recorded once
whichever run reads it first, a rerun or a full refresh that reads the same state adds nothing, and a failed page
records nothing. A finding's first observation is not an event: its row is the starting state, with the times the
service itself gives (``relevant_since``, ``triaged_at``, ``state_updated_at``), which is what lets a first sync
answer "how long did it take" for what happened before the pipeline ran.

The comparison costs one indexed read of the page's stored rows: about 3 ms for a 3000-finding page on SQLite
(measured by ``bench/run_all.py``'s re-sync, which reads every page again).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime, timezone
from typing import Any

from sqlalchemy import delete, func, insert, literal, select
from sqlalchemy.engine import Connection

from .rows import FINDING_COLUMNS, Row
from .schema import UtcDateTime, finding_snapshots, findings

#: The finding columns whose changes are recorded.
HISTORY_FIELDS = ("status", "triage_state", "triage_reason", "severity", "external_ticket_id")

_TYPE = FINDING_COLUMNS.index("issue_type")
_ID = FINDING_COLUMNS.index("id")
_TRACKED = tuple(FINDING_COLUMNS.index(name) for name in HISTORY_FIELDS)
_SELECT = f"SELECT id, {', '.join(HISTORY_FIELDS)} FROM findings WHERE issue_type = {{p}} AND id {{ids}}"
_STORED = {
    "sqlite": _SELECT.format(p="?", ids="IN (SELECT value FROM json_each(?))"),
    "postgresql": _SELECT.format(p="%s", ids="= ANY(%s)"),
}
_INSERT = (
    "INSERT INTO finding_events (issue_type, finding_id, field, old_value, new_value, observed_at, run_id) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})"
)
_EVENTS = {"sqlite": _INSERT.format(p="?"), "postgresql": _INSERT.format(p="%s")}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def record_changes(cursor: Any, rows: Sequence[Row], now: str, *, dialect: str, run_id: str | None) -> int:
    """Record in ``finding_events`` each ``HISTORY_FIELDS`` value of ``rows`` that differs from the stored one
    (findings not stored yet have no event); ``cursor`` is a DBAPI cursor inside the upsert's transaction.
    Return the events recorded."""
    by_type: dict[str, dict[int, Row]] = {}
    for row in rows:
        by_type.setdefault(row[_TYPE], {})[row[_ID]] = row
    events = []
    for issue_type, by_id in by_type.items():
        ids: Any = json.dumps(list(by_id)) if dialect == "sqlite" else list(by_id)
        cursor.execute(_STORED[dialect], (issue_type, ids))
        for stored in cursor.fetchall():
            new = by_id[stored[0]]
            for field, old, position in zip(HISTORY_FIELDS, stored[1:], _TRACKED, strict=True):
                if old != new[position]:
                    events.append((issue_type, stored[0], field, _text(old), _text(new[position]), now, run_id))
    if events:
        cursor.executemany(_EVENTS[dialect], events)
    return len(events)


def take_snapshot(conn: Connection, day: date) -> int:
    """Replace ``day``'s rows of ``finding_snapshots`` with the current counts; return the rows written."""
    key = [func.coalesce(findings.c[name], "") for name in ("repository_name", "severity", "status")]
    now = literal(datetime.now(timezone.utc), UtcDateTime)
    counts = select(literal(day.isoformat()), findings.c.issue_type, *key, func.count(), now).group_by(
        findings.c.issue_type, *key)
    conn.execute(delete(finding_snapshots).where(finding_snapshots.c.day == day.isoformat()))
    columns = ["day", "issue_type", "repository_name", "severity", "status", "count", "created_at"]
    result = conn.execute(insert(finding_snapshots).from_select(columns, counts))
    return int(result.rowcount)
