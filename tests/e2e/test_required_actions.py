"""Browser test: a triage that waits for a person's approval is approved from the UI, and its write happens.

On the session's e2e stack, after the ``pipeline`` fixture's runs: a scan reintroduces a few of the false positives
the pipeline triaged (new work for the triage policy, ``pipeline/ledger.py``), an extraction brings them into the
warehouse, and a triage run with an approval threshold below them waits for a person. Headless Chromium finds the
approval on the dashboard's overview, follows its link into Airflow's Required Actions tab and clicks Approve; the
bulk triage request then names exactly the findings the approval named.

This module changes the emulator's findings after the pipeline's run, which ``test_pipeline.py`` asserts on: it
sorts after it and runs on the same worker (``tests/parallel.py``), so that it comes last.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from findings_provider.pipeline.approval import TRIAGE, plan_key

from devtools.airflow_api import TERMINAL_RUN_STATES
from devtools.stack import Stack

from .browser import SCREENSHOTS, TIMEOUT_MS
from .helpers import PipelineResult, rows, warehouse_engine

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

TRIAGE_DAG = "autotriage_triage"
APPROVAL_TASK = "approve_triage"
EXTRACTION_DAG = "findings_extraction"
TICKET_DAG = "ticket_creation"
#: How many triaged false positives a scan reintroduces; the run's threshold is below it, so it asks a person.
REINTRODUCED = 5
THRESHOLD = 1
#: The states of a task waiting for a Human-in-the-loop answer (Airflow 3.3: awaiting_input; 3.2: deferred).
WAITING_FOR_INPUT = ("awaiting_input", "deferred")
#: The approval's own words: the number of findings it asks to triage (``pipeline/triage.py`` approval_text).
STATED_COUNT = re.compile(r"Bulk-triage (\d+) findings")


def triage_requests(stack: Stack, since: int) -> list[dict[str, Any]]:
    """The bulk triage requests the emulator received after ``since``."""
    with stack.emulator_admin() as admin:
        return [r for r in admin.requests(since=since) if r.get("operation") == "triage"]


def request_seq(stack: Stack) -> int:
    with stack.emulator_admin() as admin:
        return max((r["seq"] for r in admin.requests()), default=0)


def wait_for_input(stack: Stack, run_id: str, timeout: float = 180.0) -> dict[str, Any]:
    """The approval task once it waits for a person (fails when the run ends or the time is up first)."""
    deadline = time.monotonic() + timeout
    while True:
        tis = {t["task_id"]: t for t in stack.api.task_instances(TRIAGE_DAG, run_id)}
        ti = tis.get(APPROVAL_TASK) or {}
        if ti.get("state") in WAITING_FOR_INPUT:
            return ti
        run = stack.api.run(TRIAGE_DAG, run_id)
        assert run["state"] not in TERMINAL_RUN_STATES, (
            f"the triage run ended ({run['state']}) without asking: "
            + ", ".join(f"{k}={v.get('state')}" for k, v in tis.items()))
        assert time.monotonic() < deadline, f"{APPROVAL_TASK} did not wait for input within {timeout:.0f}s: {ti}"
        time.sleep(1)


def stored_json(value: Any) -> Any:
    """A JSON column of the warehouse as a plain SQL query returns it (text)."""
    return json.loads(value) if isinstance(value, str) else value


def wait_until_the_scheduler_saw_the_pause(stack: Stack, run_id: str, try_number: int,
                                          timeout: float = 120.0) -> None:
    """Wait until the scheduler has processed the executor's event of the approval task's pause.

    Airflow 3.3 ends the task's process when it pauses for input; an answer given before the scheduler has
    processed that process's exit is resumed and then failed by the stale event (the task retries and asks again,
    the answer lost: apache/airflow#71580). A person takes longer than that; a test clicks within seconds, so it
    waits for the scheduler's log line first.
    """
    key = (f"Received executor event with state success for task instance TaskInstanceKey(dag_id='{TRIAGE_DAG}', "
           f"task_id='{APPROVAL_TASK}', run_id='{run_id}', try_number={try_number}")
    log = stack.log_of("scheduler")
    deadline = time.monotonic() + timeout
    while key not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"the scheduler did not log {key!r} within {timeout:.0f}s ({log})"
        time.sleep(0.5)


def approvals_waiting(page: Any) -> Any:
    """The "Approvals waiting" number of the page's dashboard (the overview's, or the home page widget's)."""
    return page.get_by_text("Approvals waiting", exact=True).first.locator("xpath=..").locator("a")


def test_an_approval_waiting_is_approved_from_the_ui_and_its_write_happens(
        browser_page: Any, e2e_stack: Stack, pipeline: PipelineResult) -> None:
    from playwright.sync_api import expect

    stack, page = e2e_stack, browser_page
    engine = warehouse_engine(stack)
    try:
        chosen = {int(r["finding_id"]) for r in rows(
            engine, "SELECT finding_id FROM write_ledger WHERE kind = 'triage' AND issue_type = 'sast' "
                    "ORDER BY finding_id LIMIT :n", n=REINTRODUCED)}
        assert len(chosen) == REINTRODUCED, "the session's pipeline triaged no false positives"

        # the extraction's findings Asset must not start a triage that needs no approval (nor tickets after it):
        # a paused DAG is not queued for an Asset event
        for dag_id in (TRIAGE_DAG, TICKET_DAG):
            stack.api.set_paused(dag_id, True)
        with stack.emulator_admin() as admin:
            for finding_id in chosen:
                admin.person_acts(finding_id, reintroduce=True)  # as a scan finding it again would
        extraction = stack.api.trigger(EXTRACTION_DAG, note="e2e: the approval test's extraction")
        watch = stack.api.wait_for_run(EXTRACTION_DAG, extraction["dag_run_id"], timeout=300)
        assert watch.state == "success", watch.summary()
        reopened = {int(r["id"]) for r in rows(engine, "SELECT id FROM findings WHERE issue_type = 'sast' AND "
                                                       "status = 'open' AND autotriage_verdict = 'false_positive'")}
        assert reopened == chosen

        stack.api.set_paused(TRIAGE_DAG, False)
        seq_before = request_seq(stack)
        run_id = stack.api.trigger(TRIAGE_DAG, conf={"approval_threshold": THRESHOLD},
                                   note="e2e: a triage above its approval threshold")["dag_run_id"]
        asking = wait_for_input(stack, run_id)
        assert triage_requests(stack, seq_before) == [], "the triage was sent before anyone approved it"

        # the home page widget counts it; the dashboard's overview lists it, and its link opens Airflow's Required
        # Actions tab of the task
        page.goto(f"{stack.ui_url}/")
        expect(approvals_waiting(page)).to_have_text("1", timeout=TIMEOUT_MS)
        page.goto(f"{stack.ui_url}/plugin/findings")
        app = page.locator("[data-testid=findings-dashboard]")
        expect(approvals_waiting(page)).to_have_text("1", timeout=TIMEOUT_MS)
        row = app.locator("#approvals tr", has_text=run_id)
        expect(row).to_have_count(1, timeout=TIMEOUT_MS)
        request = row.locator("a").first
        match = STATED_COUNT.search(request.inner_text())
        assert match, request.inner_text()
        stated = int(match.group(1))
        page.screenshot(path=str(SCREENSHOTS / "11-approval-waiting.png"), full_page=True)
        request.click()
        page.wait_for_url(re.compile(rf"/dags/{TRIAGE_DAG}/runs/.+/tasks/{APPROVAL_TASK}/required_actions"),
                          timeout=TIMEOUT_MS)
        expect(page.get_by_text(f"Approve to triage {stated} findings")).to_be_visible(timeout=TIMEOUT_MS)
        approve = page.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_enabled(timeout=TIMEOUT_MS)
        page.screenshot(path=str(SCREENSHOTS / "12-required-action.png"), full_page=True)
        assert triage_requests(stack, seq_before) == []  # still nothing sent: only the click approves
        wait_until_the_scheduler_saw_the_pause(stack, run_id, asking["try_number"])
        approve.click()
        expect(page.get_by_text(f"{APPROVAL_TASK} response successful")).to_be_visible(timeout=TIMEOUT_MS)

        watch = stack.api.wait_for_run(TRIAGE_DAG, run_id, timeout=300)
        assert watch.state == "success", watch.summary()
        page.screenshot(path=str(SCREENSHOTS / "13-required-action-answered.png"), full_page=True)

        # the write: bulk triage of exactly the findings the approval named, as many as it said
        sent = triage_requests(stack, seq_before)
        assert sent, "no bulk triage request after the approval"
        assert all(str(r["status"]) == "200" for r in sent), sent
        ids = [int(i) for r in sent for i in r["body"]["issue_ids"]]
        assert sorted(ids) == sorted(chosen)
        assert len(ids) == stated == REINTRODUCED

        # the warehouse records the approval and the outcome
        [plan] = rows(engine, "SELECT value FROM pipeline_state WHERE key = :key", key=plan_key(TRIAGE, run_id))
        decision = stored_json(plan["value"])["decision"]
        assert decision["approved"] is True
        assert decision["by"] == stack.username
        actions = rows(engine, "SELECT status, num_triaged, issue_ids FROM triage_actions WHERE run_id = :run_id",
                       run_id=run_id)
        assert actions
        assert {a["status"] for a in actions} == {"succeeded"}, actions
        recorded = [int(i) for a in actions for i in stored_json(a["issue_ids"])]
        assert sorted(recorded) == sorted(chosen)
        still_open = rows(engine, "SELECT id FROM findings WHERE issue_type = 'sast' AND status = 'open' AND "
                                  "autotriage_verdict = 'false_positive'")
        assert still_open == []

        # nothing waits any more: the overview and the home page widget say 0
        page.goto(f"{stack.ui_url}/plugin/findings")
        expect(approvals_waiting(page)).to_have_text("0", timeout=TIMEOUT_MS)
        expect(app.locator("#approvals")).to_contain_text("No approval is waiting.")
        page.goto(f"{stack.ui_url}/")
        expect(approvals_waiting(page)).to_have_text("0", timeout=TIMEOUT_MS)
    finally:
        engine.dispose()
        for dag_id in (TRIAGE_DAG, TICKET_DAG):
            stack.api.set_paused(dag_id, False)  # as the pipeline left them
