"""The dashboard's pages as HTML, built from the warehouse (no Airflow, no request objects: unit-testable).

Every page reads bounded amounts: the overview reads the daily snapshots and the summary task's stored metrics
(never a scan of ``findings``), the findings table reads one keyset page through the primary key, the other pages
read the newest rows of small tables. So a page's time does not grow with the number of findings (measured by
``bench/dashboard.py``). Every value from the service or the warehouse is HTML-escaped.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from sqlalchemy import and_, false, func, literal, or_, select, tuple_

from findings_provider.client import ScanStatus
from findings_provider.client.canonical import ISSUE_TYPES
from findings_provider.client.vocabulary import OPEN_STATUSES, SEVERITY_ORDER
from findings_provider.config import PipelineConfig
from findings_provider.dashboard.links import PAGES
from findings_provider.metrics import (
    activity_per_run,
    policy_changes_made,
    scan_health,
    severity_order,
)
from findings_provider.names import PIPELINE_DAGS
from findings_provider.pipeline.summary import LATEST_METRICS_KEY
from findings_provider.reports import OTHER_COLOUR, SEVERITY_COLOURS
from findings_provider.text import http_url
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import (
    dependencies,
    finding_snapshots,
    findings,
    scans,
    ticket_actions,
    triage_actions,
)
from findings_provider.warehouse.store import TICKETED_OUTCOMES

log = logging.getLogger(__name__)
#: Filters of the findings table, in form order.
FINDING_FILTERS = ("issue_type", "severity", "status", "repository_name", "rule_name")
#: Newest scans listed.
SCANS_LISTED = 200
_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:0;color:#222}header{background:#017cee;color:#fff;padding:.6em 1em}"
    "header a{color:#fff;margin-right:1.2em;text-decoration:none}header a.current{font-weight:bold;"
    "border-bottom:2px solid #fff}main{padding:1em}table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:14px}th{background:#f3f3f3}"
    ".sev{display:inline-block;padding:0 6px;border-radius:3px;color:#fff}.cards{display:flex;gap:1em}"
    ".card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:8em}.card b{font-size:1.6em}"
    "form label{margin-right:.8em}.muted{color:#666}"
)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def colour(severity: str | None) -> str:
    """The conventional colour of a severity (grey for anything else)."""
    return SEVERITY_COLOURS.get(str(severity), OTHER_COLOUR)


def badge(severity: str | None) -> str:
    return f'<span class="sev" style="background:{colour(severity)}">{_e(severity or "unknown")}</span>'


def layout(title: str, body: str, current: str) -> str:
    """A whole page: the dashboard's navigation, then ``body`` (already HTML)."""
    nav = "".join(
        f'<a href="{"./" if path == "" else path}"{" class=current" if path == current else ""}>{_e(name)}</a>'
        for path, name in PAGES.items()
    )
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)} - Findings</title>"
            f"<style>{_STYLE}</style></head><body><header>{nav}</header><main><h1>{_e(title)}</h1>{body}"
            "</main></body></html>")


def _table(frame: Any, empty: str = "nothing yet") -> str:
    if frame is None or len(frame) == 0:
        return f"<p class=muted>{_e(empty)}</p>"
    return str(frame.to_html(border=0, escape=True))


def _rows_table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str = "nothing yet") -> str:
    """A table of cells that are already HTML."""
    if not rows:
        return f"<p class=muted>{_e(empty)}</p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


# --- overview ------------------------------------------------------------------------------------------------------


def _snapshot_counts(warehouse: Warehouse, days: int) -> tuple[str | None, dict[str, dict[str, int]]]:
    """The latest snapshot day and open findings per day and severity over the last ``days`` snapshot days."""
    with warehouse.engine.connect() as conn:
        recent = [d for (d,) in conn.execute(select(finding_snapshots.c.day).distinct().order_by(
            finding_snapshots.c.day.desc()).limit(days))]
        if not recent:
            return None, {}
        rows = conn.execute(select(finding_snapshots.c.day, finding_snapshots.c.severity,
                                   func.sum(finding_snapshots.c["count"])).where(
            finding_snapshots.c.day.in_(recent), finding_snapshots.c.status.in_(OPEN_STATUSES)).group_by(
            finding_snapshots.c.day, finding_snapshots.c.severity)).all()
    per_day: dict[str, dict[str, int]] = {day: {} for day in sorted(recent)}
    for day, severity, count in rows:
        per_day[day][severity or "unknown"] = int(count)
    return recent[0], per_day


def trend_svg(per_day: Mapping[str, Mapping[str, int]], width: int = 720, height: int = 180) -> str:
    """Stacked bars of open findings per day, one colour per severity (most severe at the bottom)."""
    if not per_day:
        return ""
    days = list(per_day)
    top = max(sum(v.values()) for v in per_day.values()) or 1
    step = width / len(days)
    bar = max(step * 0.8, 1)
    shapes = []
    for i, day in enumerate(days):
        y = float(height)
        for severity in severity_order(per_day[day]):
            h = per_day[day][severity] / top * (height - 10)
            y -= h
            shapes.append(f'<rect x="{i * step:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                          f'fill="{colour(severity)}"><title>{_e(day)} {_e(severity)}: '
                          f'{per_day[day][severity]}</title></rect>')
    legend = " ".join(badge(s) for s in SEVERITY_ORDER)
    return (f'<svg role="img" aria-label="open findings per day" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(shapes)}</svg><p>{legend} <span class=muted>'
            f"{_e(days[0])} .. {_e(days[-1])}, peak {top:,}</span></p>")


def pending_approvals() -> list[dict[str, Any]] | None:
    """The approvals waiting in Airflow (its human-in-the-loop requests of the pipeline's DAGs not answered yet),
    oldest first, from Airflow's metadata database; None where that database cannot be read (outside Airflow)."""
    try:
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.execute(
                select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index,
                       HITLDetail.subject, HITLDetail.created_at)
                .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
                .where(HITLDetail.responded_at.is_(None), TaskInstance.dag_id.in_(PIPELINE_DAGS))
                .order_by(HITLDetail.created_at)
            ).all()
    except Exception:  # not in Airflow, or its database is unreachable: say so rather than fail the page
        log.warning("pending approvals: Airflow's metadata database cannot be read", exc_info=True)
        return None
    return [dict(r._mapping) for r in rows]


def approvals_section(approvals: Sequence[Mapping[str, Any]] | None) -> str:
    if approvals is None:
        return "<h2>Approvals waiting</h2><p class=muted>Airflow's metadata database cannot be read here.</p>"
    cells = [[_link_path(f"../dags/{quote(a['dag_id'])}/runs/{quote(a['run_id'])}/tasks/{quote(a['task_id'])}"
                         f"/required_actions?map_index={a['map_index']}", a["subject"]), _e(a["dag_id"]),
              _e(a["run_id"]), _e(a["created_at"])] for a in approvals]
    return (f"<h2>Approvals waiting ({len(approvals)})</h2>"
            + _rows_table(["request", "DAG", "run", "asked at"], cells, "no approval waiting"))


def _link_path(path: str, text: Any) -> str:
    return f'<a href="{_e(path)}" target="_top">{_e(text)}</a>'


def overview(warehouse: Warehouse, days: int = 90,
             approvals: Sequence[Mapping[str, Any]] | None = ()) -> str:
    """Counts by severity and by type (latest snapshot), the trend, the approvals waiting, and the summary task's
    SLA and time-to-fix tables."""
    latest, per_day = _snapshot_counts(warehouse, days)
    parts = []
    if latest is None:
        parts.append("<p class=muted>No snapshot yet: the findings_extraction DAG writes one per run.</p>")
    else:
        counts = per_day[latest]
        cards = "".join(f'<div class=card style="border-top:4px solid {colour(s)}">{_e(s)}<br>'
                        f"<b>{counts.get(s, 0):,}</b></div>" for s in (*SEVERITY_ORDER, "unknown")
                        if s in counts or s in SEVERITY_ORDER)
        with warehouse.engine.connect() as conn:
            by_type = conn.execute(select(finding_snapshots.c.issue_type, func.sum(finding_snapshots.c["count"]))
                                   .where(finding_snapshots.c.day == latest,
                                          finding_snapshots.c.status.in_(OPEN_STATUSES))
                                   .group_by(finding_snapshots.c.issue_type)
                                   .order_by(finding_snapshots.c.issue_type)).all()
        types = "".join(f"<div class=card>{_e(t)}<br><b>{int(n):,}</b></div>" for t, n in by_type)
        parts += [f"<h2>Open findings ({_e(latest)})</h2><div class=cards>{cards}</div>",
                  f"<div class=cards style='margin-top:.6em'>{types}</div>",
                  "<h2>Open findings per day</h2>", trend_svg(per_day)]
    parts.append(approvals_section(approvals))
    metrics = warehouse.get_state(LATEST_METRICS_KEY)
    if metrics:
        parts.append(f"<p class=muted>Metrics of the summary task's run {_e(metrics.get('run_id'))} at "
                     f"{_e(metrics.get('computed_at'))}; full report: <a href='reports/findings_summary'>"
                     "findings summary</a>.</p>")
        for key, title in (("sla", "Fix-time targets (days) and open findings past them"),
                           ("time_to_fix", "Time to fix (days from detection)"),
                           ("time_to_triage", "Time to triage (days from detection)")):
            parts.append(f"<h2>{_e(title)}</h2>" + _records_table(metrics.get(key) or []))
        breaches = metrics.get("sla_breaches") or []
        parts.append("<h2>Most overdue findings</h2>" + _records_table(breaches[:20], "no SLA breach"))
    else:
        parts.append("<p class=muted>No metrics yet: the findings_extraction DAG's summary task computes them.</p>")
    return layout("Findings overview", "".join(parts), "")


def _records_table(records: Sequence[Mapping[str, Any]], empty: str = "nothing yet") -> str:
    if not records:
        return f"<p class=muted>{_e(empty)}</p>"
    headers = list(records[0])
    rows = [[badge(r[h]) if h == "severity" else _e(r[h]) for h in headers] for r in records]
    return _rows_table(headers, rows, empty)


# --- findings ------------------------------------------------------------------------------------------------------


def finding_link(config: PipelineConfig, issue_type: str, finding_id: int, repository: str | None,
                 raw: str | None) -> str | None:
    """The finding in the service's UI (``dashboard.finding_url``), else the code it points at."""
    template = config.dashboard.finding_url
    if template:
        return template.format(id=finding_id, issue_type=issue_type, repository=repository or "")
    try:
        data = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return None
    return http_url(data.get("line_of_code_url") or data.get("findingPathUrl")) if isinstance(data, dict) else None


def touched_by(warehouse: Warehouse, run_id: str, touched: str) -> dict[str, set[int]]:
    """The findings (by issue type) that ``run_id`` triaged or planned to (``touched`` triage), or created (or
    maybe created) a ticket for (``touched`` ticket)."""
    out: dict[str, set[int]] = {}
    with warehouse.engine.connect() as conn:
        if touched == "triage":
            for issue_type, ids in conn.execute(select(triage_actions.c.issue_type, triage_actions.c.issue_ids).where(
                    triage_actions.c.run_id == run_id, triage_actions.c.status.in_(("succeeded", "planned")))):
                out.setdefault(issue_type, set()).update(int(i) for i in ids or ())
        elif touched == "ticket":
            for issue_type, finding_id in conn.execute(select(ticket_actions.c.issue_type, ticket_actions.c.finding_id)
                                                       .where(ticket_actions.c.run_id == run_id,
                                                              ticket_actions.c.outcome.in_(TICKETED_OUTCOMES))):
                out.setdefault(issue_type, set()).add(int(finding_id))
    return out


def findings_page(warehouse: Warehouse, config: PipelineConfig, params: Mapping[str, str]) -> str:
    """One page of the findings table, filtered by ``FINDING_FILTERS`` (exact values) and, with ``run_id`` and
    ``touched`` (triage or ticket), by what that run wrote; in (issue type, id) order from ``after``
    (``type:id``), through the primary key."""
    where = []
    run_id, touched = params.get("run_id") or "", params.get("touched") or ""
    title = "Findings"
    if run_id and touched in ("triage", "ticket"):
        ids = touched_by(warehouse, run_id, touched)
        where.append(or_(false(), *(and_(findings.c.issue_type == t, findings.c.id.in_(sorted(v)))
                                    for t, v in ids.items())))
        title = f"Findings {'triaged' if touched == 'triage' else 'ticketed'} by run {run_id}"
    for name in FINDING_FILTERS:
        value = (params.get(name) or "").strip()
        if value:
            where.append(findings.c[name] == value)
    after = (params.get("after") or "").partition(":")
    if after[2].lstrip("-").isdigit():
        where.append(tuple_(findings.c.issue_type, findings.c.id) > tuple_(literal(after[0]), literal(int(after[2]))))
    size = config.dashboard.page_size
    stmt = select(findings.c.issue_type, findings.c.id, findings.c.repository_name, findings.c.rule_name,
                  findings.c.severity, findings.c.status, findings.c.triage_state, findings.c.external_ticket_id,
                  findings.c.relevant_since, findings.c.raw).where(*where).order_by(
        findings.c.issue_type, findings.c.id).limit(size + 1)
    with warehouse.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    more = len(rows) > size
    rows = rows[:size]
    cells = []
    for r in rows:
        ident = _link(finding_link(config, r.issue_type, r.id, r.repository_name, r.raw), r.id)
        cells.append([_e(r.issue_type), ident, _e(r.repository_name), _e(r.rule_name), badge(r.severity),
                      _e(r.status), _e(r.triage_state), _e(r.external_ticket_id),
                      _e(r.relevant_since and r.relevant_since.strftime("%Y-%m-%d"))])
    options = {"issue_type": ISSUE_TYPES, "severity": SEVERITY_ORDER}
    fields = []
    for name in FINDING_FILTERS:
        value = params.get(name) or ""
        if name in options:
            choices = "".join(f"<option{' selected' if v == value else ''}>{_e(v)}</option>" for v in options[name])
            fields.append(f'<label>{_e(name)} <select name="{name}"><option value="">any</option>{choices}'
                          "</select></label>")
        else:
            fields.append(f'<label>{_e(name)} <input name="{name}" value="{_e(value)}"></label>')
    kept = "".join(f'<input type="hidden" name="{k}" value="{_e(params[k])}">' for k in ("run_id", "touched")
                   if params.get(k))
    form = f'<form method="get">{"".join(fields)}{kept}<button>Filter</button></form>'
    nav = ""
    if more and rows:
        query = {k: params[k] for k in (*FINDING_FILTERS, "run_id", "touched") if params.get(k)}
        query["after"] = f"{rows[-1].issue_type}:{rows[-1].id}"
        nav = f'<p><a href="findings?{_e(urlencode(query))}">next {size}</a></p>'
    table = _rows_table(["type", "id", "repository", "rule", "severity", "status", "triage", "ticket", "detected"],
                        cells, "no finding matches")
    return layout(title, form + table + nav, "findings")


# --- the other pages -----------------------------------------------------------------------------------------------


def scans_page(warehouse: Warehouse) -> str:
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(scans.c.id, scans.c.repository_id, scans.c.branch, scans.c.status,
                                   scans.c.exit_code, scans.c.started_at, scans.c.completed_at).order_by(
            scans.c.started_at.desc()).limit(SCANS_LISTED)).all()
    failed = (ScanStatus.ERROR.value, ScanStatus.NEVER_FINISHED.value)
    cells = [[_e(r.id), _e(r.repository_id), _e(r.branch),
              f"<b style='color:{SEVERITY_COLOURS['critical']}'>{_e(r.status)}</b>" if r.status in failed
              else _e(r.status), _e(r.exit_code), _e(r.started_at), _e(r.completed_at)] for r in rows]
    body = ("<h2>Scan health per repository</h2>" + _table(scan_health(warehouse), "no scan stored yet")
            + f"<h2>Newest {SCANS_LISTED} scans</h2>"
            + _rows_table(["id", "repository", "branch", "status", "exit code", "started", "completed"], cells))
    return layout("Scans", body, "scans")


def activity_page(warehouse: Warehouse, run_id: str = "") -> str:
    """Per run: triage and ticket counts; with ``run_id``, the tickets that run created, with their links."""
    if run_id:
        with warehouse.engine.connect() as conn:
            rows = conn.execute(select(ticket_actions.c.ticket_id, ticket_actions.c.ticket_url,
                                       ticket_actions.c.external_slug, func.count()).where(
                ticket_actions.c.run_id == run_id, ticket_actions.c.outcome == "succeeded").group_by(
                ticket_actions.c.ticket_id, ticket_actions.c.ticket_url, ticket_actions.c.external_slug).order_by(
                ticket_actions.c.ticket_id)).all()
        cells = [[_e(t), _link(url, slug or url), _e(n)] for t, url, slug, n in rows]
        body = (f"<p><a href='findings?{_e(urlencode({'run_id': run_id, 'touched': 'ticket'}))}'>the findings "
                "ticketed</a></p>" + _rows_table(["ticket", "in the tracker", "findings"], cells,
                                                 "this run created no ticket"))
        return layout(f"Tickets created by run {run_id}", body, "activity")
    body = ("<p>Per run of the triage and ticket DAGs: findings triaged, triage requests that failed, tickets "
            "created, findings whose ticket request failed or could not be read.</p>"
            + _table(activity_per_run(warehouse), "no triage or ticket run yet"))
    return layout("Triage and tickets", body, "activity")


def _link(url: Any, text: Any) -> str:
    """An external link when ``url`` is http(s), else the text alone."""
    safe = http_url(url)
    return f'<a href="{_e(safe)}" target="_blank" rel="noopener">{_e(text)}</a>' if safe else _e(text)


def _report_section(warehouse: Warehouse, kind: str, what: str) -> str:
    report = warehouse.latest_report(kind)
    if report is None:
        return f"<p class=muted>No {_e(what)} report yet.</p>"
    return (f"<p>Latest {_e(what)} report: <a href='reports/{_e(kind)}'>{_e(report.title)}</a> (run "
            f"{_e(report.run_id)}, {_e(report.created_at)}).</p>")


def policies_page(warehouse: Warehouse, run_id: str = "") -> str:
    changes = policy_changes_made(warehouse, run_id=run_id or None)
    body = (_report_section(warehouse, "policy_tuning", "policy tuning")
            + "<p>Proposals apply only after a person approves them in the policy_tuning run.</p>"
            + f"<h2>Rule mode changes sent{f' by run {_e(run_id)}' if run_id else ''}</h2>"
            + _table(changes, "no change sent yet"))
    return layout("Policy proposals", body, "policies")


def inventory_page(warehouse: Warehouse) -> str:
    with warehouse.engine.connect() as conn:
        total, packages = conn.execute(select(func.count(), func.count(func.distinct(dependencies.c.name)))).one()
    body = (f"<div class=cards><div class=card>dependencies<br><b>{total:,}</b></div><div class=card>packages<br>"
            f"<b>{packages:,}</b></div></div>" + _report_section(warehouse, "dependency_inventory", "inventory"))
    return layout("Inventory", body, "inventory")


def stored_report(warehouse: Warehouse, kind: str, run_id: str | None = None) -> str | None:
    """The newest stored report of ``kind`` (of ``run_id`` when given) as it was written, or None."""
    report = warehouse.latest_report(kind, run_id=run_id)
    return None if report is None else str(report.html)
