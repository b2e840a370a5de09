"""End to end on a real Airflow: LocalExecutor on SQLite, every component a subprocess, the emulator as the API.

The session's stack (``e2e_stack``) is started once; the ``pipeline`` fixture triggers the seven DAGs through the
REST API once (see ``helpers.run_pipeline``); each test below checks one part of the outcome: run states, the
warehouse (SQLite file), the emulator's state (its API and its request log), the scan sensor's deferral.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from findings_provider.names import PIPELINE_DAGS
from smtp_inbox import Mailbox

from devtools.airflow_api import ApiError, RunWatch
from devtools.environment import POOL_NAME, POOL_SLOTS
from devtools.stack import Stack

from .helpers import (
    ALERTS_TO,
    SCAN_MONITORING_DEADLINE_MINUTES,
    SCAN_TRIGGER_CLASSPATH,
    SENSOR_TASK,
    PipelineResult,
    rows,
    scalar,
    warehouse_engine,
)

pytestmark = pytest.mark.e2e

OPEN = "open"


# --- helpers reading the emulator ----------------------------------------------------------------------------


def emulator_api(stack: Stack) -> httpx.Client:
    assert stack.emulator is not None
    return httpx.Client(base_url=stack.emulator.url, timeout=60,
                        headers={"Authorization": f"Bearer {stack.emulator.token}"})


def emulator_findings(stack: Stack, issue_type: str) -> list[dict[str, Any]]:
    """Every finding of ``issue_type`` as the emulator serves it now (pages of 3000)."""
    slug = stack.emulator.deployment_slug  # type: ignore[union-attr]
    found: list[dict[str, Any]] = []
    with emulator_api(stack) as api:
        page = 0
        while True:
            r = api.get(f"/api/v1/deployments/{slug}/findings",
                        params={"issue_type": issue_type, "page": page, "page_size": 3000})
            r.raise_for_status()
            items = _page_items(r.json(), issue_type)
            found += items
            if not items or len(items) < 3000:
                return found
            page += 1


_PAGE_KEYS = {"sast": "sastFindings", "sca": "scaFindings"}


def _page_items(body: Any, issue_type: str) -> list[dict[str, Any]]:
    """A findings page's items: ``{"sastFindings": {"findings": [...]}, "scaFindings": {...}}``, or the flat
    ``{"findings": [...]}`` of ``--flat-findings``."""
    if isinstance(body.get("findings"), list):
        return body["findings"]
    return (body.get(_PAGE_KEYS[issue_type]) or {}).get("findings") or []


def verdict(finding: dict[str, Any]) -> str | None:
    return (((finding.get("assistant") or {}).get("autotriage")) or {}).get("verdict")


def emulator_requests(stack: Stack, since: int = 0) -> list[dict[str, Any]]:
    with stack.emulator_admin() as admin:
        return admin.requests(since=since)


def failure_detail(stack: Stack, watch: RunWatch) -> str:
    """The run's task states plus the tail of the log of each failed task instance (for assertion messages)."""
    text = [watch.summary()]
    for ti in watch.task_instances:
        if ti.get("state") in ("failed", "upstream_failed") and ti.get("try_number"):
            try:
                log = stack.api.ti_log(watch.dag_id, watch.run_id, ti["task_id"], ti["try_number"],
                                       ti.get("map_index", -1))
            except ApiError as exc:
                log = str(exc)
            text.append(f"--- log of {ti['task_id']}[{ti.get('map_index', -1)}]:\n" + log[-3000:])
    return "\n".join(text)


# --- the stack itself ----------------------------------------------------------------------------------------


def test_every_component_reports_healthy(e2e_stack: Stack) -> None:
    health = e2e_stack.api.health()
    assert {k: v.get("status") for k, v in health.items()} == {
        "metadatabase": "healthy", "scheduler": "healthy", "triggerer": "healthy", "dag_processor": "healthy",
    }
    import airflow

    assert e2e_stack.api.version()["version"] == airflow.__version__


def test_dags_provider_and_pool_are_registered(e2e_stack: Stack) -> None:
    api = e2e_stack.api
    assert set(PIPELINE_DAGS) <= set(api.dag_ids())
    assert api.import_errors() == []
    providers = {p["package_name"] for p in api.get("/api/v2/providers", limit=200)["providers"]}
    assert "findings-airflow" in providers
    pool = api.pool(POOL_NAME)
    assert (pool["slots"], pool["include_deferred"]) == (POOL_SLOTS, True)


def test_connection_test_through_the_rest_api(e2e_stack: Stack) -> None:
    """Test Connection (enabled by the stack) runs the provider hook's test_connection in the API server."""
    conn = e2e_stack.api_connection()
    assert conn is not None
    body = {"connection_id": "findings_api_default", "conn_type": conn["conn_type"], "host": conn["host"],
            "password": conn["password"], "extra": json.dumps(conn["extra"])}
    ok = e2e_stack.api.request("POST", "/api/v2/connections/test", json=body).json()
    assert ok["status"] is True, ok
    wrong = {**body, "password": "wrong-token-value"}
    bad = e2e_stack.api.request("POST", "/api/v2/connections/test", json=wrong).json()
    assert bad["status"] is False
    assert "401" in bad["message"]


# --- run states ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dag_id", PIPELINE_DAGS)
def test_dag_run_triggered_through_rest_succeeds(e2e_stack: Stack, pipeline: PipelineResult, dag_id: str) -> None:
    watch = pipeline.manual.get(dag_id)
    assert watch is not None, f"{dag_id} was not triggered:\n{pipeline.summary()}"
    assert watch.run.get("run_type") == "manual"
    assert watch.state == "success", failure_detail(e2e_stack, watch)
    assert not [t for t in watch.task_instances if t.get("state") in ("failed", "upstream_failed")]


def test_asset_chain_scheduled_the_next_stages(pipeline: PipelineResult) -> None:
    """scan_monitoring -> (scans Asset) findings_extraction -> (findings) autotriage_triage -> (triage) tickets."""
    for dag_id in ("findings_extraction", "autotriage_triage", "ticket_creation"):
        asset_runs = pipeline.runs_of(dag_id, "asset_triggered")
        assert asset_runs, f"no Asset-triggered run of {dag_id}:\n{pipeline.summary()}"
        assert {r["state"] for r in asset_runs} == {"success"}, pipeline.summary()
    assert not pipeline.errors, pipeline.summary()


def test_no_run_of_the_session_failed(pipeline: PipelineResult) -> None:
    """Failed scans included: they are alerted, they do not fail a run."""
    failed = [(d, r["dag_run_id"]) for d, runs in pipeline.all_runs.items() for r in runs if r["state"] != "success"]
    assert failed == [], pipeline.summary()


# --- the deferrable scan sensor -----------------------------------------------------------------------------------


def _log_events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def test_scan_sensor_deferred_and_resumed_through_the_triggerer(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    """Evidence that would not exist had the sensor not deferred and resumed (all of it is required):

    1. while the suite polled the REST API, the mapped sensor instance was seen ``deferred``, with a trigger of
       class ``ScanStatusTrigger`` assigned to a triggerer job (the TI's ``trigger`` and ``triggerer_job`` fields,
       set only while it is deferred);
    2. the triggerer wrote that instance's trigger log, ``attempt=1.log.trigger.<that triggerer job id>.log`` (no
       other process writes it), in which the trigger fired with the scan's ``SCAN_STATUS_COMPLETED``;
    3. the worker's log of the SAME attempt shows ``Pausing task as DEFERRED`` and, after it, the resumed
       execution (``execute_complete``) logging the finished scan; the task log served by the REST API merges the
       triggerer's lines (``trigger completed``);
    4. the emulator served the scan's status several times (the trigger's polls) before it finished.
    """
    watch = pipeline.manual["scan_monitoring"]
    assert watch.state == "success", failure_detail(e2e_stack, watch)
    scan_id = str(pipeline.created_scan["id"])
    sensors = {ti["map_index"]: ti for ti in watch.tis_of(SENSOR_TASK)}
    assert sensors, watch.summary()
    logs = e2e_stack.home / "logs" / f"dag_id={watch.dag_id}" / f"run_id={watch.run_id}" / f"task_id={SENSOR_TASK}"

    proofs = []
    for mi, ti in sensors.items():
        key = (SENSOR_TASK, mi)
        seen, deferral = watch.states.get(key, []), watch.deferrals.get(key)
        if "deferred" not in seen or not deferral:
            continue
        # 1. observed deferred, with the provider's trigger, in a triggerer job
        assert deferral["classpath"] == SCAN_TRIGGER_CLASSPATH, deferral
        assert deferral.get("triggerer_job_id"), deferral
        assert seen[-1] == "success", seen
        # 2. the triggerer's own log of this instance: the trigger fired with the scan completed
        trigger_log = logs / f"map_index={mi}" / f"attempt=1.log.trigger.{deferral['triggerer_job_id']}.log"
        assert trigger_log.is_file(), sorted(p.name for p in (logs / f"map_index={mi}").glob("*"))
        fired = [e for e in _log_events(trigger_log) if e.get("event") == "Trigger fired event"]
        assert fired, trigger_log.read_text()[-2000:]
        assert scan_id in str(fired[-1].get("result")), fired
        assert "SCAN_STATUS_COMPLETED" in str(fired[-1].get("result")), fired
        # 3. the same attempt paused as deferred, then resumed and saw the scan finished
        events = [str(e.get("event")) for e in _log_events(logs / f"map_index={mi}" / "attempt=1.log")]
        paused = [i for i, e in enumerate(events) if "Pausing task as DEFERRED" in e]
        assert paused, events[-20:]
        resumed = [e for e in events[paused[0] + 1 :] if "finished" in e and scan_id in e]
        assert resumed, f"attempt 1 did not resume after the deferral: {events[paused[0]:][:30]}"
        api_log = e2e_stack.api.ti_log(watch.dag_id, watch.run_id, SENSOR_TASK, 1, mi)
        assert "trigger completed" in api_log, api_log[-2000:]
        if ti["try_number"] != 1:
            # apache/airflow#71580 / #72716 (3.3.x): a stale executor event from the deferring process can mark the
            # resumed attempt up_for_retry; the retry then succeeds. The deferral itself is proven above.
            print(f"note: {SENSOR_TASK}[{mi}] needed try {ti['try_number']} (Airflow issue 71580)")
        proofs.append((mi, seen, deferral))
    assert proofs, f"no instance of {SENSOR_TASK} was seen deferred:\n{watch.summary()}\n{watch.deferrals}"

    # 4. the trigger polled the scan's status while it was running
    scan_gets = [r for r in emulator_requests(e2e_stack, pipeline.request_seq_before)
                 if r.get("operation") == "scan_get" and str(r.get("path", "")).endswith(f"/{scan_id}")]
    assert len(scan_gets) >= 3, scan_gets


def test_a_failed_scan_is_mailed_and_the_monitoring_run_stays_green(e2e_stack: Stack, pipeline: PipelineResult,
                                                                     inbox: Mailbox) -> None:
    """A scan that ends in SCAN_STATUS_ERROR while the run waits: the run succeeds, and the alert, naming the scan,
    reaches the SMTP server the stack's ``smtp_default`` connection points to."""
    watch = pipeline.extra["scan_monitoring"]
    states = {(t["task_id"], t["map_index"]): t["state"] for t in watch.task_instances}
    assert watch.state == "success", watch.summary()
    assert all(s in ("success", "skipped") for s in states.values()), watch.summary()
    scan_id = str(pipeline.failing_scan["id"])
    log = e2e_stack.api.ti_log(watch.dag_id, watch.run_id, "alert_failed_scans", 1)
    assert scan_id in log, log[-2000:]
    mails = inbox.wait_for(lambda m: f"scan {scan_id} SCAN_STATUS_ERROR" in m.text, timeout=60)
    assert len(mails) == 1, [m.subject for m in inbox.mails()]
    assert mails[0].subject.endswith("scan(s) failed or never finished")
    assert mails[0].recipients == (ALERTS_TO,)


def test_a_missed_deadline_is_mailed_by_the_scheduler_and_triggerer(e2e_stack: Stack, pipeline: PipelineResult,
                                                                     inbox: Mailbox) -> None:
    """scan_monitoring has a Deadline alert of a few seconds in this stack (its runs wait for scans much longer):
    the real scheduler sees the deadline pass and the triggerer runs our callback, which mails the alert."""
    watch = pipeline.manual["scan_monitoring"]
    assert watch.state == "success", watch.summary()  # a missed deadline alerts; it does not fail the run
    subject = f"scan_monitoring run {watch.run_id} not finished {SCAN_MONITORING_DEADLINE_MINUTES:g} minutes"
    mails = inbox.wait_for(lambda m: m.subject.startswith(subject), timeout=120)
    assert len(mails) == 1, [m.subject for m in inbox.mails()]
    assert mails[0].recipients == (ALERTS_TO,)


def test_failed_scan_is_alerted_when_no_scan_is_running(e2e_stack: Stack, pipeline: PipelineResult,
                                                        inbox: Mailbox) -> None:
    """A scan that already ended in error and nothing left running: the mapped sensor expands to zero
    instances (skipped), and the refresh and alert tasks must still run, so the failure reaches people."""
    with e2e_stack.emulator_admin() as admin:
        scan = admin.create_scan(status="SCAN_STATUS_ERROR", exit_code=7, branch="release/broken")
    run = e2e_stack.api.trigger("scan_monitoring")
    watch = e2e_stack.api.wait_for_run("scan_monitoring", run["dag_run_id"], timeout=240,
                                       alive=e2e_stack.check_alive)
    states = {(t["task_id"], t["map_index"]): t["state"] for t in watch.task_instances}
    assert states[("wait_for_scan", -1)] == "skipped", watch.summary()  # nothing to wait for
    assert states[("refresh_scans", -1)] == "success", watch.summary()
    assert states[("alert_failed_scans", -1)] == "success", watch.summary()
    assert watch.state == "success"
    (mail,) = inbox.wait_for(lambda m: f"scan {scan['id']} SCAN_STATUS_ERROR" in m.text, timeout=60)
    assert "branch release/broken" in mail.text


# --- warehouse and emulator state -------------------------------------------------------------------------------


def test_findings_extraction_mirrors_the_api_in_the_warehouse(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    engine = warehouse_engine(e2e_stack)
    with e2e_stack.emulator_admin() as admin:
        counts = admin.stats()["counts"]["findings"]
    stored = {r["issue_type"]: r["n"] for r in rows(engine, "SELECT issue_type, COUNT(*) AS n FROM findings "
                                                               "GROUP BY issue_type")}
    assert stored == {"sast": counts["sast"], "sca": counts["sca"]}  # secrets are not in the default issue_types
    # raw keeps the finding's JSON as received; key columns are filled from it
    sample = rows(engine, "SELECT id, issue_type, status, severity, raw FROM findings ORDER BY id LIMIT 50")
    for row in sample:
        raw = json.loads(row["raw"])
        assert (str(raw["id"]), raw["status"], raw["severity"]) == (str(row["id"]), row["status"], row["severity"])
    # paged by 3000: two pages of code findings on the first (full) pull
    pulls = [r for r in emulator_requests(e2e_stack, pipeline.request_seq_before) if r.get("operation") == "findings"]
    sast_pages = {str(r["query"].get("page")) for r in pulls if r["query"].get("issue_type") == ["sast"]}
    assert {"['0']", "['1']"} <= sast_pages or {"0", "1"} <= sast_pages, pulls
    assert all(r["query"].get("page_size") in (["3000"], "3000") for r in pulls), pulls


def test_scans_are_in_the_warehouse(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    engine = warehouse_engine(e2e_stack)
    created, failing = str(pipeline.created_scan["id"]), str(pipeline.failing_scan["id"])
    status = {str(r["id"]): r["status"] for r in rows(engine, "SELECT id, status FROM scans")}
    assert status.get(created) == "SCAN_STATUS_COMPLETED", status
    assert status.get(failing) == "SCAN_STATUS_ERROR", status


def test_autotriage_ignored_open_false_positives_and_nothing_else(e2e_stack: Stack,
                                                                  pipeline: PipelineResult) -> None:
    findings = emulator_findings(e2e_stack, "sast")
    still_open = [f["id"] for f in findings if f["status"] == OPEN and verdict(f) == "false_positive"]
    assert still_open == [], f"{len(still_open)} open false positives left untriaged"
    by_dag = [f for f in findings if "autotriage_triage run" in (f.get("triage_comment") or "")]
    assert by_dag, "no finding carries the DAG's triage note"
    assert {verdict(f) for f in by_dag} == {"false_positive"}
    assert {(f["triage_state"], f["triage_reason"]) for f in by_dag} == {("ignored", "false_positive")}

    engine = warehouse_engine(e2e_stack)
    actions = rows(engine, "SELECT dag_id, issue_type, dry_run, num_triaged, status FROM triage_actions")
    assert actions
    assert {a["dag_id"] for a in actions} == {"autotriage_triage"}
    assert all(a["status"] == "succeeded" and not a["dry_run"] for a in actions), actions
    assert sum(a["num_triaged"] or 0 for a in actions) == len(by_dag)
    triage_calls = [r for r in emulator_requests(e2e_stack, pipeline.request_seq_before)
                    if r.get("operation") == "triage"]
    assert len(triage_calls) == len([a for a in actions if a["num_triaged"]])


def _needs_ticket(f: dict[str, Any], issue_type: str) -> bool:
    if f["status"] != OPEN or f["severity"] not in ("high", "critical"):
        return False
    if issue_type == "sast":
        return verdict(f) == "true_positive"
    return f.get("reachability") in ("reachable", "always_reachable")


def test_tickets_were_created_for_findings_that_need_work(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    engine = warehouse_engine(e2e_stack)
    done = {(r["issue_type"], str(r["finding_id"])) for r in rows(
        engine, "SELECT issue_type, finding_id FROM ticket_actions WHERE outcome = 'succeeded'")}
    assert done, "no ticket_actions row with outcome succeeded"
    for issue_type in ("sast", "sca"):
        findings = emulator_findings(e2e_stack, issue_type)
        without = [f["id"] for f in findings if _needs_ticket(f, issue_type) and not f.get("external_ticket")]
        assert without == [], f"{issue_type}: {len(without)} findings that need work still have no ticket"
        ticketed = {str(f["id"]) for f in findings if f.get("external_ticket")}
        missing = {fid for it, fid in done if it == issue_type} - ticketed
        assert not missing, f"{issue_type}: ticket_actions says succeeded but the API has no ticket: {missing}"
    calls = [r for r in emulator_requests(e2e_stack, pipeline.request_seq_before) if r.get("operation") == "tickets"]
    assert calls
    assert all(str(r["status"]) == "200" for r in calls)
    # grouped, at most 20 tickets per call (pipeline.yaml: tickets_per_call 20, group_issues true)
    for call in calls:
        body = call["body"] if isinstance(call["body"], dict) else {}
        if body:
            assert body.get("group_issues", True) is True


def test_policy_tuning_dry_run_changed_no_rule(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    watch = pipeline.manual["policy_tuning"]
    assert watch.ti("approve_policy_changes")["state"] == "skipped", watch.summary()  # a dry run asks no one
    assert watch.ti("apply_policy_changes")["state"] == "success", watch.summary()  # and applies nothing
    calls = Counter(r.get("operation") for r in emulator_requests(e2e_stack, pipeline.request_seq_before))
    assert calls["policy_update"] == 0
    assert calls["policies_list"] >= 1
    assert calls["policy_rules"] >= 1
    engine = warehouse_engine(e2e_stack)
    with e2e_stack.emulator_admin() as admin:
        rules = admin.stats()["counts"]["rules"]
    assert scalar(engine, "SELECT COUNT(*) FROM policy_rules") == rules
    assert scalar(engine, "SELECT COUNT(*) FROM policy_changes WHERE status = 'applied'") in (0, None)


def test_project_settings_match_projects_yaml(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    from findings_provider.config import load_pipeline_config, load_projects_file

    cfg = load_pipeline_config(e2e_stack.pipeline_config)
    wanted = load_projects_file(cfg)
    slug = e2e_stack.emulator.deployment_slug  # type: ignore[union-attr]
    with emulator_api(e2e_stack) as api:
        projects = api.get(f"/api/v1/deployments/{slug}/projects", params={"page_size": 100}).json()["projects"]
    assert projects
    checked = 0
    for project in projects:
        rule = wanted.desired(project["name"])
        if rule is None:
            continue
        scans = project.get("managed_scan_config") or {}
        if rule.tags is not None:
            managed = set(wanted.managed_tags)
            assert set(project["tags"]) & managed == set(rule.tags), project
        if rule.diff_scan is not None:
            assert scans["diff_scan"]["enabled"] is rule.diff_scan, project
        if rule.full_scan is not None:
            assert scans["full_scan"]["enabled"] is rule.full_scan, project
        checked += 1
    assert checked == len(projects)  # projects.yaml has a "*" entry


def test_dependency_inventory_mirrors_the_api(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    engine = warehouse_engine(e2e_stack)
    with e2e_stack.emulator_admin() as admin:
        counts = admin.stats()["counts"]
    assert scalar(engine, "SELECT COUNT(*) FROM dependencies") == counts["dependencies"]
    assert scalar(engine, "SELECT COUNT(*) FROM dependency_repositories") >= 1


def test_sbom_exports_deferred_and_were_downloaded_without_the_token(e2e_stack: Stack,
                                                                     pipeline: PipelineResult) -> None:
    """dependency_inventory's export_sboms waited in the triggerer (the worker's log of attempt 1 paused as
    deferred, the triggerer wrote that attempt's trigger log and the trigger fired), every repository with
    dependencies has a completed SBOM with components in the warehouse, and no download carried the API token."""
    watch = pipeline.manual["dependency_inventory"]
    assert watch.state == "success", failure_detail(e2e_stack, watch)
    logs = e2e_stack.home / "logs" / f"dag_id={watch.dag_id}" / f"run_id={watch.run_id}" / "task_id=export_sboms"
    events = [str(e.get("event")) for e in _log_events(logs / "attempt=1.log")]
    assert any("Pausing task as DEFERRED" in e for e in events), events[-20:]
    trigger_logs = sorted(logs.glob("attempt=1.log.trigger.*.log"))
    assert trigger_logs, sorted(p.name for p in logs.glob("*"))
    assert [e for p in trigger_logs for e in _log_events(p) if e.get("event") == "Trigger fired event"]
    engine = warehouse_engine(e2e_stack)
    try:
        wanted = {int(r["id"]) for r in rows(engine, "SELECT id FROM dependency_repositories "
                                                     "WHERE num_dependencies > 0")}
        exported = {int(r["repository_id"]) for r in rows(engine, "SELECT repository_id FROM sboms "
                                                                   "WHERE status = 'completed'")}
        components = scalar(engine, "SELECT COUNT(*) FROM sbom_components")
    finally:
        engine.dispose()
    assert wanted
    assert exported == wanted
    assert components > 0
    downloads = [r for r in emulator_requests(e2e_stack, pipeline.request_seq_before)
                 if "/downloads/sbom/" in str(r.get("path", ""))]
    assert len(downloads) >= len(wanted)
    assert not [r for r in downloads if r.get("authorization_sent")]


def test_reports_were_written(e2e_stack: Stack, pipeline: PipelineResult) -> None:
    reports = Path(e2e_stack.home / "reports")
    html = sorted(p.relative_to(reports).as_posix() for p in reports.rglob("*.html"))
    assert any("findings_summary" in p for p in html), html
    assert any(p.startswith("dependency_inventory/") for p in html), html
    assert any(p.startswith("policy_tuning/") for p in html), html
    engine = warehouse_engine(e2e_stack)  # and in the warehouse, where the dashboard on the API server reads them
    try:
        stored = {r["name"] for r in rows(engine, "SELECT name FROM reports")}
    finally:
        engine.dispose()
    assert {"findings_summary", "dependency_inventory", "policy_tuning"} <= stored
