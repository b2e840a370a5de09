"""Dashboard pages from a large warehouse: the time to render each page of the findings dashboard.

Builds a SQLite warehouse of N findings (sast, sca and secrets across 500 repositories, every severity and status,
about 2 KB of JSON each like the service's, through the product's own row builder and upsert), 90 days of daily
snapshots, history events for a tenth of the findings, scans, triage and ticket logs, and runs the summary task's
metrics once (their time is reported too: they are computed by a task, not by a page). Then requests each page
through the dashboard's FastAPI app in process (``fastapi.testclient``; Airflow's login check is replaced by a
no-op, the rest is the app as the API server mounts it), ``--runs`` times each, and reports the median and the
worst time per page.

    python bench/dashboard.py --findings 1000000 --runs 5 --out /tmp/dashboard.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

#: The target: a dashboard view answers in less than this (median), from a warehouse of 1,000,000 findings.
MAX_PAGE_SECONDS = 0.3
#: The target: exporting every finding as CSV peaks at most this much above exporting none (flat memory).
MAX_EXPORT_EXTRA_MB = 50.0
PAGES = ("/api/overview", "/api/widget", "/api/findings", "/api/findings?measure=open&severity=critical",
         "/api/findings?measure=overdue&sort=due", "/api/findings?repository=acme/repo-7",
         "/api/findings?repository_contains=REPO-7&sort=age", "/api/findings?offset=500000",
         "/api/findings?rule_contains=no-such-rule", "/api/repositories", "/api/repository?name=acme/repo-7",
         "/api/scans", "/api/activity", "/api/policies", "/api/inventory", "/api/reports",
         "/reports/findings_summary")
SEVERITIES = ("critical", "high", "medium", "low")
FILLER = "Untrusted input reaches a SQL query without parameters; use bound parameters instead. " * 30
STATUSES = ("open", "open", "open", "fixed", "ignored", "reviewing")


def build(database: Path, findings: int, seed: int = 7) -> dict[str, float]:
    """Fill a warehouse at ``database``; return the seconds each part took."""
    from findings_provider.client.models import Project
    from findings_provider.config import PipelineConfig
    from findings_provider.pipeline.summary import LATEST_METRICS_KEY, latest_metrics, programme_tables
    from findings_provider.reports import write_report
    from findings_provider.warehouse import TicketAction, Warehouse, finding_row_from_dict, make_engine
    from findings_provider.warehouse.branches import store_projects
    from findings_provider.warehouse.schema import finding_snapshots, scans

    rng = random.Random(seed)
    warehouse = Warehouse(make_engine(f"sqlite:///{database}"), run_id="bench__build")
    warehouse.create_all()
    took: dict[str, float] = {}
    started = time.perf_counter()
    now = datetime.now(timezone.utc)
    types = ("sast",) * 6 + ("sca",) * 3 + ("secrets",)
    batch: list[tuple[Any, ...]] = []
    for i in range(1, findings + 1):
        issue_type = types[i % len(types)]
        since = now - timedelta(days=rng.randrange(400), seconds=rng.randrange(86400))
        status = STATUSES[i % len(STATUSES)]
        batch.append(finding_row_from_dict(issue_type, {
            "id": i, "status": status, "severity": SEVERITIES[rng.randrange(4)],
            "repository": {"name": f"acme/repo-{i % 500}"}, "rule_name": f"rule-{i % 300}",
            "relevant_since": since.isoformat(), "line_of_code_url": f"https://git.example.com/acme/{i}",
            "state_updated_at": (since + timedelta(days=rng.randrange(60))).isoformat() if status == "fixed" else None,
            "triaged_at": (since + timedelta(days=rng.randrange(20))).isoformat() if i % 3 == 0 else None,
            # the size of a real finding's JSON (about 2 KB: rule text, assistant explanations)
            "rule_message": FILLER[: 1500 + i % 500],
        }))
        if len(batch) == 3000:
            warehouse.upsert_findings(batch)
            batch = []
    warehouse.upsert_findings(batch)
    took["findings_s"] = time.perf_counter() - started

    started = time.perf_counter()
    changed = []  # a tenth of the findings change severity and status: history events
    for i in range(1, findings + 1, 10):
        issue_type = types[i % len(types)]
        changed.append(finding_row_from_dict(issue_type, {
            "id": i, "status": "fixed", "severity": "high", "repository": {"name": f"acme/repo-{i % 500}"},
            "relevant_since": (now - timedelta(days=50)).isoformat()}))
        if len(changed) == 3000:
            warehouse.upsert_findings(changed)
            changed = []
    warehouse.upsert_findings(changed)
    took["history_s"] = time.perf_counter() - started

    started = time.perf_counter()  # what every extraction run does next: the projects listed, copies recounted
    store_projects(warehouse, [Project(id=n, name=f"acme/repo-{n}", primary_branch="main") for n in range(500)],
                   now=now)
    took["recount_s"] = time.perf_counter() - started

    started, cpu_started = time.perf_counter(), time.process_time()
    warehouse.take_snapshot(now.date())  # what every extraction run does at its end
    took["snapshot_s"], took["snapshot_cpu_s"] = time.perf_counter() - started, time.process_time() - cpu_started
    started = time.perf_counter()
    with warehouse.engine.begin() as conn:  # 89 earlier days: today's counts, scaled
        today = conn.execute(finding_snapshots.select().where(finding_snapshots.c.day == now.date().isoformat()))
        rows = [dict(r._mapping) for r in today]
        for back in range(1, 90):
            day = (now.date() - timedelta(days=back)).isoformat()
            conn.execute(finding_snapshots.insert(), [{**r, "day": day, "count": int(r["count"] * (1 + back / 90))}
                                                      for r in rows])
        conn.execute(scans.insert(), [{
            "id": f"scan-{n}", "repository_id": f"repo-{n % 500}", "branch": "main",
            "status": ("SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR", "SCAN_STATUS_NEVER_FINISHED")[n % 3],
            "started_at": now - timedelta(minutes=n), "raw": "{}", "synced_at": now} for n in range(5000)])
    for run in range(60):
        action = warehouse.record_triage_action(run_id=f"scheduled__{run}", dag_id="autotriage_triage",
                                                issue_type="sast", dry_run=False, issue_ids=list(range(100)),
                                                request={})
        warehouse.update_triage_action(action, status="succeeded", num_triaged=100)
        warehouse.record_ticket_actions(TicketAction("sast", n, "succeeded", run_id=f"scheduled__{run}",
                                                     ticket_id=run * 1000 + n // 5) for n in range(200))
    took["other_tables_s"] = time.perf_counter() - started

    started = time.perf_counter()
    tables = programme_tables(warehouse, PipelineConfig().sla.fix_days.targets(), now)
    took["summary_metrics_s"] = time.perf_counter() - started
    warehouse.set_state(LATEST_METRICS_KEY, latest_metrics("bench__build", tables, now))
    with tempfile.TemporaryDirectory() as out:
        write_report("findings_summary", "Open findings", tables, out_dir=Path(out), warehouse=warehouse)
    warehouse.engine.dispose()
    return took


def measure(findings: int, runs: int, database: Path) -> dict[str, Any]:
    """Build the warehouse at ``database`` unless that file exists already (then reuse it, its build times
    unknown), then time every page ``runs`` times (after one untimed warm-up request each)."""
    from fastapi.testclient import TestClient
    from findings_provider.config import PipelineConfig
    from findings_provider.dashboard.app import AirflowState, create_app
    from findings_provider.warehouse import Warehouse, make_engine

    build_s = build(database, findings) if not database.exists() else {}
    warehouse = Warehouse(make_engine(f"sqlite:///{database}"))
    warehouse.create_all()  # a warehouse kept from an earlier run: brought to the current revision first
    config = PipelineConfig()
    # Airflow's approvals and runs come from its own database, not the warehouse: none here
    client = TestClient(create_app(lambda: (warehouse, config), auth=lambda: None,
                                   airflow=AirflowState(approvals=lambda: [], runs=lambda *a, **k: [])))
    pages: dict[str, Any] = {}
    for page in PAGES:
        first = client.get(page)
        if first.status_code != 200:
            raise RuntimeError(f"{page}: HTTP {first.status_code}: {first.text[:200]}")
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(page)
            times.append(time.perf_counter() - started)
            assert response.status_code == 200
        pages[page] = {"median_s": statistics.median(times), "max_s": max(times), "bytes": len(first.content)}
    worst = max(p["median_s"] for p in pages.values())
    export = {name: export_peak(client, query) for name, query in (("none", "rule=no-such-rule"), ("all", ""))}
    extra_mb = export["all"]["peak_mb"] - export["none"]["peak_mb"]
    return {"findings": findings, "runs": runs, "build": build_s, "pages": pages, "worst_median_s": worst,
            "met": worst < MAX_PAGE_SECONDS, "export": export, "export_extra_mb": extra_mb,
            "export_met": extra_mb <= MAX_EXPORT_EXTRA_MB, "date": date.today().isoformat()}


def export_peak(client: Any, query: str) -> dict[str, float]:
    """Stream ``/api/findings.csv?<query>`` and drop each chunk as it arrives; the peak of Python's allocations
    (``tracemalloc``) while it ran, the bytes and rows received, and the seconds."""
    import tracemalloc

    tracemalloc.start()
    started = time.perf_counter()
    size = lines = 0
    with client.stream("GET", f"/api/findings.csv?{query}") as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            size += len(chunk)
            lines += chunk.count(b"\n")
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"peak_mb": peak / 2**20, "bytes": size, "rows": lines - 1, "seconds": seconds}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Warehouse of {result['findings']:,} findings (SQLite), {result['runs']} requests per page after a "
             "warm-up; the app in process, Airflow's login check replaced by a no-op.", "",
             "| page | median s | worst s | bytes |", "|---|---|---|---|"]
    for page, p in result["pages"].items():
        lines.append(f"| `{page}` | {p['median_s']:.3f} | {p['max_s']:.3f} | {p['bytes']:,} |")
    build = result["build"]
    snapshot = ("" if "snapshot_s" not in build else  # results.json of an earlier version lack it
                f" The daily snapshot an extraction takes at its end: {build['snapshot_s']:.2f} s "
                f"({build['snapshot_cpu_s']:.2f} s of CPU).")
    if "summary_metrics_s" in build:  # not when --database reused a warehouse built earlier
        lines += ["", f"The summary task's tables over the same warehouse (computed by the task, not by a page): "
                  f"{build['summary_metrics_s']:.1f} s.{snapshot}"]
    lines += ["", f"Target: every page < {MAX_PAGE_SECONDS} s at 1,000,000 findings: "
              f"**{'met' if result['met'] else 'not met'}** (slowest median {result['worst_median_s']:.3f} s)."]
    if "export" in result:
        every, none = result["export"]["all"], result["export"]["none"]
        lines += ["", f"CSV export of every finding: {every['rows']:,} rows, {every['bytes'] / 2**20:.0f} MB in "
                  f"{every['seconds']:.1f} s; peak of Python's allocations {every['peak_mb']:.1f} MB against "
                  f"{none['peak_mb']:.1f} MB for an empty export (+{result['export_extra_mb']:.1f} MB; target "
                  f"+{MAX_EXPORT_EXTRA_MB:.0f} MB: **{'met' if result['export_met'] else 'not met'}**)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--findings", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", help="write the result as JSON here")
    parser.add_argument("--database", type=Path,
                        help="keep the warehouse in this SQLite file: build it there if the file does not exist, "
                             "else measure the one it holds (built earlier with the same --findings) without building")
    args = parser.parse_args()
    if args.database:
        result = measure(args.findings, args.runs, args.database)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as work:
            result = measure(args.findings, args.runs, Path(work) / "dashboard.db")
    result["command"] = " ".join(["python bench/dashboard.py", *sys.argv[1:]])
    print(markdown(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
