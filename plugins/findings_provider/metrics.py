"""Programme metrics from the warehouse and its history (pandas): what the dashboard and the summary report show.

- open findings over time by severity (``finding_snapshots``, one row per day);
- time to fix and time to triage by severity, median and 90th percentile, in days: from ``relevant_since`` to the
  first observed change to ``fixed`` (``finding_events``), else to the service's ``state_updated_at``; and to the
  first observed triage, else to the service's ``triaged_at`` (so a first sync already answers for the past);
- fix-time targets (``sla`` in ``include/pipeline.yaml``) and the open findings that breach them;
- triage and ticket activity per run, scan health per repository, rule mode changes made.

Every function reads through the warehouse's engine and returns a DataFrame (empty, with its columns, when
there is nothing), so a report, a page or a test can use any of them alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, case, func, or_, select

from findings_provider import programme
from findings_provider.client import ScanStatus
from findings_provider.client.vocabulary import OPEN_STATUSES, SEVERITY_ORDER, FindingStatus
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import (
    finding_events,
    finding_snapshots,
    findings,
    policy_changes,
    scans,
    ticket_actions,
    triage_actions,
)

if TYPE_CHECKING:
    import pandas as pd

#: Most breaching findings listed (the count is exact).
BREACHES_LISTED = 200
_DAY = 86400.0


def _frame(warehouse: Warehouse, stmt: Any, columns: list[str] | None = None) -> pd.DataFrame:
    import pandas as pd

    with warehouse.engine.connect() as conn:
        result = conn.execute(stmt)
        return pd.DataFrame(result.fetchall(), columns=columns or list(result.keys()))


def severity_order(names: Iterable[Any]) -> list[Any]:
    """``names`` with the known severities first, most severe first, then the others sorted."""
    names = list(names)
    return [s for s in SEVERITY_ORDER if s in names] + sorted((s for s in names if s not in SEVERITY_ORDER), key=str)


def _severity_sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.loc[severity_order(frame.index)]


def open_over_time(warehouse: Warehouse, days: int = 90, now: datetime | None = None,
                   by: str = "severity") -> pd.DataFrame:
    """Open findings per snapshot day (rows, oldest first) and ``by`` (columns): ``severity`` (most severe first)
    or ``issue_type``."""
    import pandas as pd

    if by not in ("severity", "issue_type"):
        raise ValueError(f"by = {by!r}: expected severity or issue_type")
    start = ((now or datetime.now(timezone.utc)) - timedelta(days=days)).date().isoformat()
    column = finding_snapshots.c[by]
    stmt = (
        select(finding_snapshots.c.day, column, func.sum(finding_snapshots.c["count"]))
        .where(finding_snapshots.c.day >= start, finding_snapshots.c.status.in_(OPEN_STATUSES))
        .group_by(finding_snapshots.c.day, column)
    )
    frame = _frame(warehouse, stmt, ["day", by, "findings"])
    if frame.empty:
        return pd.DataFrame(dtype="int64")
    frame[by] = frame[by].replace("", "unknown")
    table = frame.pivot_table(index="day", columns=by, values="findings", aggfunc="sum", fill_value=0)
    table = table[_severity_sorted(table.T).index] if by == "severity" else table[sorted(table.columns)]
    table.columns.name = None
    return table.astype("int64")


def _durations(frame: pd.DataFrame) -> pd.DataFrame:
    """Per severity: findings, median and 90th percentile of ``days``."""
    import pandas as pd

    columns = ["findings", "median_days", "p90_days"]
    frame = frame.dropna(subset=["days"])
    frame = frame[frame["days"] >= 0]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = frame.assign(severity=frame["severity"].fillna("unknown"))
    grouped = frame.groupby("severity")["days"]
    table = pd.DataFrame({"findings": grouped.size(), "median_days": grouped.median(),
                          "p90_days": grouped.quantile(0.9)})
    table.index.name = None
    return _severity_sorted(table).round({"median_days": 1, "p90_days": 1})


def _first_event(field: str, values: tuple[str, ...] | None = None, *, not_values: tuple[str, ...] = ()) -> Any:
    conditions = [finding_events.c.field == field]
    if values is not None:
        conditions.append(finding_events.c.new_value.in_(values))
    if not_values:
        conditions.append(finding_events.c.new_value.not_in(not_values))
    return (
        select(finding_events.c.issue_type, finding_events.c.finding_id,
               func.min(finding_events.c.observed_at).label("at"))
        .where(*conditions)
        .group_by(finding_events.c.issue_type, finding_events.c.finding_id)
        .subquery()
    )


def _elapsed(warehouse: Warehouse, event: Any, fallback: Any, *where: Any) -> pd.DataFrame:
    """Severity and days from ``relevant_since`` to the first ``event``, else to the ``fallback`` column."""
    import pandas as pd

    stmt = (
        select(findings.c.severity, findings.c.relevant_since, event.c.at, fallback)
        .select_from(findings.outerjoin(event, and_(event.c.issue_type == findings.c.issue_type,
                                                    event.c.finding_id == findings.c.id)))
        .where(*where)
    )
    frame = _frame(warehouse, stmt, ["severity", "since", "event_at", "service_at"])
    if frame.empty:
        return frame.assign(days=pd.Series(dtype="float64"))
    done = pd.to_datetime(frame["event_at"], utc=True).fillna(pd.to_datetime(frame["service_at"], utc=True))
    since = pd.to_datetime(frame["since"], utc=True)
    return frame.assign(days=(done - since).dt.total_seconds() / _DAY)


def time_to_fix(warehouse: Warehouse) -> pd.DataFrame:
    """Fixed findings by severity: count, median and p90 days from ``relevant_since`` to fixed."""
    fixed = _first_event("status", (FindingStatus.FIXED.value,))
    return _durations(_elapsed(warehouse, fixed, findings.c.state_updated_at,
                               findings.c.status == FindingStatus.FIXED.value))


def time_to_triage(warehouse: Warehouse) -> pd.DataFrame:
    """Triaged findings by severity: count, median and p90 days from ``relevant_since`` to the first triage."""
    triaged = _first_event("triage_state", not_values=("untriaged",))
    return _durations(_elapsed(
        warehouse, triaged, findings.c.triaged_at,
        or_(findings.c.triaged_at.is_not(None), triaged.c.at.is_not(None)),
    ))


def sla_breaches(warehouse: Warehouse, targets: Mapping[str, int], now: datetime | None = None,
                 limit: int = BREACHES_LISTED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Open findings older than their severity's fix-time target (days).

    Returns (summary by severity: target, open findings, breaching; the breaching findings, most overdue first,
    at most ``limit``)."""
    import pandas as pd

    now = now or datetime.now(timezone.utc)
    summary_rows, listed = [], []
    for severity, target in targets.items():
        of_severity = and_(findings.c.severity == severity, programme.is_open(), programme.in_view())
        late = and_(findings.c.severity == severity, programme.is_overdue(targets, now), programme.in_view())
        counts = select(func.count(), func.sum(case((late, 1), else_=0))).where(of_severity)
        with warehouse.engine.connect() as conn:
            total, breaching = conn.execute(counts).one()
            rows = conn.execute(
                select(findings.c.issue_type, findings.c.id, findings.c.repository_name, findings.c.rule_name,
                       findings.c.severity, findings.c.status, findings.c.relevant_since,
                       findings.c.external_ticket_id)
                .where(late).order_by(findings.c.relevant_since).limit(limit)
            ).all()
        summary_rows.append({"severity": severity, "target_days": target, "open": int(total or 0),
                             "breaching": int(breaching or 0)})
        listed += [dict(r._mapping) for r in rows]
    summary = pd.DataFrame(summary_rows, columns=["severity", "target_days", "open", "breaching"]).set_index(
        "severity")
    summary.index.name = None
    columns = ["issue_type", "id", "repository_name", "rule_name", "severity", "status", "relevant_since",
               "external_ticket_id", "overdue_days"]
    if not listed:
        return summary, pd.DataFrame(columns=columns)
    frame = pd.DataFrame(listed)
    frame["overdue_days"] = [programme.days_past_target(r["relevant_since"], r["severity"], targets, now)
                             for r in listed]
    frame = frame.sort_values("overdue_days", ascending=False, kind="stable").head(limit)
    return summary, frame[columns].reset_index(drop=True)


def activity_per_run(warehouse: Warehouse, runs: int = 30) -> pd.DataFrame:
    """Per run (newest first): findings triaged, triage requests failed, tickets created and failed."""
    import pandas as pd

    triage = _frame(warehouse, select(
        triage_actions.c.run_id,
        func.min(triage_actions.c.created_at).label("at"),
        func.sum(case((triage_actions.c.status == "succeeded", triage_actions.c.num_triaged), else_=0)),
        func.sum(case((triage_actions.c.status == "failed", 1), else_=0)),
    ).where(triage_actions.c.dry_run.is_(False)).group_by(triage_actions.c.run_id),
        ["run_id", "at", "triaged", "triage_failed"])
    tickets = _frame(warehouse, select(
        ticket_actions.c.run_id,
        func.min(ticket_actions.c.created_at).label("at"),
        func.count(func.distinct(case((ticket_actions.c.outcome == "succeeded", ticket_actions.c.ticket_id)))),
        func.sum(case((ticket_actions.c.outcome.in_(("failed", "ambiguous")), 1), else_=0)),
    ).group_by(ticket_actions.c.run_id), ["run_id", "at", "tickets_created", "ticket_findings_failed"])
    frame = pd.concat([triage, tickets], ignore_index=True)
    if frame.empty:
        return pd.DataFrame(columns=["at", "triaged", "triage_failed", "tickets_created", "ticket_findings_failed"])
    frame["at"] = pd.to_datetime(frame["at"], utc=True)
    table = frame.groupby(frame["run_id"].fillna("")).agg(
        at=("at", "min"), triaged=("triaged", "sum"), triage_failed=("triage_failed", "sum"),
        tickets_created=("tickets_created", "sum"), ticket_findings_failed=("ticket_findings_failed", "sum"))
    table.index.name = None
    table = table.sort_values("at", ascending=False).head(runs)
    counts = ["triaged", "triage_failed", "tickets_created", "ticket_findings_failed"]
    table[counts] = table[counts].fillna(0).astype("int64")
    return table


def scan_health(warehouse: Warehouse) -> pd.DataFrame:
    """Per repository: scans stored, completed, failed (error), never finished, running, and the last start."""
    import pandas as pd

    def count(status: ScanStatus) -> Any:
        return func.sum(case((scans.c.status == status.value, 1), else_=0))

    frame = _frame(warehouse, select(
        func.coalesce(scans.c.repository_id, "unknown"), func.count(), count(ScanStatus.COMPLETED),
        count(ScanStatus.ERROR), count(ScanStatus.NEVER_FINISHED), count(ScanStatus.RUNNING),
        func.max(scans.c.started_at),
    ).group_by(func.coalesce(scans.c.repository_id, "unknown")),
        ["repository", "scans", "completed", "failed", "never_finished", "running", "last_started_at"])
    if frame.empty:
        return pd.DataFrame(columns=frame.columns[1:])
    frame = frame.set_index("repository")
    frame.index.name = None
    return frame.sort_values(["failed", "never_finished", "scans"], ascending=False, kind="stable")


def policy_changes_made(warehouse: Warehouse, limit: int = 200, run_id: str | None = None) -> pd.DataFrame:
    """Rule mode changes sent after approval (applied, already applied, skipped, failed), newest first, of one run
    when given. Pending proposals are in the latest ``policy_tuning`` report."""
    stmt = select(
        policy_changes.c.created_at, policy_changes.c.run_id, policy_changes.c.policy_id, policy_changes.c.rule_path,
        policy_changes.c.previous_mode, policy_changes.c.new_mode, policy_changes.c.status,
    )
    if run_id:
        stmt = stmt.where(policy_changes.c.run_id == run_id)
    return _frame(warehouse, stmt.order_by(policy_changes.c.id.desc()).limit(limit))
