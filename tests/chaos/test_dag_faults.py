"""The four pipeline DAGs under injected faults (``dag.test()`` against the emulator).

For every DAG: bursts of 429 with ``Retry-After`` and 500/502/503, slow responses beyond the client's timeout,
dropped connections (before and after the server acted) and truncated bodies, at fixed schedules, an outage
longer than the client's retries, and a seeded random fault rate. Each run either succeeds, and then the
warehouse is complete and exact at once, or fails loudly (a failed task, a typed error in its log), and a rerun
completes it. Triage never touches a finding its policy does not select; no finding gets two tickets.

Task retries are switched off, so a failure shows in the run itself and the test reruns (what Airflow's task
retries or the next scheduled run do in production); the client's retries stay on (connection extras:
``max_retries`` 3, ``timeout`` 1 s).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.pipeline import extraction
from fixtures import client_of, connection_env, make_warehouse
from present import present

from chaos.dagrun import RunResult, Stack, dag_stack
from chaos.harness import (
    FAULT_KINDS,
    _instant,
    api_requests,
    assert_complete_and_exact,
    assert_no_double_tickets,
    fetch_findings,
    ground_truth,
    settle,
    start_emulator,
    tally,
    ticket_counts,
    ticket_selection,
    warehouse_findings,
    warehouse_rows,
    warehouse_state,
)

pytestmark = pytest.mark.chaos

CHAOS_CONFIG = {
    "findings_extraction": {"page_size": 100},     # several pages per pull
    "autotriage_triage": {"chunk_size": 10},       # several triage requests per run
    "ticket_creation": {"tickets_per_call": 3},    # several ticket requests per run
}
MAX_RUNS = 5
LATENCY = 1.5  # beyond the connection's 1 s timeout

# Fixed schedules (one rule on the DAG's operations); the seeded random rate is separate.
SCHEDULES: dict[str, dict[str, Any]] = {
    "bursts-429-5xx": {"schedule": ["429", "429", "ok", "500", "502", "ok", "503", "429"], "retry_after": 0.3},
    "slow-drop-truncate": {"schedule": ["latency", "ok", "drop", "ok", "drop_after", "ok", "truncate"],
                           "latency": LATENCY},
    "outage-beyond-retries": {"schedule": ["503"] * 6},
}
RANDOM = {"probability": 0.3, "kinds": list(FAULT_KINDS), "retry_after": 0.2, "latency": LATENCY}
OPERATIONS = {
    "scan_monitoring": ["scans_search", "scan_get"],
    "findings_extraction": ["findings"],
    "autotriage_triage": ["triage"],
    "ticket_creation": ["tickets"],
}
#: Tasks whose failure is the DAG doing its job, not a fault (none: failed scans are alerted, the run stays green).
BY_DESIGN: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with start_emulator(findings=300) as emu, dag_stack(tmp_path_factory.mktemp("chaos-dags"), emu,
                                                        config=CHAOS_CONFIG) as st:
        yield st


@pytest.fixture
def env(stack: Stack, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A fresh emulator state and a warehouse file of this test's own, for the runner's connections."""
    stack.emulator.reset()
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    stack.warehouse = stack.work / f"warehouse-{name}.db"
    yield {**stack.connect(), **connection_env(warehouse=stack.warehouse)}
    settle(stack.emulator)


def add_faults(emu: EmulatorProcess, dag_id: str, scenario: str, seed: int) -> None:
    for operation in OPERATIONS[dag_id]:
        if scenario == "random":
            emu.add_fault(operation=operation, seed=seed, **RANDOM)
        else:
            emu.add_fault(operation=operation, **SCHEDULES[scenario])


def core_ok(dag_id: str, result: RunResult) -> bool:
    """The run did its work: no task failed except those failing by design."""
    failed = set(result.failed_tasks()) - BY_DESIGN.get(dag_id, set())
    return not failed and not result.error and result.state in ("success", "failed")


def run_until_complete(stack: Stack, dag_id: str, env: dict[str, str], check: Any, **kwargs: Any) -> int:
    """Run the DAG until a run does its work; each failed run must be loud, each successful one is ``check``ed.

    Returns the number of runs.
    """
    for number in range(1, MAX_RUNS + 1):
        result = stack.run(dag_id, env=env if number == 1 else None, **kwargs)
        assert not result.error, result.message
        if core_ok(dag_id, result):
            check(result)
            return number
        tally(f"dag_runs.failed_loudly.{dag_id}")
        assert result.state == "failed", result
        assert any(word in result.output for word in ("Error", "error", "Exception")), "a silent failure"
    pytest.fail(f"{dag_id}: {MAX_RUNS} runs in a row failed: {result.tis}\n{result.output[-3000:]}")


def api_client(emu: EmulatorProcess) -> FindingsClient:
    return client_of(emu, retry_policy=RetryPolicy(max_retries=0, rng=random.Random(0)))


def preload(stack: Stack) -> None:
    """Fill the warehouse fault-free (the state triage and ticket creation start from)."""
    warehouse = make_warehouse(stack.warehouse)
    with api_client(stack.emulator) as client:
        extraction.run_extraction(client, warehouse, ["sast", "sca"], page_size=3000)
    warehouse.engine.dispose()


SCENARIOS = [*SCHEDULES, "random"]


# --- findings_extraction ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_extraction_under_faults_is_complete_and_exact(stack: Stack, env: dict[str, str], scenario: str) -> None:
    emu = stack.emulator
    truth = ground_truth(emu)
    add_faults(emu, "findings_extraction", scenario, seed=21)
    tally("dag_fault_scenarios.findings_extraction")

    def check(_result: RunResult) -> None:
        assert_complete_and_exact(truth, stack.warehouse)
        for issue_type in ("sast", "sca"):
            mark = warehouse_state(stack.warehouse, f"findings_extraction.watermark.{issue_type}")
            newest = max(present(_instant(f["relevant_since"])) for (t, _), f in truth.items() if t == issue_type)
            assert mark is not None
            assert _instant(mark) == newest  # the newest finding seen: not later (it would skip), not earlier

    runs = run_until_complete(stack, "findings_extraction", env, check)
    settle(emu)
    injected = [e["fault"] for e in api_requests(emu, "findings") if e["fault"]]
    assert injected, "no fault was injected"
    tally("dag_faults_injected.findings_extraction", len(injected))
    if scenario == "outage-beyond-retries":
        assert runs >= 2  # the outage outlasted the client's retries: the first run failed


# --- autotriage_triage --------------------------------------------------------------------------------------------


def policy_selection(emu: EmulatorProcess) -> set[int]:
    """What the default triage policy selects: open code findings with autotriage verdict false_positive."""
    return {i for i, f in fetch_findings(emu, "sast").items()
            if f["status"] == "open" and ((f.get("assistant") or {}).get("autotriage") or {}).get("verdict")
            == "false_positive"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_triage_under_faults_touches_exactly_the_policy_selection(stack: Stack, env: dict[str, str],
                                                                  scenario: str) -> None:
    emu = stack.emulator
    preload(stack)
    selected = policy_selection(emu)
    assert len(selected) > 10  # several requests of 10 ids
    emu.clear_requests()
    add_faults(emu, "autotriage_triage", scenario, seed=22)
    tally("dag_fault_scenarios.autotriage_triage")

    def check(result: RunResult) -> None:
        settle(emu)
        sent = [int(i) for e in api_requests(emu, "triage") for i in (e["body"] or {}).get("issue_ids", [])]
        assert set(sent) <= selected, f"triaged outside the policy: {sorted(set(sent) - selected)[:10]}"
        assert all(e["body"]["new_triage_state"] == "ignored" for e in api_requests(emu, "triage"))
        after = fetch_findings(emu, "sast")
        assert all(after[i]["status"] == "ignored" and after[i]["triage_reason"] == "false_positive"
                   for i in selected), "a selected finding was not triaged"
        # every finding the server changed is a selected one or a same-fingerprint twin of one
        fingerprints = {after[i]["match_based_id"] for i in selected}
        changed = {i for i, f in after.items() if f["status"] == "ignored" and f.get("triage_comment", "")
                   .startswith("Ignored automatically")}
        assert all(i in selected or after[i]["match_based_id"] in fingerprints for i in changed)
        # the warehouse agrees with the service on every code finding
        stored = {r["id"]: r for r in warehouse_findings(stack.warehouse) if r["issue_type"] == "sast"}
        differ = [i for i, f in after.items()
                  if (stored[i]["status"], stored[i]["triage_state"], stored[i]["triage_reason"])
                  != (f["status"], f["triage_state"], f["triage_reason"])]
        assert not differ, f"warehouse and service disagree on {differ[:10]}"
        # the successful run's requests all succeeded (those of failed runs stay failed, or planned if never sent)
        actions = [a for a in warehouse_rows(stack.warehouse, "triage_actions") if a["run_id"] == result.run_id]
        assert actions
        assert all(a["status"] == "succeeded" for a in actions), actions

    run_until_complete(stack, "autotriage_triage", env, check)
    settle(emu)
    assert [e for e in api_requests(emu, "triage") if e["fault"]], "no fault was injected"


# --- ticket_creation ----------------------------------------------------------------------------------------------


TICKET_SCENARIOS = {
    **{name: spec for name, spec in SCHEDULES.items()},
    # the server created the tickets, then the connection dropped / the body was cut / the client timed out
    "acted-then-dropped": {"schedule": ["drop_after", "ok", "drop_after"]},
    "acted-then-truncated": {"schedule": ["truncate", "ok", "truncate"]},
    "acted-after-client-timeout": {"schedule": ["latency", "ok", "latency"], "latency": LATENCY},
}


@pytest.mark.parametrize("scenario", [*TICKET_SCENARIOS, "random"])
def test_tickets_under_faults_ticket_each_selected_finding_exactly_once(stack: Stack, env: dict[str, str],
                                                                        scenario: str) -> None:
    emu = stack.emulator
    preload(stack)
    selected = ticket_selection(emu)
    assert len(selected) > 6  # several requests of 3 tickets
    emu.clear_requests()
    if scenario == "random":
        emu.add_fault(operation="tickets", seed=23, **RANDOM)
    else:
        emu.add_fault(operation="tickets", **TICKET_SCENARIOS[scenario])
    tally("dag_fault_scenarios.ticket_creation")

    def check(_result: RunResult | None) -> None:
        settle(emu)
        assert_no_double_tickets(emu)

    run_until_complete(stack, "ticket_creation", env, check)
    # later runs (Asset-triggered or scheduled) retry what failed, still under faults: none may double-ticket
    for _ in range(2):
        stack.run("ticket_creation")
        check(None)
    # the faults stop; the next runs resolve what is still open (a lost response is re-read one run later)
    emu.clear_faults()
    for _ in range(3):
        stack.run("ticket_creation")
        check(None)
        if not open_outcomes(stack.warehouse):
            break
    assert not open_outcomes(stack.warehouse), open_outcomes(stack.warehouse)
    counts = ticket_counts(emu)
    after = {**fetch_findings(emu, "sast"), **fetch_findings(emu, "sca")}
    missing = [i for i in selected if after[i].get("external_ticket") is None]
    assert not missing, f"selected findings never ticketed: {missing}"
    assert all(counts[i] == 1 for i in selected)
    stored = {(r["issue_type"], r["id"]): r for r in warehouse_findings(stack.warehouse)}
    disagree = [i for i, t in selected.items()
                if stored[(t, i)]["external_ticket_id"] != after[i]["external_ticket"]["id"]]
    assert not disagree, f"warehouse does not record the service's ticket of {disagree}"
    succeeded = {r["finding_id"] for r in warehouse_rows(stack.warehouse, "ticket_actions")
                 if r["outcome"] == "succeeded"}
    assert set(selected) <= succeeded


def open_outcomes(path: Path) -> dict[int, str]:
    """Findings whose latest ticket outcome is still open (ambiguous or failed)."""
    latest: dict[int, str] = {}
    for row in warehouse_rows(path, "ticket_actions"):  # in id order: the last one wins
        if row["outcome"] != "planned":
            latest[row["finding_id"]] = row["outcome"]
    return {i: o for i, o in latest.items() if o in ("ambiguous", "failed")}


# --- scan_monitoring ----------------------------------------------------------------------------------------------


def search_all_scans(emu: EmulatorProcess) -> dict[str, dict[str, Any]]:
    with api_client(emu) as client:
        return {str(s.id): s.model_dump(mode="json") for s in client.items(client.search_scans, limit=500)}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scan_monitoring_under_faults_stores_every_scan_with_its_final_status(stack: Stack, env: dict[str, str],
                                                                              scenario: str) -> None:
    emu = stack.emulator
    emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=1)
    emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=1, final_status="SCAN_STATUS_ERROR", exit_code=3)
    add_faults(emu, "scan_monitoring", scenario, seed=24)
    tally("dag_fault_scenarios.scan_monitoring")

    def check(result: RunResult) -> None:
        assert result.tis.get("search_scans") == "success"
        assert result.tis.get("refresh_scans") == "success"
        settle(emu)
        emu.clear_faults()  # the ground truth is read fault-free
        truth = search_all_scans(emu)
        stored = {r["id"]: r for r in warehouse_rows(stack.warehouse, "scans")}
        assert set(stored) == set(truth), (set(truth) ^ set(stored))
        differ = [i for i, s in truth.items() if stored[i]["status"] != s["status"]]
        assert not differ, [(i, stored[i]["status"], truth[i]["status"]) for i in differ]

    run_until_complete(stack, "scan_monitoring", env, check)
    settle(emu)
    assert any(e["fault"] for e in api_requests(emu)), "no fault was injected"
