"""The dashboard's FastAPI app from a real SQLite warehouse: the JSON the React app reads, the CSV export, the
stored reports and the bundle, served by the real app (Airflow's authentication replaced only where a test says
so, Airflow's runs and approvals given, the clock fixed).

The programme's numbers are checked against SQL written out here, over the ``findings`` table, and against the
total of the findings list each number links to (its ``query``): every number can be reproduced both ways.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from findings_provider import programme
from findings_provider.client.models import Project
from findings_provider.client.vocabulary import SEVERITY_ORDER
from findings_provider.config import PipelineConfig
from findings_provider.dashboard import findings_list, links, memo
from findings_provider.dashboard.app import BUNDLE, AirflowState, create_app
from findings_provider.dashboard.findings_list import COLUMNS
from findings_provider.dashboard.views import SCAN_STATUS_LABELS
from findings_provider.names import APPROVAL_DAGS
from findings_provider.programme import MEASURES, FindingFilter
from findings_provider.warehouse import TicketAction, Warehouse, dependency_repository_rows, scan_rows
from findings_provider.warehouse.branches import store_projects
from findings_provider.warehouse.schema import findings
from sqlalchemy import select, text, update

from .conftest import finding

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
#: The fix-time targets without an ``sla`` section (critical 7, high 30, medium 90 days).
DEFAULT_TARGETS = PipelineConfig().sla.fix_days.targets()
#: Open, as SQL: not fixed, not ignored, not removed.
OPEN = "status IN ('open', 'reviewing', 'fixing')"


def since(days: float) -> str:
    """A ``relevant_since`` ``days`` before NOW."""
    return (NOW - timedelta(days=days)).isoformat()


def app_client(warehouse: Warehouse, config: PipelineConfig | None = None, *, logged_in: bool = True,
           runs: Callable[..., Any] | None = None,
           approvals: Sequence[Mapping[str, Any]] | None = ()) -> TestClient:
    state = AirflowState(approvals=lambda: approvals, runs=runs or (lambda defaults, dag_id=None: []))
    config = config or PipelineConfig()
    app = create_app(lambda: (warehouse, config), auth=(lambda: None) if logged_in else None, airflow=state,
                     clock=lambda: NOW)
    return TestClient(app)


# --- SQL written out, independent of the provider's -----------------------------------------------------------------

def measure_sql(targets: Mapping[str, int], branches: str = "") -> dict[str, str]:
    """Each measure as a WHERE clause over ``findings`` (SQLite; ``:now`` is NOW), counting one copy of a finding
    found on several branches (``COUNTED``) unless ``branches`` is ``all``."""
    late = " ".join(f"WHEN '{severity}' THEN {days}" for severity, days in targets.items())
    copies = "" if branches else f" AND {COUNTED}"
    return {name: f"({where}){copies}" for name, where in {
        "open": OPEN,
        "overdue": f"{OPEN} AND julianday(:now) - julianday(substr(relevant_since, 1, 19)) > CASE severity {late} END",
        "triaged": "triage_state IS NOT NULL AND triage_state NOT IN ('', 'untriaged')",
        "ticketed": "external_ticket_id IS NOT NULL",
        "fixed": "status = 'fixed'",
    }.items()}


def sql(warehouse: Warehouse, query: str, **params: Any) -> list[tuple[Any, ...]]:
    with warehouse.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(query), {"now": NOW.strftime("%Y-%m-%d %H:%M:%S"), **params})]


def sql_count(warehouse: Warehouse, where: str, **params: Any) -> int:
    return int(sql(warehouse, f"SELECT count(*) FROM findings WHERE {where}", **params)[0][0])


def failed_scans_sql(warehouse: Warehouse) -> int:
    return int(sql(warehouse, "SELECT count(*) FROM scans WHERE status IN ('SCAN_STATUS_ERROR', "
                              "'SCAN_STATUS_NEVER_FINISHED') AND julianday(:now) - julianday(substr(started_at, 1, 19))"
                              " <= 7")[0][0])


def list_total(web: TestClient, query: Mapping[str, str]) -> int:
    response = web.get("/api/findings", params=dict(query))
    assert response.status_code == 200, response.text
    return int(response.json()["total"])


def listed(web: TestClient, **params: Any) -> list[tuple[str, int]]:
    body = web.get("/api/findings", params={"limit": 1000, **params}).json()
    assert body["total"] == len(body["rows"])
    return [(r["issue_type"], r["id"]) for r in body["rows"]]


# --- the programme: varied findings around the fix-time targets -----------------------------------------------------

PROGRAMME = [
    finding(1, severity="critical", relevant_since=since(9), repository={"name": "acme/api"}, ref="main",
            match_based_id="fp-1"),  # late
    finding(2, severity="critical", relevant_since=since(7), repository={"name": "acme/api"}),  # exactly on target
    finding(3, severity="critical", status="reviewing", triage_state="reviewing", relevant_since=since(60)),  # late
    finding(4, severity="critical", status="fixed", relevant_since=since(400), external_ticket={"id": 501}),
    finding(5, severity="high", relevant_since=since(59), external_ticket={"id": 502},
            repository={"name": "acme/api"}),  # late, ticketed
    finding(6, severity="high", status="fixing", triage_state="fixing", external_ticket={"id": 503},
            relevant_since=since(14)),
    finding(7, severity="high", status="ignored", triage_state="ignored", relevant_since=since(400)),
    finding(8, severity="medium", relevant_since=since(120), repository={"name": "acme/web"}, ref="main",
            match_based_id="fp-8"),  # late
    finding(9, severity="medium", triage_state="untriaged", relevant_since=since(28)),
    finding(10, severity="low", relevant_since=since(3000)),  # no target for low
    finding(11, severity="low", status="provisionally_ignored", triage_state="provisionally_ignored"),
    finding(12, severity=None, relevant_since=since(3000), repository={"name": "acme/web"}),  # no severity
    finding(13, severity="informational", relevant_since=since(3000)),  # a severity the service added
    finding(1, "sca", severity="critical", relevant_since=since(7 + 1 / 86400)),  # one second late
    finding(2, "sca", severity="high", status="fixed", triage_state="fixing", relevant_since=since(90)),
    finding(1, "secrets", severity="high", status="removed", relevant_since=since(100)),  # neither open nor fixed
    finding(2, "secrets", severity="medium", relevant_since=since(91), external_ticket={"id": 504}),  # late
    finding(3, "secrets", severity=None, status="fixed"),
    # copies on other branches of sast 1 and 8 (on their projects' primary branch, main): not counted
    finding(20, severity="critical", relevant_since=since(9), repository={"name": "acme/api"}, ref="feature/x",
            match_based_id="fp-1"),
    finding(21, severity="medium", relevant_since=since(100), repository={"name": "acme/web"}, ref="feature/y",
            match_based_id="fp-8", triage_state="reviewing", status="reviewing"),
]
#: The primary branch of each project, and the copies that are therefore not counted (by hand).
PRIMARY = {"acme/api": "main", "acme/web": "main"}
UNCOUNTED = {("sast", 20), ("sast", 21)}
COUNTED = "NOT (issue_type = 'sast' AND id IN (20, 21))"
#: The late ones, by hand (a check of the SQL above as much as of the app), counting one copy of each finding.
LATE = {("sast", 1), ("sast", 3), ("sast", 5), ("sast", 8), ("sca", 1), ("secrets", 2)}
SCANS: list[dict[str, Any]] = [
    {"id": "s1", "repository_id": "11", "status": "SCAN_STATUS_ERROR", "started_at": since(1),
     "completed_at": since(1 - 300 / 86400), "meta": {"ci_job_url": "https://ci.example.com/jobs/1"}},
    {"id": "s2", "repository_id": "11", "status": "SCAN_STATUS_NEVER_FINISHED", "started_at": since(6)},
    {"id": "s3", "repository_id": "12", "status": "SCAN_STATUS_ERROR", "started_at": since(8)},  # too old to count
    {"id": "s4", "repository_id": "12", "status": "SCAN_STATUS_COMPLETED", "started_at": since(2),
     "completed_at": since(2 - 60 / 86400), "meta": {"ci_job_url": "javascript:alert(1)"}},
    {"id": "s5", "repository_id": "11", "status": "SCAN_STATUS_CANCELLED", "started_at": since(3)},
    {"id": "s6", "repository_id": "99", "status": "SCAN_STATUS_RUNNING", "started_at": since(0.5)},
    {"id": "s7", "repository_id": "12", "status": "SCAN_STATUS_ERROR", "started_at": since(7)},  # the window's edge
]


def seed_programme(warehouse: Warehouse) -> None:
    warehouse.upsert_findings(PROGRAMME)
    store_projects(warehouse, [Project(name=n, primary_branch=b) for n, b in PRIMARY.items()], now=NOW)
    with warehouse.engine.begin() as conn:  # an empty triage state is untriaged, as "untriaged" is
        conn.execute(update(findings).where(findings.c.issue_type == "sast", findings.c.id == 1)
                     .values(triage_state=""))
    warehouse.upsert_scans(scan_rows(SCANS))
    warehouse.upsert_dependency_repositories(dependency_repository_rows(
        [{"id": 11, "name": "acme/api"}, {"id": 12, "name": "acme/web"}]))


@pytest.mark.parametrize("branches", ["", "all"], ids=["one-copy", "every-branch"])
@pytest.mark.parametrize("targets", [DEFAULT_TARGETS, {"critical": 1, "low": 365}], ids=["default", "configured"])
def test_every_overview_number_is_the_sql_count_and_the_total_of_the_list_it_links_to(
        warehouse: Warehouse, targets: dict[str, int], branches: str) -> None:
    seed_programme(warehouse)
    config = PipelineConfig(sla={"fix_days": targets})
    web = app_client(warehouse, config)
    body = web.get("/api/overview", params={"branches": branches}).json()
    definitions = measure_sql(targets, branches)
    assert body["view"]["branches"] == branches
    assert body["view"]["other"] == ("" if branches else "all")
    if targets == DEFAULT_TARGETS:
        assert targets == {"critical": 7, "high": 30, "medium": 90}
        late = sql(warehouse, f"SELECT issue_type, id FROM findings WHERE {definitions['overdue']}")
        assert set(late) == (LATE | UNCOUNTED if branches else LATE)
    assert body["as_of"] == NOW.isoformat()
    assert body["targets"] == targets
    assert [m["name"] for m in body["measures"]] == list(MEASURES)
    for number in body["measures"]:
        where = definitions[number["name"]]
        assert number["total"] == sql_count(warehouse, where) > 0, number["name"]
        assert list_total(web, number["query"]) == number["total"], number["name"]
        severities = [b["severity"] for b in number["by_severity"]]
        assert severities[:len(SEVERITY_ORDER)] == list(SEVERITY_ORDER)  # every known severity, most severe first
        assert sum(b["count"] for b in number["by_severity"]) == number["total"]
        for cell in number["by_severity"]:
            expected = sql_count(warehouse, f"{where} AND coalesce(severity, '') = :severity",
                                 severity=cell["severity"])
            assert cell["count"] == expected, (number["name"], cell)
            assert list_total(web, cell["query"]) == expected, (number["name"], cell)
    by_name = {m["name"]: m for m in body["measures"]}
    assert {b["severity"] for b in by_name["open"]["by_severity"]} == {*SEVERITY_ORDER, "", "informational"}
    for entry in body["by_type"]:
        expected = sql_count(warehouse, f"{definitions['open']} AND issue_type = :t", t=entry["issue_type"])
        assert entry["count"] == expected
        assert list_total(web, entry["query"]) == expected
    assert {e["issue_type"] for e in body["by_type"]} == {t for (t,) in sql(
        warehouse, f"SELECT DISTINCT issue_type FROM findings WHERE {OPEN}")}
    assert body["failed_scans"] == {"count": failed_scans_sql(warehouse), "days": 7}


def test_widget_numbers_are_the_sql_counts_and_link_to_their_lists(warehouse: Warehouse) -> None:
    seed_programme(warehouse)
    waiting = [{"dag_id": "ticket_creation", "run_id": "r", "task_id": "approve", "map_index": -1,
                "subject": "Create 3 tickets?", "created_at": "2026-02-28T00:00:00+00:00"}]
    web = app_client(warehouse, approvals=waiting)
    body = web.get("/api/widget").json()
    critical = sql_count(warehouse, f"{OPEN} AND severity = 'critical' AND {COUNTED}")
    late = sql_count(warehouse, measure_sql(DEFAULT_TARGETS)["overdue"])
    assert (critical, late) == (4, len(LATE))
    assert sql_count(warehouse, f"{OPEN} AND severity = 'critical'") == 5  # a copy on another branch
    assert body["open_critical"]["count"] == critical
    assert list_total(web, body["open_critical"]["query"]) == critical
    assert body["overdue"]["count"] == late
    assert list_total(web, body["overdue"]["query"]) == late
    assert body["failed_scans"]["count"] == failed_scans_sql(warehouse) == 3
    assert body["approvals"] == 1
    assert web.get("/api/overview").json()["approvals"] == waiting
    assert app_client(warehouse, approvals=None).get("/api/widget").json()["approvals"] is None  # Airflow unreadable


def test_repository_numbers_are_counted_within_the_repository(warehouse: Warehouse) -> None:
    seed_programme(warehouse)
    web = app_client(warehouse)
    page = web.get("/api/repository", params={"name": "acme/api"}).json()
    definitions = measure_sql(DEFAULT_TARGETS)
    for number in page["measures"]:
        where = f"{definitions[number['name']]} AND repository_name = 'acme/api'"
        assert number["total"] == sql_count(warehouse, where)
        assert number["query"]["repository"] == "acme/api"
        assert list_total(web, number["query"]) == number["total"]
        for cell in number["by_severity"]:
            assert list_total(web, cell["query"]) == cell["count"] == sql_count(
                warehouse, f"{where} AND coalesce(severity, '') = :s", s=cell["severity"])
    assert {s["id"] for s in page["scans"]} == {"s1", "s2", "s5"}  # the scans of repository 11
    table = web.get("/api/repositories").json()["repositories"]
    for entry in table:
        name = entry["repository"]
        where = "repository_name = :r" if name else "repository_name IS NULL"
        assert entry["open"] == sql_count(warehouse, f"{definitions['open']} AND {where}", r=name)
        assert entry["overdue"] == sql_count(warehouse, f"{definitions['overdue']} AND {where}", r=name)
        if not name:  # findings without a repository: the filter has no value that selects only them
            continue
        for severity, count in entry["by_severity"].items():  # the page links each cell as the bundle does
            assert list_total(web, {"measure": "open", "severity": severity, "repository": name}) == count
    assert [e["overdue"] for e in table] == sorted((e["overdue"] for e in table), reverse=True)
    assert next(e for e in table if e["repository"] == "acme/web")["by_severity"] == {"medium": 1, "unknown": 1}


# --- the findings list ------------------------------------------------------------------------------------------------

REPOS = ("acme/repo-1", "acme/repo-10", "acme/repo-2", "beta/REPO-1b", "zeta/tools")
SEVERITIES = ("critical", "high", "medium", "low", "informational")
STATUSES = ("open", "reviewing", "fixed", "open")


def list_specs() -> list[dict[str, Any]]:
    """30 findings: sca ids overlap sast ids, detection days and repositories repeat (ties to break)."""
    specs = []
    for i in range(1, 31):
        specs.append({
            "issue_type": "sca" if i % 4 == 0 else "sast", "id": i // 4 if i % 4 == 0 else i,
            "repository": REPOS[(i // 2) % 5], "rule": f"rule-{i % 3}", "severity": SEVERITIES[(i * 3) % 5],
            "status": STATUSES[(i // 3) % 4], "since": NOW - timedelta(days=(i * 7) % 11 * 10 + 1),
        })
    return specs


def seed_list(warehouse: Warehouse, specs: list[dict[str, Any]]) -> None:
    warehouse.upsert_findings([finding(s["id"], s["issue_type"], repository={"name": s["repository"]},
                                       rule_name=s["rule"], severity=s["severity"], status=s["status"],
                                       relevant_since=s["since"].isoformat()) for s in specs])


def rank(spec: Mapping[str, Any]) -> int:
    severity = spec["severity"]
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def due(spec: Mapping[str, Any]) -> datetime | None:
    days = DEFAULT_TARGETS.get(spec["severity"])
    return None if days is None else spec["since"] + timedelta(days=days)


def python_sorted(specs: list[dict[str, Any]], sort: str, descending: bool) -> list[tuple[str, int]]:
    """The list's order written out in Python: the key, then (issue type, id) to break ties."""
    def tie(s: Mapping[str, Any]) -> tuple[str, int]:
        return s["issue_type"], s["id"]

    sign = -1 if descending else 1
    ordered: list[dict[str, Any]]
    if sort == "severity":  # most severe first, oldest first within; reversed both
        ordered = sorted(specs, key=lambda s: (sign * rank(s), sign * s["since"].timestamp(), tie(s)))
    elif sort == "age":  # oldest first
        ordered = sorted(specs, key=lambda s: (sign * s["since"].timestamp(), tie(s)))
    elif sort == "due":  # soonest due first, no target last either way
        ordered = sorted(specs, key=lambda s: (due(s) is None, sign * d.timestamp() if (d := due(s)) else 0, tie(s)))
    elif sort in ("repository", "rule"):  # by name, then most severe first
        ordered = sorted(sorted(specs, key=lambda s: (rank(s), tie(s))), key=lambda s: s[sort], reverse=descending)
    else:
        ordered = sorted(specs, key=tie, reverse=descending)
    return [tie(s) for s in ordered]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("sort", ["severity", "age", "due", "repository", "rule", "id"])
def test_the_list_is_sorted_as_asked(warehouse: Warehouse, sort: str, descending: bool) -> None:
    specs = list_specs()
    seed_list(warehouse, specs)
    params = {"sort": sort, **({"order": "desc"} if descending else {})}
    got = listed(app_client(warehouse), **params)
    assert got == python_sorted(specs, sort, descending)
    assert got != python_sorted(specs, sort, not descending)


def test_each_row_carries_its_age_due_date_and_days_overdue(warehouse: Warehouse) -> None:
    specs = list_specs()
    seed_list(warehouse, specs)
    rows = {(r["issue_type"], r["id"]): r for r in app_client(warehouse).get(
        "/api/findings", params={"limit": 1000}).json()["rows"]}
    assert len(rows) == len(specs)
    for spec in specs:
        row = rows[spec["issue_type"], spec["id"]]
        deadline = due(spec)
        late = (NOW - deadline) / timedelta(days=1) if deadline and spec["status"] != "fixed" else 0
        assert row["detected"] == spec["since"].date().isoformat()
        assert row["age_days"] == int((NOW - spec["since"]) / timedelta(days=1))
        assert row["due"] == (deadline.date().isoformat() if deadline else None)
        assert row["overdue_days"] == (math.ceil(late) if late > 0 else None), spec  # an hour late: 1 day
        assert (row["repository"], row["rule"], row["severity"], row["status"]) == (
            spec["repository"], spec["rule"], spec["severity"], spec["status"])
    assert any(r["overdue_days"] for r in rows.values())
    assert any(r["due"] and r["overdue_days"] is None for r in rows.values())


def test_offset_pages_are_disjoint_and_cover_the_total(warehouse: Warehouse) -> None:
    specs = list_specs()
    seed_list(warehouse, specs)
    web = app_client(warehouse, PipelineConfig(dashboard={"page_size": 10}))
    everything = listed(web, measure="open", sort="due")
    total = len(everything)
    assert total == sum(1 for s in specs if s["status"] != "fixed") > 10
    pages = []
    for offset in range(0, total, 10):
        body = web.get("/api/findings", params={"measure": "open", "sort": "due", "offset": offset}).json()
        assert (body["total"], body["offset"], body["limit"]) == (total, offset, 10)  # page_size is the default
        pages.append([(r["issue_type"], r["id"]) for r in body["rows"]])
    assert [len(p) for p in pages] == [10] * (total // 10) + ([total % 10] if total % 10 else [])
    assert [row for page in pages for row in page] == everything  # in order, nothing twice, nothing left out
    past = web.get("/api/findings", params={"measure": "open", "offset": total}).json()
    assert (past["total"], past["rows"]) == (total, [])
    assert len(web.get("/api/findings", params={"limit": 3, "offset": 2}).json()["rows"]) == 3


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_pages_sorted_by_due_are_the_whole_selection_in_that_order(warehouse: Warehouse, descending: bool) -> None:
    # a page by due date is sorted from a few candidates per severity (findings_list._due_candidates): findings
    # detected within one second (one due second on SQLite: the later id detected first), on either side of a
    # page's edge, and findings without a target come out as the whole selection sorted gives them
    base = datetime(2025, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
    severities = ("critical", "high", "high", "low", "medium", None)  # low and none: no target
    warehouse.upsert_findings([finding(n, "sast" if n % 5 else "sca", severity=severities[n % len(severities)],
                                       relevant_since=(base + timedelta(days=n % 3, microseconds=(40 - n) * 1000))
                                       .isoformat()) for n in range(1, 41)])
    order = programme.order_by("due", descending, DEFAULT_TARGETS, warehouse.engine.dialect.name)
    with warehouse.engine.connect() as conn:
        whole = [tuple(r) for r in conn.execute(select(findings.c.issue_type, findings.c.id).where(
            *FindingFilter(measure="open").where(DEFAULT_TARGETS, NOW)).order_by(*order))]
    web = app_client(warehouse)
    params: dict[str, Any] = {"measure": "open", "sort": "due", "limit": 3, **({"order": "desc"} if descending else {})}
    pages = [[(r["issue_type"], r["id"]) for r in web.get("/api/findings", params={**params, "offset": offset})
              .json()["rows"]] for offset in range(0, 42, 3)]
    assert [row for page in pages for row in page] == whole
    assert len(whole) == 40


def test_repository_part_ignores_case_while_repository_is_exact(warehouse: Warehouse) -> None:
    specs = list_specs()
    seed_list(warehouse, specs)
    web = app_client(warehouse)

    def expected(match: Callable[[str], bool]) -> set[tuple[str, int]]:
        return {(s["issue_type"], s["id"]) for s in specs if match(s["repository"])}

    part = set(listed(web, repository_contains="REPO-1"))
    assert part == expected(lambda r: "repo-1" in r.lower())
    assert {r for s in specs if (s["issue_type"], s["id"]) in part for r in [s["repository"]]} == {
        "acme/repo-1", "acme/repo-10", "beta/REPO-1b"}
    assert set(listed(web, repository="acme/repo-1")) == expected(lambda r: r == "acme/repo-1")
    assert listed(web, repository="ACME/REPO-1") == []
    assert listed(web, repository_contains="repo_1") == []  # "_" is not a wildcard
    assert set(listed(web, rule_contains="RULE-2", severity="critical")) == {
        (s["issue_type"], s["id"]) for s in specs if s["rule"] == "rule-2" and s["severity"] == "critical"}


def test_options_list_the_values_present(warehouse: Warehouse) -> None:
    specs = list_specs()
    seed_list(warehouse, specs)
    options = app_client(warehouse).get("/api/findings", params={"severity": "low"}).json()["options"]
    assert options == {
        "issue_type": sorted({s["issue_type"] for s in specs}),
        "severity": [s for s in SEVERITY_ORDER if any(x["severity"] == s for x in specs)] + ["informational"],
        "status": sorted({s["status"] for s in specs}),
        "repository": sorted({s["repository"] for s in specs}),
        "rule": sorted({s["rule"] for s in specs}),
    }


def test_options_are_read_again_once_their_time_is_up(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(memo.time, "monotonic", lambda: clock[0])
    warehouse.upsert_findings([finding(1, repository={"name": "acme/first"})])
    assert findings_list.options(warehouse)["repository"] == ["acme/first"]
    warehouse.upsert_findings([finding(2, repository={"name": "acme/second"})])
    clock[0] += findings_list.OPTIONS_TTL - 1
    assert findings_list.options(warehouse)["repository"] == ["acme/first"]  # reused within its time
    clock[0] += 2
    assert findings_list.options(warehouse)["repository"] == ["acme/first", "acme/second"]


def test_touched_selects_exactly_what_a_run_triaged_or_ticketed(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(i) for i in range(1, 8)] + [finding(i, "sca") for i in range(1, 4)])
    warehouse.record_triage_action(run_id="run-a", dag_id="autotriage_triage", issue_type="sast", dry_run=False,
                                   issue_ids=[1, 3], request={}, status="succeeded", num_triaged=2)
    warehouse.record_triage_action(run_id="run-a", dag_id="autotriage_triage", issue_type="sca", dry_run=False,
                                   issue_ids=[2], request={}, status="succeeded", num_triaged=1)
    warehouse.record_triage_action(run_id="run-a", dag_id="autotriage_triage", issue_type="sast", dry_run=False,
                                   issue_ids=[5], request={}, status="failed", error="HTTP 500")  # not triaged
    warehouse.record_triage_action(run_id="run-b", dag_id="autotriage_triage", issue_type="sast", dry_run=True,
                                   issue_ids=[4, 6], request={}, status="planned")  # a dry run's plan
    warehouse.record_ticket_actions([
        TicketAction("sast", 2, "succeeded", run_id="run-a", ticket_id=9),
        TicketAction("sast", 3, "ambiguous", run_id="run-a"),  # may have created one
        TicketAction("sast", 4, "failed", run_id="run-a"),
        TicketAction("sca", 3, "succeeded", run_id="run-b", ticket_id=10),
    ])
    web = app_client(warehouse)
    triaged = {(t, i) for t, ids in sql(warehouse, "SELECT issue_type, issue_ids FROM triage_actions WHERE "
                                                   "run_id = 'run-a' AND status IN ('succeeded', 'planned')")
               for i in stored_ids(ids)}
    assert set(listed(web, run_id="run-a", touched="triage")) == triaged == {("sast", 1), ("sast", 3), ("sca", 2)}
    assert set(listed(web, run_id="run-b", touched="triage")) == {("sast", 4), ("sast", 6)}
    assert set(listed(web, run_id="run-a", touched="ticket")) == {("sast", 2), ("sast", 3)}
    assert set(listed(web, run_id="run-a", touched="triage", issue_type="sca")) == {("sca", 2)}
    assert listed(web, run_id="run-c", touched="triage") == []  # a run that wrote nothing


def stored_ids(stored: str) -> list[int]:
    """The ids of a ``triage_actions.issue_ids`` cell (JSON text)."""
    return [int(i) for i in re.findall(r"\d+", stored)]


@pytest.mark.parametrize(("path", "params", "words"), [
    ("/api/findings", {"measure": "late"}, ["measure", "'late'"]),
    ("/api/findings", {"sort": "newest"}, ["sort", "'newest'"]),
    ("/api/findings", {"touched": "triage"}, ["touched", "'triage'", "run_id"]),
    ("/api/findings", {"touched": "merge", "run_id": "r"}, ["touched", "'merge'"]),
    ("/api/findings", {"offset": "ten"}, ["offset", "'ten'"]),
    ("/api/findings", {"offset": "-1"}, ["offset", "-1"]),
    ("/api/findings", {"limit": "0"}, ["limit", "0"]),
    ("/api/findings", {"limit": "5000"}, ["limit", "5000"]),
    ("/api/findings", {"limit": "1.5"}, ["limit", "'1.5'"]),
    ("/api/findings.csv", {"measure": "late"}, ["measure", "'late'"]),
    ("/api/findings.csv", {"sort": "newest"}, ["sort", "'newest'"]),
    ("/api/scans", {"status": "broken"}, ["status", "'broken'", "failed"]),
])
def test_a_bad_value_gets_422_naming_the_field_and_the_value(warehouse: Warehouse, path: str,
                                                             params: dict[str, str], words: list[str]) -> None:
    warehouse.upsert_findings([finding(1)])
    response = app_client(warehouse).get(path, params=params)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    for word in words:
        assert word in detail


# --- the CSV export ---------------------------------------------------------------------------------------------------

def read_csv(body: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body)))


def test_csv_export_holds_the_sql_selection_in_the_lists_order(warehouse: Warehouse) -> None:
    specs = list_specs()
    seed_list(warehouse, specs)
    web = app_client(warehouse)
    params = {"measure": "open", "repository_contains": "Repo-1", "sort": "due", "order": "desc"}
    response = web.get("/api/findings.csv", params=params)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"].startswith('attachment; filename="findings-')
    table = read_csv(response.text)
    assert table[0] == list(COLUMNS)
    exported = [(r[0], int(r[1])) for r in table[1:]]
    chosen = sql(warehouse, f"SELECT issue_type, id FROM findings WHERE {OPEN} "
                            "AND lower(repository_name) LIKE '%repo-1%'")
    assert sorted(exported) == sorted(chosen)
    assert len(exported) == len(chosen) > 1
    assert exported == listed(web, **params)
    first = web.get("/api/findings", params={**params, "limit": 1}).json()["rows"][0]
    assert table[1] == ["" if first[c] is None else str(first[c]) for c in COLUMNS]


def test_csv_cells_a_spreadsheet_would_run_are_made_inert(warehouse: Warehouse) -> None:
    formula = '=HYPERLINK("https://evil.example.com","x")'
    warehouse.upsert_findings([finding(1, repository={"name": formula}, rule_name="@SUM(A1)"),
                               finding(2, repository={"name": "acme/plain"}, rule_name="-1+2")])
    table = read_csv(app_client(warehouse).get("/api/findings.csv", params={"sort": "id"}).text)
    by_id = {int(r[1]): dict(zip(COLUMNS, r, strict=True)) for r in table[1:]}
    assert by_id[1]["repository"] == "'" + formula
    assert by_id[1]["rule"] == "'@SUM(A1)"
    assert by_id[2]["repository"] == "acme/plain"
    assert by_id[2]["rule"] == "'-1+2"


def test_csv_export_streams_in_batches(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findings_list, "CSV_BATCH", 3)
    specs = list_specs()
    seed_list(warehouse, specs)
    with app_client(warehouse).stream("GET", "/api/findings.csv", params={"sort": "age"}) as response:
        assert response.status_code == 200
        chunks = list(response.iter_raw())
    assert len(chunks) == 1 + math.ceil(len(specs) / 3)  # the header, then one chunk per batch
    table = read_csv(b"".join(chunks).decode())
    assert table[0] == list(COLUMNS)
    assert [(r[0], int(r[1])) for r in table[1:]] == python_sorted(specs, "age", False)


# --- scans ------------------------------------------------------------------------------------------------------------

def test_scans_have_readable_statuses_repository_names_and_safe_links(warehouse: Warehouse) -> None:
    seed_programme(warehouse)
    web = app_client(warehouse)
    body = web.get("/api/scans").json()
    assert body["total"] == body["listed"] == len(SCANS)
    rows = {s["id"]: s for s in body["scans"]}
    started = [s["started_at"] for s in body["scans"]]
    assert started == sorted(started, reverse=True)  # newest first
    for scan in SCANS:
        row = rows[scan["id"]]
        assert row["status_label"] == SCAN_STATUS_LABELS[scan["status"]]
        assert row["status_label"] != scan["status"]
    assert (rows["s1"]["status_label"], rows["s2"]["status_label"]) == ("Failed", "Never finished")
    assert rows["s1"]["repository"] == rows["s2"]["repository"] == "acme/api"
    assert rows["s4"]["repository"] == "acme/web"
    assert rows["s6"]["repository"] is None  # not in the dependency inventory
    assert rows["s1"]["duration_seconds"] == 300
    assert rows["s1"]["link"] == "https://ci.example.com/jobs/1"
    assert rows["s4"]["link"] is None  # not an http(s) link
    failed = web.get("/api/scans", params={"status": "failed"}).json()
    assert {s["id"] for s in failed["scans"]} == {"s1", "s2", "s7"}
    assert failed["total"] == failed_scans_sql(warehouse) == web.get("/api/widget").json()["failed_scans"]["count"]


# --- activity and runs ------------------------------------------------------------------------------------------------

def seed_runs(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(i) for i in range(1, 6)])
    record = warehouse.record_triage_action
    record(run_id="dry", dag_id="autotriage_triage", issue_type="sast", dry_run=True, issue_ids=[1, 2], request={},
           status="planned", num_triaged=2)
    record(run_id="busy", dag_id="autotriage_triage", issue_type="sast", dry_run=False, issue_ids=[3, 4, 5],
           request={}, status="succeeded", num_triaged=3)
    record(run_id="broken", dag_id="autotriage_triage", issue_type="sast", dry_run=False, issue_ids=[1], request={},
           status="failed", error="HTTP 500")
    record(run_id="old", dag_id="autotriage_triage", issue_type="sast", dry_run=False, issue_ids=[1], request={},
           status="succeeded", num_triaged=1)
    warehouse.record_ticket_actions([
        TicketAction("sast", 1, "succeeded", run_id="tickets", ticket_id=70, ticket_url="https://jira.example.com/70"),
        TicketAction("sast", 2, "succeeded", run_id="tickets", ticket_id=70, ticket_url="https://jira.example.com/70"),
        TicketAction("sast", 3, "succeeded", run_id="tickets", ticket_id=71, ticket_url="javascript:alert(1)"),
        TicketAction("sast", 4, "planned", run_id="ticket-plan"),
    ])


def airflow_run(run_id: str, dag_id: str = "autotriage_triage", *, dry_run: bool = False) -> dict[str, Any]:
    return {"dag_id": dag_id, "run_id": run_id, "state": "success", "start_date": "2026-02-28T00:00:00+00:00",
            "dry_run": dry_run}


def test_activity_lists_airflows_runs_with_what_each_changed(warehouse: Warehouse) -> None:
    seed_runs(warehouse)
    runs = [airflow_run("dry", dry_run=True), airflow_run("idle"), airflow_run("busy"),
            airflow_run("tickets", "ticket_creation"), airflow_run("ticket-plan", "ticket_creation"),
            airflow_run("broken"), airflow_run("planned-by-airflow", "ticket_creation", dry_run=True)]
    asked: list[tuple[dict[str, bool], str | None]] = []

    def airflow_runs(defaults: dict[str, bool], dag_id: str | None = None) -> list[dict[str, Any]]:
        asked.append((defaults, dag_id))
        return runs

    config = PipelineConfig(ticket_creation={"dry_run": True})
    web = app_client(warehouse, config, runs=airflow_runs)
    body = web.get("/api/activity").json()
    assert body["airflow"] is True
    assert [r["run_id"] for r in body["runs"]] == [r["run_id"] for r in runs]  # Airflow's order; "old" is not one
    outcome = {r["run_id"]: r["outcome"] for r in body["runs"]}
    assert outcome == {"dry": "dry run", "idle": "changed nothing", "busy": "changed something",
                       "tickets": "changed something", "ticket-plan": "dry run", "broken": "failed",
                       "planned-by-airflow": "dry run"}
    by_id = {r["run_id"]: r for r in body["runs"]}
    assert by_id["busy"]["triaged"] == 3
    assert by_id["tickets"]["tickets_created"] == 2
    assert by_id["dry"]["triage_planned"] == 2
    defaults, dag_id = asked[-1]
    assert dag_id is None
    assert set(defaults) == set(APPROVAL_DAGS)
    assert defaults == {dag: getattr(config, dag).dry_run for dag in APPROVAL_DAGS}
    assert defaults["ticket_creation"] is True
    web.get("/api/activity", params={"dag_id": "ticket_creation"})
    assert asked[-1][1] == "ticket_creation"


def test_without_airflows_runs_activity_lists_the_warehouses(warehouse: Warehouse) -> None:
    seed_runs(warehouse)
    body = app_client(warehouse, runs=lambda defaults, dag_id=None: None).get("/api/activity").json()
    assert body["airflow"] is False
    known = {r for (r,) in sql(warehouse, "SELECT run_id FROM triage_actions UNION SELECT run_id FROM ticket_actions")}
    assert {r["run_id"] for r in body["runs"]} == known
    outcome = {r["run_id"]: r["outcome"] for r in body["runs"]}
    assert outcome == {"dry": "dry run", "busy": "changed something", "broken": "failed", "old": "changed something",
                       "tickets": "changed something", "ticket-plan": "dry run"}
    at = [r["at"] for r in body["runs"]]
    assert at == sorted(at, reverse=True)


def test_a_policy_run_that_applied_rule_changes_changed_something(warehouse: Warehouse) -> None:
    change = warehouse.record_policy_change
    change(run_id="tuned", policy_id="p1", rule_path="r/a", previous_mode="monitor", new_mode="block", status="applied")
    change(run_id="tuned", policy_id="p1", rule_path="r/b", previous_mode="monitor", new_mode="block", status="failed")
    change(run_id="refused", policy_id="p1", rule_path="r/c", previous_mode="monitor", new_mode="block",
           status="failed")
    runs = [airflow_run("tuned", "policy_tuning"), airflow_run("refused", "policy_tuning"),
            airflow_run("quiet", "policy_tuning")]
    body = app_client(warehouse, runs=lambda defaults, dag_id=None: runs).get("/api/activity").json()
    by_id = {r["run_id"]: r for r in body["runs"]}
    assert (by_id["tuned"]["rules_changed"], by_id["tuned"]["rule_changes_failed"]) == (1, 1)
    assert {r: by_id[r]["outcome"] for r in by_id} == {"tuned": "changed something", "refused": "failed",
                                                       "quiet": "changed nothing"}


@pytest.mark.parametrize(("dag_id", "pipeline", "writes"), [
    ("ticket_creation", True, True), ("findings_extraction", True, False), ("someone_elses_dag", False, False)])
def test_a_dags_activity_says_whether_it_is_the_pipelines_and_writes(warehouse: Warehouse, dag_id: str,
                                                                      pipeline: bool, writes: bool) -> None:
    asked: list[str | None] = []

    def airflow_runs(defaults: dict[str, bool], dag_id: str | None = None) -> list[dict[str, Any]]:
        asked.append(dag_id)
        return []

    body = app_client(warehouse, runs=airflow_runs).get("/api/activity", params={"dag_id": dag_id}).json()
    assert asked == [dag_id]
    assert body["dag"] == {"dag_id": dag_id, "pipeline": pipeline, "writes": writes}
    assert app_client(warehouse, runs=airflow_runs).get("/api/activity").json()["dag"] is None


def test_run_detail_says_what_a_run_did_and_whether_it_was_a_dry_run(warehouse: Warehouse) -> None:
    seed_runs(warehouse)
    warehouse.record_policy_change(run_id="busy", policy_id="p1", rule_path="rules/sqli", previous_mode="MODE_MONITOR",
                                   new_mode="MODE_BLOCK", status="applied")  # a policy_tuning run of the same id
    web = app_client(warehouse)
    dry = web.get("/api/run", params={"run_id": "dry"}).json()
    assert dry["dry_run"] is True
    assert [r["status"] for r in dry["triage"]] == ["planned"]
    assert set(listed(web, **dry["triaged_query"])) == {("sast", 1), ("sast", 2)}  # what it planned to triage
    busy = web.get("/api/run", params={"run_id": "busy", "dag_id": "autotriage_triage"}).json()
    assert (busy["dry_run"], busy["dag_id"]) == (False, "autotriage_triage")
    assert [r["num_triaged"] for r in busy["triage"]] == [3]
    assert busy["policy_changes"] == []  # the run id's policy_tuning run sent it, not this DAG's
    assert set(listed(web, **busy["triaged_query"])) == {("sast", 3), ("sast", 4), ("sast", 5)}
    tuning = web.get("/api/run", params={"run_id": "busy", "dag_id": "policy_tuning"}).json()
    assert (tuning["triage"], [c["rule_path"] for c in tuning["policy_changes"]]) == ([], ["rules/sqli"])
    tickets = web.get("/api/run", params={"run_id": "tickets"}).json()
    assert tickets["dry_run"] is False
    assert {(t["ticket_id"], t["findings"], t["ticket_url"]) for t in tickets["tickets"]} == {
        (70, 2, "https://jira.example.com/70"), (71, 1, None)}  # only http(s) links
    assert set(listed(web, **tickets["ticketed_query"])) == {("sast", 1), ("sast", 2), ("sast", 3)}
    assert web.get("/api/run", params={"run_id": "ticket-plan"}).json()["dry_run"] is True
    assert web.get("/api/policies").json()["changes"][0]["new_mode"] == "MODE_BLOCK"


# --- reports, login, bundle, links ------------------------------------------------------------------------------------

def test_reports_are_served_newest_first(warehouse: Warehouse) -> None:
    web = app_client(warehouse)
    missing = web.get("/reports/policy_tuning")
    assert missing.status_code == 404
    assert "policy_tuning" in missing.json()["detail"]
    warehouse.save_report("policy_tuning", "Policy tuning", "<html>first</html>")
    warehouse.save_report("policy_tuning", "Policy tuning 2", "<html>second</html>")
    warehouse.save_report("findings_summary", "Summary", "<html>summary</html>")
    assert web.get("/reports/policy_tuning").text == "<html>second</html>"
    assert web.get("/reports/policy_tuning").headers["content-type"].startswith("text/html")
    listed_reports = web.get("/api/reports").json()["reports"]
    assert [(r["name"], r["title"]) for r in listed_reports] == [
        ("findings_summary", "Summary"), ("policy_tuning", "Policy tuning 2"), ("policy_tuning", "Policy tuning")]
    assert web.get("/api/policies").json()["report"]["title"] == "Policy tuning 2"
    assert web.get("/api/inventory").json()["report"] is None


def test_a_report_follows_airflows_dark_mode_when_asked(warehouse: Warehouse) -> None:
    from findings_provider.dashboard.app import DARK_REPORT_STYLE

    warehouse.save_report("findings_summary", "Summary", "<html><head><title>S</title></head><body>x</body></html>")
    web = app_client(warehouse)
    dark = web.get("/reports/findings_summary", params={"theme": "dark"}).text
    assert dark == f"<html><head><title>S</title>{DARK_REPORT_STYLE}</head><body>x</body></html>"
    assert DARK_REPORT_STYLE not in web.get("/reports/findings_summary").text


SECRET = "acme/secret-repo"
DATA_ROUTES = {
    "/api/overview": {}, "/api/widget": {}, "/api/findings": {}, "/api/findings.csv": {},
    "/api/repositories": {}, "/api/repository": {"name": SECRET}, "/api/scans": {"status": "failed"},
    "/api/activity": {}, "/api/run": {"run_id": "secret-run"}, "/api/policies": {}, "/api/inventory": {},
    "/api/reports": {}, "/reports/{kind}": {},
}


#: The routes whose answer names the secret repository (or its run) once logged in.
SHOWS_SECRET = {"/api/findings", "/api/findings.csv", "/api/repositories", "/api/repository", "/api/scans",
                "/api/run", "/api/reports", "/reports/{kind}"}


def seed_secrets(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1, repository={"name": SECRET}, severity="critical")])
    warehouse.save_report("findings_summary", f"Open findings of {SECRET}", f"<p>{SECRET}</p>")
    warehouse.upsert_scans(scan_rows([{"id": "s1", "repository_id": "5", "status": "SCAN_STATUS_ERROR",
                                       "started_at": since(1)}]))
    warehouse.upsert_dependency_repositories(dependency_repository_rows([{"id": 5, "name": SECRET}]))
    warehouse.record_triage_action(run_id="secret-run", dag_id="autotriage_triage", issue_type="sast", dry_run=False,
                                   issue_ids=[1], request={}, status="succeeded", num_triaged=1)


def test_the_data_routes_are_every_route_but_the_bundle(warehouse: Warehouse) -> None:
    paths = {r.path for r in app_client(warehouse).app.routes if isinstance(r, APIRoute)}  # type: ignore[attr-defined]
    assert paths - {f"/static/{BUNDLE}"} == set(DATA_ROUTES)


@pytest.mark.parametrize("path", DATA_ROUTES)
def test_without_an_airflow_login_every_data_route_is_refused_and_shows_no_data(warehouse: Warehouse,
                                                                               path: str) -> None:
    seed_secrets(warehouse)
    url = path.replace("{kind}", "findings_summary")
    refused = app_client(warehouse, logged_in=False).get(url, params=DATA_ROUTES[path])
    assert refused.status_code == 401
    assert list(refused.json()) == ["detail"]  # an error, no data
    assert "secret" not in refused.text
    allowed = app_client(warehouse).get(url, params=DATA_ROUTES[path])
    assert allowed.status_code == 200, allowed.text
    if path in SHOWS_SECRET:  # the same request with a login does show it
        assert "secret" in allowed.text


def test_the_bundle_is_served_without_login_and_registers_the_plugins_app_names(warehouse: Warehouse) -> None:
    response = app_client(warehouse, logged_in=False).get(f"/static/{BUNDLE}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    block = re.search(r"const APP_NAMES = \{(.*?)\};", response.text, re.DOTALL)
    assert block is not None
    assert dict(re.findall(r'(\w+): "([^"]*)"', block.group(1))) == links.APP_NAMES
    for key in links.APP_NAMES:
        assert f"globalThis[APP_NAMES.{key}]" in response.text
    assert links.bundle_path().endswith(f"{links.URL_PREFIX}/static/{BUNDLE}")


def test_the_dashboards_address_follows_airflows_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/base/")
    query = FindingFilter(measure="overdue", severity="critical", repository_contains="a&b").query()
    url = links.dashboard_url("findings", query)
    assert url.startswith("https://airflow.example.com/base/plugin/findings?view=findings&")
    params = dict(parse_qsl(urlsplit(url).query))
    assert params.pop("view") == "findings"
    assert FindingFilter.from_query(params) == FindingFilter.from_query(query)  # the link gives the filter back
    assert links.dashboard_url() == "https://airflow.example.com/base/plugin/findings"
    assert links.bundle_path() == f"/base{links.URL_PREFIX}/static/{BUNDLE}"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "")
    assert links.dashboard_url("run", {"run_id": "manual 1"}) == "/plugin/findings?view=run&run_id=manual+1"
    assert links.bundle_path() == f"{links.URL_PREFIX}/static/{BUNDLE}"
    with pytest.raises(ValueError, match="page = 'nope'"):
        links.dashboard_url("nope")


@pytest.mark.parametrize(("dag_id", "sections"), [
    ("autotriage_triage", ["triage"]), ("ticket_creation", ["tickets"]), ("policy_tuning", ["rules"]),
    ("findings_extraction", []), ("", ["triage", "tickets", "rules"])])
def test_a_runs_view_has_the_sections_of_what_its_dag_writes(warehouse: Warehouse, dag_id: str,
                                                             sections: list[str]) -> None:
    body = app_client(warehouse).get("/api/run", params={"run_id": "r", "dag_id": dag_id}).json()
    assert body["sections"] == sections


def test_the_trend_follows_each_new_snapshot_of_the_day(warehouse: Warehouse) -> None:
    """The trend is kept in memory until a snapshot is written: a second extraction the same day shows at once."""
    from datetime import date as day_type

    from findings_provider.dashboard import views

    today = day_type(2026, 3, 1)
    warehouse.upsert_findings([finding(i, severity="critical") for i in range(1, 4)])
    warehouse.take_snapshot(today)
    first = views.trend(warehouse)
    assert (first["days"], first["series"]["critical"]) == (["2026-03-01"], [3])
    assert views.trend(warehouse) == first
    warehouse.upsert_findings([finding(i, severity="critical") for i in range(4, 6)])
    warehouse.take_snapshot(today)
    assert views.trend(warehouse)["series"]["critical"] == [5]


def test_the_policies_view_says_why_it_is_empty_when_the_policy_api_was_retired(warehouse: Warehouse) -> None:
    from findings_provider.client import PolicyApiRetiredError
    from findings_provider.governance import policy_tuning as pt

    web = app_client(warehouse)
    assert web.get("/api/policies").json()["retired"] is None
    error = PolicyApiRetiredError("the policy API was retired", status_code=410, endpoint="policies_list")
    pt.record_retired(warehouse, error, {"policy_ids": None}, deployment_id="4242", deployment_slug="acme",
                      dag_id="policy_tuning", run_id="scheduled__1",
                      now=datetime(2025, 3, 4, 5, 6, tzinfo=timezone.utc))
    retired = web.get("/api/policies").json()["retired"]
    assert retired["seen_at"] == "2025-03-04T05:06:00+00:00"
    assert retired["deployment"] == "acme (4242)"
    assert retired["message"].startswith("The service retired its policy API for deployment acme (4242)")
    assert "newer policy system" in retired["message"]
    bundle = app_client(warehouse, logged_in=False).get(f"/static/{BUNDLE}").text
    assert "The service retired its policy API for this deployment on ${when(d.retired.seen_at)}" in bundle
