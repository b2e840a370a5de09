"""The dashboard's views as JSON-safe data, from the warehouse (no Airflow, no request objects: unit-testable):
the overview, repositories, scans, triage and ticket runs, one run, policies, inventory and the reports.

Every count of findings goes through :mod:`findings_provider.programme` and carries the findings-list query that
reproduces it (``query``). Reads are bounded: counts read the covering indexes, lists read the newest rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import case, func, select

from findings_provider import programme
from findings_provider.client.vocabulary import OPEN_STATUSES, SEVERITY_ORDER, ScanStatus
from findings_provider.dashboard.airflow_state import RUNS_LISTED
from findings_provider.dashboard.memo import Memo
from findings_provider.metrics import policy_changes_made
from findings_provider.names import APPROVAL_DAGS, PIPELINE_DAGS
from findings_provider.pipeline.summary import LATEST_METRICS_KEY
from findings_provider.programme import MEASURES, FindingFilter
from findings_provider.text import http_url
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.branches import primary_branches
from findings_provider.warehouse.schema import (
    dependencies,
    dependency_repositories,
    finding_snapshots,
    findings,
    policy_changes,
    reports,
    scans,
    ticket_actions,
    triage_actions,
)

#: Days of history the trend shows.
TREND_DAYS = 90
#: Below this many days of history the overview says that history is short.
SHORT_HISTORY_DAYS = 7
#: Trends kept in memory (one per repository asked for, and the whole programme's), each until a new snapshot.
TRENDS_KEPT = 256
_trends: Memo[dict[str, Any]] = Memo(TRENDS_KEPT)
#: Newest scans listed.
SCANS_LISTED = 200
#: Readable scan statuses (anything else is shown as the service wrote it).
SCAN_STATUS_LABELS = {
    ScanStatus.PENDING.value: "Pending", ScanStatus.RUNNING.value: "Running", ScanStatus.COMPLETED.value: "Completed",
    ScanStatus.ERROR.value: "Failed", ScanStatus.NEVER_FINISHED.value: "Never finished",
    ScanStatus.CANCELLED.value: "Cancelled",
}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def measure_counts(conn: Any, targets: Mapping[str, int], now: datetime, base: FindingFilter | None = None,
                   known: Mapping[str, Mapping[str, int]] | None = None) -> list[dict[str, Any]]:
    """Every programme number within ``base``: total and per severity, each with the findings-list query that
    reproduces it (``known``: numbers per severity the caller counted already, by name)."""
    base = base or FindingFilter()
    out = []
    for name, label in MEASURES.items():
        per = (known or {}).get(name)
        if per is None:
            per = programme.counts_by_severity(conn, name, targets, now, base)
        out.append({
            "name": name, "label": label, "total": sum(per.values()),
            "query": base.narrowed(measure=name).query(),
            "by_severity": [{"severity": s, "count": per.get(s, 0),
                             "query": base.narrowed(measure=name, severity=s or programme.UNKNOWN_SEVERITY).query()}
                            for s in [*SEVERITY_ORDER, *sorted(set(per) - set(SEVERITY_ORDER))] if s in per
                            or s in SEVERITY_ORDER],
        })
    return out


def trend(warehouse: Warehouse, repository: str | None = None, days: int = TREND_DAYS,
          branches: str = "") -> dict[str, Any]:
    """Open findings per snapshot day and severity (the daily snapshots of the extraction) over the last ``days``
    days, oldest first, counted in the view ``branches`` (``programme.BRANCH_VIEWS``; a snapshot taken before
    the warehouse knew the counted copies counts every copy). History changes only when an extraction writes its
    day's snapshot: the same snapshot, the same trend (kept in :data:`_trends`)."""
    s = finding_snapshots.c
    with warehouse.engine.connect() as conn:
        latest = conn.execute(select(func.max(s.day))).scalar()
        written = None if latest is None else conn.execute(
            select(func.max(s.created_at)).where(s.day == latest)).scalar()
    if latest is None:
        return _trend_of([])
    return _trends.get(warehouse, (repository, days, branches, latest, str(written)),
                       lambda: _trend_of(_trend_rows(warehouse, repository, days, latest, branches)))


def _trend_rows(warehouse: Warehouse, repository: str | None, days: int, latest: str,
                branches: str) -> list[Any]:
    """The last ``days`` calendar days up to the newest snapshot, from the trend index."""
    s = finding_snapshots.c
    where: list[Any] = [s.status.in_(OPEN_STATUSES), s.day >= (date.fromisoformat(latest) - timedelta(
        days=days - 1)).isoformat()]
    if repository is not None:
        where.append(s.repository_name == repository)
    with warehouse.engine.connect() as conn:
        counted = s["count"] if branches else func.coalesce(s.counted, s["count"])
        return list(conn.execute(select(s.day, s.severity, func.sum(counted)).where(*where)
                                 .group_by(s.day, s.severity)))


def _trend_of(rows: list[Any]) -> dict[str, Any]:
    recent = sorted({day for day, _, _ in rows})
    per_day: dict[str, dict[str, int]] = {d: {} for d in recent}
    for day, severity, n in rows:
        per_day[day][severity or "unknown"] = int(n)
    severities = [x for x in SEVERITY_ORDER if any(x in v for v in per_day.values())] + sorted(
        {x for v in per_day.values() for x in v} - set(SEVERITY_ORDER))
    return {"days": recent, "severities": severities,
            "series": {x: [per_day[d].get(x, 0) for d in recent] for x in severities},
            "short": len(recent) < SHORT_HISTORY_DAYS}


def failed_scans(conn: Any, now: datetime) -> int:
    """The failed scans of the last ``programme.FAILED_SCANS_DAYS`` days (the list ``scan_list("failed")``)."""
    return int(conn.execute(select(func.count()).select_from(scans).where(programme.is_failed_scan(now))).scalar_one())


def branch_view(branches: str) -> dict[str, Any]:
    """What a page says of the view ``branches`` it counts in, and the other view's query value."""
    return {"branches": branches, "label": programme.BRANCH_VIEWS[branches],
            "other": "" if branches else "all", "other_label": programme.BRANCH_VIEWS["" if branches else "all"]}


def overview(warehouse: Warehouse, targets: Mapping[str, int], now: datetime,
             approvals: Sequence[Mapping[str, Any]] | None = (), branches: str = "") -> dict[str, Any]:
    """The programme numbers now, open findings by type, the trend, failed scans, approvals waiting, and the
    summary task's time-to-fix and time-to-triage tables; findings counted in the view ``branches``."""
    base = FindingFilter(branches=branches)
    with warehouse.engine.connect() as conn:
        # the open findings per type and severity, read once: the open number by severity and by type
        open_cells = programme.counts_by_type_and_severity(conn, "open", targets, now, base)
        open_by_severity: dict[str, int] = {}
        open_by_type: dict[str, int] = {}
        for (issue_type, severity), n in open_cells.items():
            open_by_severity[severity] = open_by_severity.get(severity, 0) + n
            open_by_type[issue_type] = open_by_type.get(issue_type, 0) + n
        measures = measure_counts(conn, targets, now, base, known={"open": open_by_severity})
        failed = failed_scans(conn, now)
    by_type = sorted(open_by_type.items())
    metrics = warehouse.get_state(LATEST_METRICS_KEY) or {}
    return {
        "as_of": _iso(now), "targets": dict(targets), "measures": measures, "view": branch_view(branches),
        "by_type": [{"issue_type": t, "count": int(n),
                     "query": base.narrowed(measure="open", issue_type=t).query()} for t, n in by_type],
        "trend": trend(warehouse, branches=branches),
        "failed_scans": {"count": failed, "days": programme.FAILED_SCANS_DAYS},
        "approvals": None if approvals is None else [dict(a) for a in approvals],
        "metrics": {k: metrics.get(k) for k in ("run_id", "computed_at", "time_to_fix", "time_to_triage")},
    }


def widget(warehouse: Warehouse, targets: Mapping[str, int], now: datetime,
           approvals: Sequence[Mapping[str, Any]] | None = ()) -> dict[str, Any]:
    """The few numbers for Airflow's home page: open criticals, findings past their target, failed scans,
    approvals waiting."""
    with warehouse.engine.connect() as conn:
        critical = FindingFilter(measure="open", severity="critical")
        overdue = FindingFilter(measure="overdue")
        return {
            "open_critical": {"count": programme.count(conn, critical, targets, now), "query": critical.query()},
            "overdue": {"count": programme.count(conn, overdue, targets, now), "query": overdue.query()},
            "failed_scans": {"count": failed_scans(conn, now), "days": programme.FAILED_SCANS_DAYS},
            "approvals": None if approvals is None else len(approvals),
        }


def repository_names(conn: Any) -> dict[str, str]:
    """Repository id -> name, from the dependency inventory (scans carry only the id)."""
    return {str(i): n for i, n in conn.execute(select(dependency_repositories.c.id, dependency_repositories.c.name))
            if n}


def repositories(warehouse: Warehouse, targets: Mapping[str, int], now: datetime,
                 branches: str = "") -> dict[str, Any]:
    """Per repository: open findings by severity and those past their target, most at risk first (counted in
    the view ``branches``)."""
    overdue = programme.is_overdue(targets, now)
    with warehouse.engine.connect() as conn:
        # grouped by status too: read in the order of ix_findings_status_repository, no sort
        rows = conn.execute(select(
            findings.c.status, findings.c.repository_name, findings.c.severity, func.count(),
            func.sum(case((overdue, 1), else_=0)),
        ).where(programme.is_open(), programme.in_view(branches))
            .group_by(findings.c.status, findings.c.repository_name, findings.c.severity)).all()
    table: dict[str, dict[str, Any]] = {}
    for _, name, severity, n, late in rows:
        entry = table.setdefault(name or "", {"repository": name or "", "open": 0, "overdue": 0,
                                              "by_severity": {}})
        entry["open"] += int(n)
        entry["overdue"] += int(late or 0)
        cells = entry["by_severity"]
        cells[severity or "unknown"] = cells.get(severity or "unknown", 0) + int(n)
    listed = sorted(table.values(), key=lambda e: (-e["overdue"], -e["by_severity"].get("critical", 0),
                                                  -e["open"], e["repository"]))
    return {"severities": list(SEVERITY_ORDER), "repositories": listed, "view": branch_view(branches)}


def repository(warehouse: Warehouse, name: str, targets: Mapping[str, int], now: datetime,
               branches: str = "") -> dict[str, Any]:
    """One repository: its primary branch, programme numbers, trend and newest scans."""
    base = FindingFilter(repository=name, branches=branches)
    with warehouse.engine.connect() as conn:
        measures = measure_counts(conn, targets, now, base)
        ids = [i for i, n in repository_names(conn).items() if n == name]
        primary = primary_branches(conn).get(name)
    return {"repository": name, "primary_branch": primary, "view": branch_view(branches), "measures": measures,
            "trend": trend(warehouse, repository=name, branches=branches),
            "scans": scan_list(warehouse, repository_ids=ids)["scans"] if ids else []}


def _scan_link(raw: str | None) -> str | None:
    try:
        data = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return None
    meta = data.get("meta") if isinstance(data, dict) else None
    if isinstance(meta, dict):
        return http_url(meta.get("ci_job_url")) or http_url(meta.get("repo_url"))
    return None


def scan_list(warehouse: Warehouse, status: str = "", repository_ids: Sequence[str] | None = None,
              now: datetime | None = None) -> dict[str, Any]:
    """The newest scans (``SCANS_LISTED``), with repository names, readable statuses, durations and CI links;
    ``status`` ``failed`` keeps the failed ones of the last ``FAILED_SCANS_DAYS`` days (the overview's number)."""
    where: list[Any] = []
    if status == "failed":
        where.append(programme.is_failed_scan(now) if now is not None
                     else scans.c.status.in_(programme.FAILED_SCAN_STATUSES))
    elif status:
        raise ValueError(f"status = {status!r}: expected failed or nothing")
    if repository_ids is not None:
        where.append(scans.c.repository_id.in_(list(repository_ids)))
    with warehouse.engine.connect() as conn:
        names = repository_names(conn)
        rows = conn.execute(select(scans.c.id, scans.c.repository_id, scans.c.branch, scans.c.status,
                                   scans.c.exit_code, scans.c.started_at, scans.c.completed_at, scans.c.is_full_scan,
                                   scans.c.raw).where(*where).order_by(scans.c.started_at.desc()).limit(
            SCANS_LISTED)).all()
        total = int(conn.execute(select(func.count()).select_from(scans).where(*where)).scalar_one())
    out = []
    for r in rows:
        took = (r.completed_at - r.started_at).total_seconds() if r.completed_at and r.started_at else None
        out.append({
            "id": r.id, "repository_id": r.repository_id, "repository": names.get(str(r.repository_id)),
            "branch": r.branch, "status": r.status, "status_label": SCAN_STATUS_LABELS.get(r.status or "", r.status),
            "failed": r.status in programme.FAILED_SCAN_STATUSES, "exit_code": r.exit_code,
            "started_at": _iso(r.started_at), "completed_at": _iso(r.completed_at),
            "duration_seconds": None if took is None or took < 0 else int(took),
            "full_scan": r.is_full_scan, "link": _scan_link(r.raw),
        })
    return {"total": total, "listed": len(out), "status": status, "scans": out}


#: The DAGs that write to the service: triage (``triage_actions``), tickets (``ticket_actions``, which has no DAG
#: column; a run id alone is not unique: two DAGs' scheduled runs of one day share it) and rule modes.
TRIAGE_DAG, TICKET_DAG, POLICY_DAG = APPROVAL_DAGS
#: What each writing DAG's run can have written (the sections of a run's view).
RUN_SECTIONS = {TRIAGE_DAG: ("triage",), TICKET_DAG: ("tickets",), POLICY_DAG: ("rules",)}


def _warehouse_runs(conn: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (DAG id, run id): what the warehouse holds of the run (triaged, planned, failed; tickets created,
    planned, failed)."""
    t, k = triage_actions.c, ticket_actions.c
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for run_id, dag_id, dry, at, done, planned, failed in conn.execute(select(
            t.run_id, func.coalesce(t.dag_id, TRIAGE_DAG), func.max(case((t.dry_run.is_(True), 1), else_=0)),
            func.min(t.created_at), func.sum(case((t.status == "succeeded", t.num_triaged), else_=0)),
            func.sum(case((t.status == "planned", func.coalesce(t.num_triaged, 0)), else_=0)),
            func.sum(case((t.status == "failed", 1), else_=0))).group_by(
                t.run_id, func.coalesce(t.dag_id, TRIAGE_DAG))):
        out[(dag_id, run_id or "")] = {"run_id": run_id, "dag_id": dag_id, "dry_run": bool(dry), "at": _iso(at),
                                       "triaged": int(done or 0), "triage_planned": int(planned or 0),
                                       "triage_failed": int(failed or 0)}
    for run_id, at, created, planned, failed in conn.execute(select(
            k.run_id, func.min(k.created_at),
            func.count(func.distinct(case((k.outcome == "succeeded", k.ticket_id)))),
            func.sum(case((k.outcome == "planned", 1), else_=0)),
            func.sum(case((k.outcome.in_(("failed", "ambiguous")), 1), else_=0))).group_by(k.run_id)):
        entry = out.setdefault((TICKET_DAG, run_id or ""), {"run_id": run_id, "dag_id": TICKET_DAG, "dry_run": False,
                                                               "at": _iso(at)})
        entry.update({"tickets_created": int(created or 0), "ticket_findings_planned": int(planned or 0),
                      "ticket_findings_failed": int(failed or 0)})
        if planned and not created:
            entry["dry_run"] = True
    p = policy_changes.c
    for run_id, at, applied, failed in conn.execute(select(
            p.run_id, func.min(p.created_at), func.sum(case((p.status == "applied", 1), else_=0)),
            func.sum(case((p.status == "failed", 1), else_=0))).group_by(p.run_id)):
        entry = out.setdefault((POLICY_DAG, run_id or ""), {"run_id": run_id, "dag_id": POLICY_DAG, "at": _iso(at)})
        entry.update({"rules_changed": int(applied or 0), "rule_changes_failed": int(failed or 0)})
    return out


def activity(warehouse: Warehouse, airflow_runs: Sequence[Mapping[str, Any]] | None,
             dag_id: str | None = None) -> dict[str, Any]:
    """Every run of the writing DAGs (or of ``dag_id``), newest first: Airflow's runs (``airflow_runs``: dag_id,
    run_id, state, start_date, dry_run) with what each wrote, dry runs and runs that changed nothing included and
    labelled; without Airflow's runs (None), the runs the warehouse knows of. With ``dag_id``, also whether it is
    one of the pipeline's DAGs and whether it writes to the service."""
    with warehouse.engine.connect() as conn:
        known = _warehouse_runs(conn)
    rows: list[dict[str, Any]] = []
    for run in airflow_runs or ():
        written = known.pop((str(run["dag_id"]), str(run["run_id"])), {})
        rows.append({**written, **{k: run.get(k) for k in ("dag_id", "run_id", "state", "start_date")},
                     "dry_run": bool(run.get("dry_run") or written.get("dry_run"))})
    if airflow_runs is None:
        rows += sorted(known.values(), key=lambda r: r.get("at") or "", reverse=True)
    if airflow_runs is None and dag_id:
        rows = [r for r in rows if r.get("dag_id") == dag_id]
    for row in rows:
        wrote = row.get("triaged", 0) + row.get("tickets_created", 0) + row.get("rules_changed", 0)
        failed = row.get("triage_failed") or row.get("ticket_findings_failed") or row.get("rule_changes_failed")
        row["outcome"] = ("dry run" if row["dry_run"] else "changed something" if wrote else
                          "failed" if failed else "changed nothing")
    dag = None if not dag_id else {"dag_id": dag_id, "pipeline": dag_id in PIPELINE_DAGS,
                                   "writes": dag_id in APPROVAL_DAGS}
    return {"airflow": airflow_runs is not None, "dag": dag, "runs": rows[:RUNS_LISTED]}


def run_detail(warehouse: Warehouse, run_id: str, dag_id: str | None = None) -> dict[str, Any]:
    """What one run did: its triage requests, the tickets it created (with their links), the rule mode changes
    it sent, and whether it was a dry run; with the findings-list queries of what it triaged and ticketed."""
    t, k = triage_actions.c, ticket_actions.c
    triage_where = [t.run_id == run_id] + ([func.coalesce(t.dag_id, TRIAGE_DAG) == dag_id] if dag_id else [])
    with warehouse.engine.connect() as conn:
        triage = [dict(r._mapping) for r in conn.execute(select(
            t.issue_type, t.status, t.dry_run, t.num_triaged, t.error, t.created_at).where(*triage_where)
            .order_by(t.id))]
        tickets = [] if dag_id and dag_id != TICKET_DAG else [dict(r._mapping) for r in conn.execute(select(
            k.ticket_id, k.ticket_url, k.external_slug, k.outcome, func.count().label("findings")).where(
            k.run_id == run_id).group_by(k.ticket_id, k.ticket_url, k.external_slug, k.outcome).order_by(
            k.outcome, k.ticket_id))]
    for row in triage:
        row["created_at"] = _iso(row["created_at"])
    for row in tickets:
        row["ticket_url"] = http_url(row["ticket_url"])
    changes = policy_changes_made(warehouse, run_id=run_id)
    if dag_id and dag_id != POLICY_DAG:
        changes = changes.iloc[0:0]
    dry = any(r["dry_run"] for r in triage) or any(r["outcome"] == "planned" for r in tickets)
    return {
        "run_id": run_id, "dag_id": dag_id, "dry_run": dry, "triage": triage, "tickets": tickets,
        "sections": list(RUN_SECTIONS.get(dag_id, ())) if dag_id else ["triage", "tickets", "rules"],
        "policy_changes": orjson.loads(changes.to_json(orient="records", date_format="iso")) if len(changes) else [],
        "triaged_query": FindingFilter(run_id=run_id, touched="triage").query(),
        "ticketed_query": FindingFilter(run_id=run_id, touched="ticket").query(),
    }


def policies(warehouse: Warehouse) -> dict[str, Any]:
    """The rule mode changes sent after approval, the latest policy tuning report, and, when the service retired
    its policy API for the deployment (``governance.policy_tuning.RETIRED_STATE``), why nothing more comes:
    ``retired`` is ``{"seen_at", "deployment", "policy_ids", "run_id", "message"}`` or None."""
    from findings_provider.governance.policy_tuning import deployment_label, retired_message, retired_record

    changes = policy_changes_made(warehouse)
    record = retired_record(warehouse)
    retired = None if record is None else {
        "seen_at": record.get("seen_at"), "deployment": deployment_label(record),
        "policy_ids": record.get("policy_ids"), "run_id": record.get("run_id"), "message": retired_message(record)}
    return {"changes": orjson.loads(changes.to_json(orient="records", date_format="iso")) if len(changes) else [],
            "report": latest_report(warehouse, POLICY_DAG), "retired": retired}


def inventory(warehouse: Warehouse) -> dict[str, Any]:
    """Dependencies and packages stored, by ecosystem, and the latest inventory report."""
    with warehouse.engine.connect() as conn:
        total, packages = conn.execute(select(func.count(), func.count(func.distinct(dependencies.c.name)))).one()
        ecosystems = conn.execute(select(func.coalesce(dependencies.c.ecosystem, ""), func.count())
                                  .group_by(func.coalesce(dependencies.c.ecosystem, "")).order_by(
            func.count().desc())).all()
        repositories = int(conn.execute(select(func.count()).select_from(dependency_repositories)).scalar_one())
    return {"dependencies": int(total), "packages": int(packages), "repositories": repositories,
            "ecosystems": [{"ecosystem": e or "unknown", "dependencies": int(n)} for e, n in ecosystems],
            "report": latest_report(warehouse, "dependency_inventory")}


def latest_report(warehouse: Warehouse, name: str) -> dict[str, Any] | None:
    report = warehouse.latest_report(name)
    if report is None:
        return None
    return {"name": name, "title": report.title, "run_id": report.run_id, "created_at": _iso(report.created_at)}


def report_list(warehouse: Warehouse) -> dict[str, Any]:
    """The stored reports, newest first (name, title, run, when)."""
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(reports.c.name, reports.c.title, reports.c.run_id, reports.c.created_at)
                            .order_by(reports.c.id.desc()).limit(100)).all()
    return {"reports": [{"name": n, "title": t, "run_id": r, "created_at": _iso(c)} for n, t, r, c in rows]}

