"""Browser test: headless Chromium (``browser.py``) opens the Airflow UI of the session's e2e stack, logs in, finds
the seven DAGs, opens the pipeline's grid view and checks that the last runs succeeded. Screenshots are kept in
``test-artifacts/screenshots/``.

It lives beside the e2e tests (marked ``browser``) so that it reuses the e2e session stack and the runs the
``pipeline`` fixture made, instead of starting a second Airflow.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from findings_provider.names import PIPELINE_DAGS

from devtools.stack import Stack

from .browser import SCREENSHOTS, TIMEOUT_MS
from .helpers import PipelineResult

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

#: The DAG whose grid the test reads: the start of the pipeline, run manually and by the scans Asset.
PIPELINE_DAG = "findings_extraction"
LAST_RUNS = 3


def dag_ids_on_list_page(page: Any, base_url: str, expected: tuple[str, ...]) -> set[str]:
    page.goto(f"{base_url}/dags")
    cards = page.locator("[data-testid=dag-id]")
    cards.first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(
        "n => document.querySelectorAll('[data-testid=dag-id]').length >= n", arg=len(expected), timeout=TIMEOUT_MS
    )
    return {t.strip() for t in cards.all_inner_texts()}


def grid_cell_states(page: Any, base_url: str, dag_id: str, run_ids: list[str],
                     task_ids: list[str]) -> dict[tuple[str, str], str]:
    """Open the DAG's page (the grid view) and read each (run, task) cell's state from its tooltip."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}/dags/{dag_id}")
    for run_id in run_ids:
        page.locator(f'[data-run-id="{run_id}"]').first.wait_for(timeout=TIMEOUT_MS)
    states: dict[tuple[str, str], str] = {}
    for run_id in run_ids:
        for task_id in task_ids:
            cell = page.locator(f'[data-testid="grid-{run_id}-{task_id}"]').first
            cell.wait_for(timeout=TIMEOUT_MS)
            cell.hover()
            tip = page.locator("[data-part=content]").filter(has_text=f"Task ID: {task_id}").filter(
                has_text=run_id).last
            expect(tip).to_contain_text("State:", timeout=TIMEOUT_MS)
            match = re.search(r"State:\s*([A-Za-z ]+)", tip.inner_text())
            states[(run_id, task_id)] = match.group(1).strip().lower() if match else "?"
            page.mouse.move(0, 0)
    return states


def run_page_state(page: Any, base_url: str, dag_id: str, run_id: str) -> str:
    """Click the run's bar in the grid and read the state badge beside the run id in the run page's header."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}/dags/{dag_id}")
    page.locator(f'[data-run-id="{run_id}"] a[href*="/runs/"]').first.click()
    page.wait_for_url(re.compile(re.escape(f"/dags/{dag_id}/runs/")), timeout=TIMEOUT_MS)
    heading = page.locator("h2", has_text=run_id).first
    heading.wait_for(timeout=TIMEOUT_MS)
    badge = heading.locator("xpath=..").locator("[data-testid=state-badge]").first
    expect(badge).to_have_text(re.compile(r"\w"), timeout=TIMEOUT_MS)
    return badge.inner_text().strip().lower()


def test_dag_list_shows_the_seven_dags(browser_page: Any, e2e_stack: Stack, pipeline: PipelineResult) -> None:
    found = dag_ids_on_list_page(browser_page, e2e_stack.ui_url, PIPELINE_DAGS)
    browser_page.screenshot(path=str(SCREENSHOTS / "01-dag-list.png"), full_page=True)
    assert set(PIPELINE_DAGS) <= found, f"missing on the DAG list page: {set(PIPELINE_DAGS) - found}"


def test_pipeline_grid_shows_the_last_runs_succeeded(browser_page: Any, e2e_stack: Stack,
                                                     pipeline: PipelineResult) -> None:
    runs = sorted(e2e_stack.api.runs(PIPELINE_DAG), key=lambda r: r.get("run_after") or r.get("start_date") or "")
    last = runs[-LAST_RUNS:]
    assert last, f"{PIPELINE_DAG} has no runs"
    assert {r["state"] for r in last} == {"success"}, last  # what the REST API says; the UI must agree
    run_ids = [r["dag_run_id"] for r in last]
    watch = pipeline.manual[PIPELINE_DAG]
    task_ids = sorted({t["task_id"] for t in watch.task_instances})

    states = grid_cell_states(browser_page, e2e_stack.ui_url, PIPELINE_DAG, run_ids, task_ids)
    browser_page.screenshot(path=str(SCREENSHOTS / "02-pipeline-grid.png"), full_page=True)
    not_ok = {k: v for k, v in states.items() if v != "success"}
    assert not not_ok, f"grid cells not shown as success: {not_ok}"

    state = run_page_state(browser_page, e2e_stack.ui_url, PIPELINE_DAG, run_ids[-1])
    browser_page.screenshot(path=str(SCREENSHOTS / "03-pipeline-last-run.png"), full_page=True)
    assert state == "success", state


def test_asset_chain_dags_show_success_in_the_grid(browser_page: Any, e2e_stack: Stack,
                                                  pipeline: PipelineResult) -> None:
    """The stages the Asset chain started: their latest run is shown as succeeded on their run page."""
    for n, dag_id in enumerate(("autotriage_triage", "ticket_creation"), start=4):
        runs = sorted(e2e_stack.api.runs(dag_id), key=lambda r: r.get("run_after") or "")
        assert runs, dag_id
        state = run_page_state(browser_page, e2e_stack.ui_url, dag_id, runs[-1]["dag_run_id"])
        browser_page.screenshot(path=str(SCREENSHOTS / f"0{n}-{dag_id}-last-run.png"), full_page=True)
        assert state == "success", (dag_id, state)


#: The dashboard's pages (``view`` values), each visited in light and dark mode.
DASHBOARD_VIEWS = ("", "findings", "repositories", "scans", "activity", "policies", "inventory", "reports")
#: Open critical findings, a finding found on several branches once (docs/dashboard.md), and every copy.
OPEN_CRITICAL_EVERY_COPY_SQL = ("SELECT count(*) FROM findings WHERE severity = 'critical' "
                                "AND status IN ('open', 'reviewing', 'fixing')")
OPEN_CRITICAL_SQL = OPEN_CRITICAL_EVERY_COPY_SQL + " AND counted IS NOT false"
COUNTED_IDS_SQL = "SELECT issue_type, id FROM findings WHERE issue_type IN ('sast', 'sca') AND counted IS NOT false"


def set_colour_mode(page: Any, mode: str) -> None:
    """Airflow's light/dark switch keeps the choice in local storage (``theme``); the page follows it on load."""
    page.evaluate("mode => localStorage.setItem('theme', mode)", mode)
    page.reload()


def detected_when(page: Any, done: Callable[[list[str]], bool]) -> list[str]:
    """The findings list's Detected column (dates), once ``done`` holds of it or ``TIMEOUT_MS`` has passed: the
    list shows the new order once its data has been read again."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        dates = [text.strip() for text in page.locator(
            "[data-testid=findings-dashboard] tbody tr td:nth-child(10)").all_inner_texts()]
        if (dates and done(dates)) or time.monotonic() > deadline:
            return dates
        page.wait_for_timeout(200)


def test_findings_dashboard_is_a_page_of_the_airflow_ui(browser_page: Any, e2e_stack: Stack,
                                                        pipeline: PipelineResult) -> None:
    """The plugin's React app renders in Airflow's own page (no frame): every page in light and dark mode (the
    page follows Airflow's setting), the overview's open-critical count equals SQL over the warehouse and the
    total of the findings list it links to, a finding's link to the service opens from inside Airflow, the dry
    policy_tuning run is labelled, and without Airflow's login the data API answers 401."""
    import httpx
    from findings_provider.client import FindingsClient
    from playwright.sync_api import expect

    from .helpers import rows, scalar, warehouse_engine

    page = browser_page
    engine = warehouse_engine(e2e_stack)
    try:
        critical = scalar(engine, OPEN_CRITICAL_SQL)
        every_copy = scalar(engine, OPEN_CRITICAL_EVERY_COPY_SQL)
        counted = {(r["issue_type"], int(r["id"])) for r in rows(engine, COUNTED_IDS_SQL)}
    finally:
        engine.dispose()
    assert 0 < critical < every_copy  # the emulator's findings are found on several branches
    # the copies counted are those the service itself lists with dedup=true (its web UI's count)
    emulator = e2e_stack.emulator
    assert emulator is not None
    with FindingsClient(emulator.url, emulator.token, deployment_slug=emulator.deployment_slug,
                        deployment_id=emulator.deployment_id) as client:
        listed = {(t, f.id) for t in ("sast", "sca") for f in client.items(client.list_findings, t, dedup=True)}
        assert counted == listed

    page.goto(f"{e2e_stack.ui_url}/plugin/findings")  # the "Findings" entry of the Browse menu
    app = page.locator("[data-testid=findings-dashboard]")
    expect(app).to_be_visible(timeout=TIMEOUT_MS)
    assert page.locator("iframe").count() == 0
    for mode in ("light", "dark"):
        set_colour_mode(page, mode)
        expect(page.locator("html")).to_have_class(re.compile(mode), timeout=TIMEOUT_MS)
        for view in DASHBOARD_VIEWS:
            page.goto(f"{e2e_stack.ui_url}/plugin/findings" + (f"?view={view}" if view else ""))
            expect(app).to_be_visible(timeout=TIMEOUT_MS)
            expect(app.locator("[aria-current=page]")).to_have_count(1, timeout=TIMEOUT_MS)
            expect(app.get_by_test_id("findings-loading")).to_have_count(0, timeout=TIMEOUT_MS)  # data shown
            expect(app.get_by_text("could not be read")).to_have_count(0)
            page.screenshot(path=str(SCREENSHOTS / f"06-dashboard-{view or 'overview'}-{mode}.png"), full_page=True)
    set_colour_mode(page, "light")

    # the overview's open critical findings: a number that equals SQL and links to the list that reproduces it
    page.goto(f"{e2e_stack.ui_url}/plugin/findings")
    open_row = app.locator("tr", has_text=re.compile(r"^Open"))
    critical_cell = open_row.locator("td").nth(2)
    expect(critical_cell).to_have_text(f"{critical:,}", timeout=TIMEOUT_MS)
    expect(app.get_by_test_id("branch-view")).to_contain_text("as the service counts them")
    app.get_by_test_id("branch-view").get_by_role("button").click()  # every branch's copy
    page.wait_for_url(re.compile(r"branches=all"), timeout=TIMEOUT_MS)
    expect(critical_cell).to_have_text(f"{every_copy:,}", timeout=TIMEOUT_MS)
    page.screenshot(path=str(SCREENSHOTS / "06-dashboard-overview-every-branch.png"), full_page=True)
    page.goto(f"{e2e_stack.ui_url}/plugin/findings")
    expect(critical_cell).to_have_text(f"{critical:,}", timeout=TIMEOUT_MS)
    critical_cell.locator("a").click()
    page.wait_for_url(re.compile(r"view=findings"), timeout=TIMEOUT_MS)
    expect(app.get_by_test_id("findings-total")).to_contain_text(f"of {critical:,} findings", timeout=TIMEOUT_MS)
    page.screenshot(path=str(SCREENSHOTS / "07-findings-open-critical.png"), full_page=True)
    severities = app.locator("tbody tr td:nth-child(1)").all_inner_texts()
    assert len(severities) == min(critical, 100)  # pipeline.yaml's dashboard.page_size
    assert {s.strip().lower() for s in severities} == {"critical"}

    # each order is named by what comes first: by age, "Oldest first" then "Newest first" (the reverse)
    orders = app.locator("#findings-order option")
    expect(orders).to_have_text(["Most severe first", "Least severe first"])
    app.locator("#findings-sort").select_option("age")
    page.wait_for_url(re.compile(r"sort=age"), timeout=TIMEOUT_MS)
    expect(orders).to_have_text(["Oldest first", "Newest first"], timeout=TIMEOUT_MS)
    oldest = detected_when(page, lambda dates: dates == sorted(dates))
    assert oldest == sorted(oldest)
    assert len(set(oldest)) > 1  # the order is visible
    app.locator("#findings-order").select_option(label="Newest first")
    page.wait_for_url(re.compile(r"order=desc"), timeout=TIMEOUT_MS)
    newest = detected_when(page, lambda dates: dates == sorted(dates, reverse=True))
    assert newest == sorted(newest, reverse=True)
    assert newest[0] > oldest[0]

    # a link to the service opens (a new tab: not blocked by a sandboxed frame)
    link = app.locator("tbody a[target=_blank]").first
    href = link.get_attribute("href")
    assert href
    assert href.startswith("http")
    with page.context.expect_page(timeout=TIMEOUT_MS) as opened:  # times out when the browser blocks the tab
        link.click()
    opened.value.close()

    # the dry policy_tuning run is labelled as one on the activity page
    page.goto(f"{e2e_stack.ui_url}/plugin/findings?view=activity")
    dry = app.locator("tr", has_text="policy_tuning")
    expect(dry.first).to_contain_text("Dry run", timeout=TIMEOUT_MS)

    refused = httpx.get(f"{e2e_stack.api_url}/findings-dashboard/api/findings", timeout=30)  # no cookie, no token
    assert refused.status_code == 401
    assert "critical" not in refused.text


def test_the_dashboards_widget_dag_tab_and_run_tab_show_that_data(browser_page: Any, e2e_stack: Stack,
                                                                   pipeline: PipelineResult) -> None:
    """Airflow's home page carries the widget (its open criticals equal SQL and link to the list that reproduces
    them); ticket_creation's "Findings of this DAG" tab lists its runs with the tickets each created (SQL); the
    manual triage run's "What this run did" tab shows the findings it triaged, and its link lists exactly them."""
    from playwright.sync_api import expect

    from .helpers import rows, scalar, warehouse_engine

    page = browser_page
    engine = warehouse_engine(e2e_stack)
    try:
        critical = scalar(engine, OPEN_CRITICAL_SQL)
        [triage] = rows(engine, "SELECT run_id, SUM(num_triaged) AS n FROM triage_actions WHERE status = "
                                "'succeeded' GROUP BY run_id ORDER BY n DESC LIMIT 1")
        [ticket] = rows(engine, "SELECT run_id, COUNT(DISTINCT ticket_id) AS n FROM ticket_actions WHERE outcome = "
                                "'succeeded' GROUP BY run_id ORDER BY n DESC LIMIT 1")
    finally:
        engine.dispose()
    (triage_run, triaged), (ticket_run, tickets) = (triage["run_id"], triage["n"]), (ticket["run_id"], ticket["n"])
    assert triaged > 0  # the session's pipeline triaged and ticketed (tests/e2e/test_pipeline.py)
    assert tickets > 0

    page.goto(f"{e2e_stack.ui_url}/")
    widget = page.get_by_text("Open critical", exact=True).locator("xpath=..")
    expect(widget).to_contain_text(f"{critical:,}", timeout=TIMEOUT_MS)
    page.screenshot(path=str(SCREENSHOTS / "08-home-widget.png"), full_page=True)
    widget.locator("a").first.click()
    page.wait_for_url(re.compile(r"/plugin/findings\?view=findings"), timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("findings-total")).to_contain_text(f"of {critical:,} findings", timeout=TIMEOUT_MS)

    page.goto(f"{e2e_stack.ui_url}/dags/ticket_creation/plugin/findings-dag")
    row = page.get_by_test_id("findings-dag").locator("tr", has_text=ticket_run)
    expect(row).to_have_count(1, timeout=TIMEOUT_MS)
    expect(row.locator("td").nth(6)).to_have_text(f"{tickets:,}")  # the Tickets column
    page.screenshot(path=str(SCREENSHOTS / "09-dag-tab.png"), full_page=True)

    page.goto(f"{e2e_stack.ui_url}/dags/autotriage_triage/runs/{quote(triage_run, safe='')}/plugin/findings-run")
    link = page.get_by_role("link", name="Findings it triaged")
    expect(link).to_be_visible(timeout=TIMEOUT_MS)
    page.screenshot(path=str(SCREENSHOTS / "10-run-tab.png"), full_page=True)
    link.click()
    page.wait_for_url(re.compile(r"touched=triage"), timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("findings-total")).to_contain_text(f"of {triaged:,} findings", timeout=TIMEOUT_MS)
