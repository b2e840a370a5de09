"""Dashboard pages from a real SQLite warehouse, served by the real FastAPI app (Airflow's authentication replaced
only where a test says so)."""

from __future__ import annotations

import re
from datetime import date

import pytest
from fastapi.testclient import TestClient
from findings_provider.config import PipelineConfig
from findings_provider.dashboard import pages
from findings_provider.dashboard.app import create_app
from findings_provider.dashboard.links import PAGES, URL_PREFIX, dashboard_url
from findings_provider.reports import SEVERITY_COLOURS
from findings_provider.warehouse import Warehouse
from present import present

from .conftest import finding

EVIL = '<script>alert("x")</script>'


def client(warehouse: Warehouse, config: PipelineConfig | None = None, *, logged_in: bool = True) -> TestClient:
    config = config or PipelineConfig()
    app = create_app(lambda: (warehouse, config), auth=(lambda: None) if logged_in else None)
    return TestClient(app)


def ids_on(page: str) -> list[int]:
    return [int(i) for i in re.findall(r"<td>(?:<a [^>]*>)?(\d+)(?:</a>)?</td><td>[^<]*</td><td>", page)]


@pytest.mark.parametrize("path", ["/", *(f"/{p}" for p in PAGES if p), "/reports/findings_summary"])
def test_without_an_airflow_login_every_page_is_refused_and_shows_no_data(warehouse: Warehouse, path: str) -> None:
    warehouse.upsert_findings([finding(1, repository={"name": "acme/secret-repo"})])
    warehouse.save_report("findings_summary", "Open findings", "<p>acme/secret-repo</p>")
    response = client(warehouse, logged_in=False).get(path)
    assert response.status_code == 401
    assert "acme" not in response.text


def test_every_page_renders_for_a_logged_in_user(warehouse: Warehouse) -> None:
    web = client(warehouse)
    for path in PAGES:
        response = web.get(f"/{path}")
        assert response.status_code == 200, path
        assert f"<a href=\"{'./' if path == '' else path}\" class=current>" in response.text


def test_findings_table_filters_and_pages_through_the_primary_key(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(i, severity="critical" if i % 3 == 0 else "low") for i in range(1, 61)]
                              + [finding(7, "sca", severity="critical")])
    config = PipelineConfig(dashboard={"page_size": 10})
    web = client(warehouse, config)
    first = web.get("/findings", params={"severity": "critical"}).text
    assert ids_on(first) == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]  # by issue type, then id
    after = present(re.search(r'href="findings\?([^"]+)"', first)).group(1).replace("&amp;", "&")
    assert "after=sast%3A30" in after
    assert "severity=critical" in after
    second = web.get(f"/findings?{after}").text
    assert ids_on(second) == [33, 36, 39, 42, 45, 48, 51, 54, 57, 60]
    third = web.get("/findings", params={"severity": "critical", "after": "sast:60"}).text
    assert ids_on(third) == [7]  # the sca finding
    assert "next 10" not in third
    assert ids_on(web.get("/findings", params={"issue_type": "sca"}).text) == [7]


def test_values_from_the_service_are_escaped_everywhere(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1, repository={"name": EVIL}, rule_name=EVIL, severity=EVIL)])
    warehouse.take_snapshot(date.today())
    web = client(warehouse)
    for path in ("/", "/findings"):
        text = web.get(path).text
        assert EVIL not in text
        assert "&lt;script&gt;" in text
    assert EVIL not in web.get("/findings", params={"rule_name": EVIL}).text


def test_finding_links_go_to_the_configured_service_view_else_to_the_code(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1, line_of_code_url="https://git.example.com/a/b#L3"),
                               finding(2, line_of_code_url="javascript:alert(1)")])
    plain = client(warehouse).get("/findings").text
    assert '<a href="https://git.example.com/a/b#L3"' in plain
    assert "javascript:" not in plain
    config = PipelineConfig(dashboard={"finding_url": "https://findings.example.com/{issue_type}/{id}"})
    linked = client(warehouse, config).get("/findings").text
    assert '<a href="https://findings.example.com/sast/2"' in linked


def test_overview_shows_counts_trend_in_severity_colours_and_the_stored_metrics(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1, severity="critical"), finding(2, severity="critical"), finding(3),
                               finding(4, severity="low", status="fixed")])
    warehouse.take_snapshot(date(2026, 2, 1))
    warehouse.set_state(pages.LATEST_METRICS_KEY, {"run_id": "scheduled__x", "computed_at": "2026-02-01T00:00:00",
                                                   "sla": [{"severity": "critical", "target_days": 7, "open": 2,
                                                            "breaching": 1}]})
    text = client(warehouse).get("/").text
    assert re.search(r"critical<br><b>2</b>", text)
    assert re.search(r"high<br><b>1</b>", text)
    assert re.search(r"low<br><b>0</b>", text)  # the fixed one is not open
    assert f'fill="{SEVERITY_COLOURS["critical"]}"' in text
    assert SEVERITY_COLOURS["critical"].startswith("#c6")
    assert "scheduled__x" in text
    assert "reports/findings_summary" in text


def test_reports_are_served_from_the_warehouse_newest_first(warehouse: Warehouse) -> None:
    web = client(warehouse)
    assert web.get("/reports/policy_tuning").status_code == 404
    warehouse.save_report("policy_tuning", "Policy tuning", "<html>first</html>")
    warehouse.save_report("policy_tuning", "Policy tuning", "<html>second</html>")
    assert web.get("/reports/policy_tuning").text == "<html>second</html>"
    assert "reports/policy_tuning" in web.get("/policies").text


def test_the_dashboards_address_follows_airflows_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/")
    assert dashboard_url("findings", "severity=critical") == (
        f"https://airflow.example.com{URL_PREFIX}/findings?severity=critical")


def test_overview_lists_the_approvals_waiting_with_links_to_airflows_page(warehouse: Warehouse) -> None:
    waiting = [{"dag_id": "ticket_creation", "run_id": "scheduled__2026-11-24T00:00:00+00:00",
                "task_id": "approve_tickets", "map_index": -1, "subject": "Create 240 tickets?",
                "created_at": "2026-11-24 00:01:00+00:00"}]
    app = create_app(lambda: (warehouse, PipelineConfig()), auth=lambda: None, approvals=lambda: waiting)
    text = TestClient(app).get("/").text
    assert "Approvals waiting (1)" in text
    assert ('href="../dags/ticket_creation/runs/scheduled__2026-11-24T00%3A00%3A00%2B00%3A00/tasks/approve_tickets/'
            'required_actions?map_index=-1"') in text
    assert "Create 240 tickets?" in text
    unreadable = create_app(lambda: (warehouse, PipelineConfig()), auth=lambda: None, approvals=lambda: None)
    assert "cannot be read" in TestClient(unreadable).get("/").text
