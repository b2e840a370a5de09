"""Findings history: the changes the pipeline observes (``finding_events``) and daily counts (``finding_snapshots``).

Nothing here asks the service anything: every upsert of findings (the extraction's pages, the fresh re-reads
before a write, the re-read after one) records, in its own transaction, each stored value of ``HISTORY_FIELDS``
that the upsert changes. So a change is recorded once whichever run reads it first, a rerun or a full refresh
that reads the same state adds nothing, and a failed page records nothing. A finding's first observation is not an
event: its row is the starting state, with the times the service itself gives (``relevant_since``, ``triaged_at``,
``state_updated_at``), which is what lets a first sync answer "how long did it take" for what happened before the
pipeline ran.

The comparison is set-based and costs nothing for rows the upsert does not change:

- SQLite: a ``TEMP`` trigger (connection-local, created on first use) after each update of ``findings`` writes
  the differences; it reads the observing run and time from a ``TEMP`` table the upsert fills for the length of its
  transaction, so other updates of ``findings`` (migrations, tests) record nothing;
- PostgreSQL: one ``INSERT ... SELECT`` joins the upsert's ``COPY`` staging table with ``findings`` before the
  merge.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

from sqlalchemy import Select, case, delete, func, insert, literal, select
from sqlalchemy.engine import Connection

from .branches import is_counted
from .schema import UtcDateTime, finding_snapshots, findings

#: The finding columns whose changes are recorded.
HISTORY_FIELDS = ("status", "triage_state", "triage_reason", "severity", "external_ticket_id")
_EVENT_COLUMNS = "issue_type, finding_id, field, old_value, new_value, observed_at, run_id"


def _pairs(old: str, new: str) -> str:
    """``VALUES`` rows (field, old text, new text) of every history field of two row aliases."""
    return ", ".join(f"('{f}', CAST({old}.{f} AS TEXT), CAST({new}.{f} AS TEXT))" for f in HISTORY_FIELDS)


#: SQLite: the connection-local context (observing run and time) and the trigger that reads it.
SQLITE_CONTEXT = "CREATE TEMP TABLE IF NOT EXISTS findings_history_context (run_id TEXT, observed_at TEXT)"
SQLITE_TRIGGER = (
    "CREATE TEMP TRIGGER IF NOT EXISTS findings_history AFTER UPDATE ON main.findings BEGIN "
    f"INSERT INTO finding_events ({_EVENT_COLUMNS}) "
    "SELECT old.issue_type, old.id, v.column1, v.column2, v.column3, c.observed_at, c.run_id "
    f"FROM (VALUES {_pairs('old', 'new')}) AS v, temp.findings_history_context AS c "
    "WHERE v.column2 IS NOT v.column3; END"
)
#: Run in each recording transaction (each ``IF NOT EXISTS``: the objects live as long as the connection).
SQLITE_HISTORY_SETUP = (SQLITE_CONTEXT, SQLITE_TRIGGER)
SQLITE_SET = "INSERT INTO temp.findings_history_context (run_id, observed_at) VALUES (?, ?)"
SQLITE_CLEAR = "DELETE FROM temp.findings_history_context"


def postgresql_events(stage: str, target: str) -> str:
    """PostgreSQL: the differences between the staged rows and the stored ones, as events (params: time, run)."""
    return (
        f"INSERT INTO finding_events ({_EVENT_COLUMNS}) "
        "SELECT t.issue_type, t.id, v.field, v.old_value, v.new_value, CAST(%s AS timestamptz), %s "
        f"FROM {stage} s JOIN {target} t ON t.issue_type = s.issue_type AND t.id = s.id "
        f"CROSS JOIN LATERAL (VALUES {_pairs('t', 's')}) AS v(field, old_value, new_value) "
        "WHERE v.old_value IS DISTINCT FROM v.new_value"
    )


#: The columns a daily snapshot counts by (besides ``issue_type``); the index ``ix_findings_counts`` covers them.
SNAPSHOT_KEY = ("repository_name", "severity", "status")


def snapshot_counts(day: date) -> Select[Any]:
    """The rows of ``day``'s snapshot: the count of findings per issue type and ``SNAPSHOT_KEY`` (NULL as ''),
    and of them the copies the service counts (``findings.counted``)."""
    key = [func.coalesce(findings.c[name], "") for name in SNAPSHOT_KEY]
    now = literal(datetime.now(timezone.utc), UtcDateTime)
    counted = func.sum(case((is_counted(), 1), else_=0))
    return select(literal(day.isoformat()), findings.c.issue_type, *key, func.count(), counted, now).group_by(
        findings.c.issue_type, *key)


def take_snapshot(conn: Connection, day: date) -> int:
    """Replace ``day``'s rows of ``finding_snapshots`` with the current counts; return the rows written."""
    conn.execute(delete(finding_snapshots).where(finding_snapshots.c.day == day.isoformat()))
    columns = ["day", "issue_type", *SNAPSHOT_KEY, "count", "counted", "created_at"]
    result = conn.execute(insert(finding_snapshots).from_select(columns, snapshot_counts(day)))
    return int(result.rowcount)
