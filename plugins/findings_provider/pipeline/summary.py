"""Summary of open findings from the warehouse (pandas): by severity x issue type, and by repository; the alerts
about new critical findings and new SLA breaches."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import func, not_, select

from findings_provider import metrics, programme
from findings_provider.client.timeutil import parse_timestamp
from findings_provider.metrics import severity_order
from findings_provider.pipeline.alert import Alert
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import findings

if TYPE_CHECKING:
    import pandas as pd


def open_findings_summary(warehouse: Warehouse) -> dict[str, pd.DataFrame]:
    """Two tables of open-finding counts (open as ``programme`` defines it): ``by_severity`` (rows severity,
    columns issue type) and
    ``by_repository`` (rows repository, columns severity, most findings first)."""
    import pandas as pd

    stmt = (
        select(
            findings.c.issue_type,
            func.coalesce(findings.c.severity, "unknown").label("severity"),
            func.coalesce(findings.c.repository_name, "unknown").label("repository"),
            func.count().label("findings"),
        )
        .where(programme.is_open(), programme.in_view())
        .group_by(findings.c.issue_type, "severity", "repository")
    )
    with warehouse.engine.connect() as conn:
        result = conn.execute(stmt)
        frame = pd.DataFrame(result.fetchall(), columns=list(result.keys()))
    if frame.empty:
        empty = pd.DataFrame(dtype="int64")
        return {"by_severity": empty, "by_repository": empty.copy()}
    by_severity = frame.pivot_table(
        index="severity", columns="issue_type", values="findings", aggfunc="sum", fill_value=0
    )
    by_severity = by_severity.loc[severity_order(by_severity.index)]
    by_severity.columns.name = None
    by_repository = frame.pivot_table(
        index="repository", columns="severity", values="findings", aggfunc="sum", fill_value=0
    )
    by_repository = by_repository[severity_order(by_repository.columns)]
    by_repository.columns.name = None
    by_repository = by_repository.loc[by_repository.sum(axis=1).sort_values(ascending=False, kind="stable").index]
    return {"by_severity": by_severity.astype("int64"), "by_repository": by_repository.astype("int64")}


#: Pipeline state key: when the summary last looked for new critical findings and new SLA breaches.
ALERTS_CHECKED_KEY = "summary:alerts_checked_at"
#: Findings named in one alert's body (the count is exact).
ALERT_FINDINGS_LISTED = 20


def programme_alerts(warehouse: Warehouse, fix_days: Mapping[str, int], now: datetime,
                     link: str | None = None) -> list[Alert]:
    """Alerts about what changed since the last check (``ALERTS_CHECKED_KEY``): open critical findings detected
    since then (``new_critical``), and open findings whose fix-time target passed since then (``sla_breach``).
    The first check only records its time: the starting state is on the dashboard, not in a flood of mail."""
    last = parse_timestamp(warehouse.get_state(ALERTS_CHECKED_KEY))
    alerts: list[Alert] = []
    if last is not None:
        new = _open_where(warehouse, findings.c.severity == "critical", findings.c.relevant_since > last)
        if new:
            alerts.append(Alert("new_critical", f"{len(new)} new critical finding(s) since {last:%Y-%m-%d %H:%M} UTC",
                                _listing(new), link))
        # past the target now and not at the last check: the programme's one definition of "past target"
        late = _open_where(warehouse, programme.is_overdue(fix_days, now), not_(programme.is_overdue(fix_days, last)))
        if late:
            alerts.append(Alert("sla_breach", f"{len(late)} finding(s) passed their fix-time target since "
                                f"{last:%Y-%m-%d %H:%M} UTC", _listing(late), link))
    warehouse.set_state(ALERTS_CHECKED_KEY, now.isoformat())
    return alerts


def _open_where(warehouse: Warehouse, *conditions: Any) -> list[Any]:
    stmt = select(findings.c.issue_type, findings.c.id, findings.c.severity, findings.c.repository_name,
                  findings.c.rule_name, findings.c.relevant_since).where(
        programme.is_open(), programme.in_view(), *conditions).order_by(findings.c.relevant_since)
    with warehouse.engine.connect() as conn:
        return list(conn.execute(stmt))


def _listing(rows: list[Any]) -> str:
    lines = [f"{r.severity or '?'} {r.issue_type} {r.id} in {r.repository_name or '?'}: {r.rule_name or '?'} "
             f"(detected {r.relevant_since:%Y-%m-%d})" for r in rows[:ALERT_FINDINGS_LISTED]]
    if len(rows) > ALERT_FINDINGS_LISTED:
        lines.append(f"... and {len(rows) - ALERT_FINDINGS_LISTED} more")
    return "\n".join(lines)


#: Pipeline state key of the summary task's latest metrics (what the dashboard's overview shows).
LATEST_METRICS_KEY = "summary:latest_metrics"


def programme_tables(warehouse: Warehouse, fix_days: Mapping[str, int], now: datetime) -> dict[str, pd.DataFrame]:
    """Every table of the programme report: the open-findings summary and the metrics of :mod:`..metrics`."""
    sla, breaches = metrics.sla_breaches(warehouse, fix_days, now)
    return {
        **open_findings_summary(warehouse),
        "open_over_time": metrics.open_over_time(warehouse, now=now),
        "open_over_time_by_type": metrics.open_over_time(warehouse, now=now, by="issue_type"),
        "time_to_fix": metrics.time_to_fix(warehouse),
        "time_to_triage": metrics.time_to_triage(warehouse),
        "sla": sla,
        "sla_breaches": breaches,
        "activity_per_run": metrics.activity_per_run(warehouse),
        "scan_health": metrics.scan_health(warehouse),
    }


def latest_metrics(run_id: str | None, tables: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """What the overview shows of a summary run (stored under ``LATEST_METRICS_KEY``): JSON-safe records."""
    def records(frame: Any, index: str | None = "severity") -> list[dict[str, Any]]:
        if frame is None or len(frame) == 0:
            return []
        out = frame.reset_index(names=index) if index else frame
        rows: list[dict[str, Any]] = orjson.loads(out.to_json(orient="records", date_format="iso"))
        return rows

    return {
        "run_id": run_id,
        "computed_at": now.isoformat(timespec="seconds"),
        "sla": records(tables.get("sla")),
        "time_to_fix": records(tables.get("time_to_fix")),
        "time_to_triage": records(tables.get("time_to_triage")),
        "sla_breaches": records(tables.get("sla_breaches"), None)[:50],
    }
