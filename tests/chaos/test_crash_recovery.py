"""Crash tests: a pipeline step runs in a child process (``crash_driver.py``, the product code the operators
run) and is SIGKILLed in the middle; a rerun must leave everything complete and exact.

- extraction killed mid-pull (while a page is in flight, at several pages, and at seeded random moments):
  the warehouse ends complete and exact, and the saved watermark never skipped data: at every moment, every
  finding with ``relevant_since`` at or before the watermark is already in the warehouse;
- triage killed mid-batch (request in flight; response received but not yet recorded): the policy selection
  ends triaged, nothing else is, the warehouse agrees with the service;
- ticket creation killed after the server created tickets but before the warehouse recorded them (request in
  flight when killed; response received but not recorded): no finding gets a second ticket, none is even sent
  again, and the warehouse ends agreeing with the service.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from present import present

from chaos.harness import (
    TOKEN,
    _instant,
    api_requests,
    assert_complete_and_exact,
    assert_no_double_tickets,
    fetch_findings,
    ground_truth,
    injected,
    last_seq,
    settle,
    tally,
    ticket_counts,
    ticket_selection,
    wait_until,
    warehouse_findings,
    warehouse_rows,
    warehouse_state,
    warehouse_uri,
)

pytestmark = pytest.mark.chaos

DRIVER = Path(__file__).with_name("crash_driver.py")
LONG = 1.5  # latency that holds a request in flight long enough to kill the client during it


def config(emu: EmulatorProcess, warehouse: Path, **extra: Any) -> dict[str, Any]:
    return {"base_url": emu.base_url, "token": TOKEN, "deployment_id": emu.deployment_id,
            "deployment_slug": emu.deployment_slug, "warehouse": warehouse_uri(warehouse), **extra}


def start(step: str, cfg: dict[str, Any]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(DRIVER), step, json.dumps(cfg)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def run_to_end(step: str, cfg: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    process = start(step, cfg)
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"{step} failed ({process.returncode}):\n{out}\n{err[-3000:]}"
    return json.loads(next(line for line in out.splitlines() if line.startswith("DONE "))[5:])


def kill(process: subprocess.Popen) -> None:
    """SIGKILL the child (by its pid) and reap it."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, process.returncode
    tally("crash.kills")


def kill_if_running(process: subprocess.Popen) -> bool:
    """SIGKILL the child unless it has ended; True when the kill ended it. It may end on its own between any check
    and the signal: then it must have ended cleanly."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    if process.returncode == -signal.SIGKILL:
        tally("crash.kills")
        return True
    assert process.returncode == 0, f"the step failed on its own ({process.returncode})"
    return False


def killed_after_latency(emu: EmulatorProcess, step: str, cfg: dict[str, Any], faults_before: int = 0) -> None:
    """Start ``step``; SIGKILL it while the request that meets the rule's ``latency`` is held by the server."""
    process = start(step, cfg)
    try:
        wait_until(lambda: injected(emu) > faults_before or process.poll() is not None, timeout=60,
                   what="the delayed request to reach the emulator")
        assert process.poll() is None, "the step finished before the crash point: " + present(process.stdout).read()
        time.sleep(0.5)  # what came before the held request is written meanwhile (pages are fetched one ahead)
    finally:
        kill(process)


def killed_by_itself(step: str, cfg: dict[str, Any]) -> str:
    """Run ``step`` with ``die_after``: it SIGKILLs itself right after the given response arrived."""
    process = start(step, cfg)
    out, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, f"expected a SIGKILL ({process.returncode}):\n{out}\n{err[-2000:]}"
    assert "KILLING after" in out
    tally("crash.kills")
    return out


# --- extraction -----------------------------------------------------------------------------------------------------


def assert_watermark_skipped_nothing(truth: dict[tuple[str, int], dict[str, Any]], warehouse: Path) -> None:
    """Every finding at or before a saved watermark is in the warehouse (what the next pull relies on)."""
    stored = {(r["issue_type"], r["id"]) for r in warehouse_findings(warehouse)}
    for issue_type in ("sast", "sca"):
        mark = warehouse_state(warehouse, f"findings_extraction.watermark.{issue_type}")
        if mark is None:
            continue
        limit = present(_instant(mark))
        covered = [k for k, f in truth.items()
                   if k[0] == issue_type and present(_instant(f["relevant_since"])) <= limit]
        missing = [k for k in covered if k not in stored]
        assert not missing, f"watermark {mark} of {issue_type} skipped {len(missing)} findings, e.g. {missing[:5]}"


# (schedule of the findings operation, what the kill interrupts); sast has 3 pages of 100, sca 1
EXTRACTION_CRASH_POINTS = {
    "sast-page-2-in-flight": ["ok", "latency"],
    "sast-page-3-in-flight": ["ok", "ok", "latency"],
    "sca-in-flight-after-sast-done": ["ok", "ok", "ok", "latency"],
}


@pytest.mark.parametrize("point", sorted(EXTRACTION_CRASH_POINTS))
def test_extraction_killed_mid_pull_then_rerun_is_complete_and_exact(fresh: EmulatorProcess, warehouse_path: Path,
                                                                     point: str) -> None:
    tally("crash.points.extraction")
    truth = ground_truth(fresh)
    fresh.add_fault(operation="findings", schedule=EXTRACTION_CRASH_POINTS[point], latency=LONG)
    killed_after_latency(fresh, "extract", config(fresh, warehouse_path))
    stored = warehouse_findings(warehouse_path)
    assert 0 < len(stored) < len(truth), "the kill did not land mid-pull"
    assert_watermark_skipped_nothing(truth, warehouse_path)
    if point.startswith("sast"):
        assert warehouse_state(warehouse_path, "findings_extraction.watermark.sast") is None  # sast pull unfinished
    else:
        assert warehouse_state(warehouse_path, "findings_extraction.watermark.sast") is not None
        assert warehouse_state(warehouse_path, "findings_extraction.watermark.sca") is None
    settle(fresh)
    fresh.clear_faults()
    run_to_end("extract", config(fresh, warehouse_path))
    assert_complete_and_exact(truth, warehouse_path)
    assert_watermark_skipped_nothing(truth, warehouse_path)


def test_extraction_killed_at_random_moments_converges(fresh: EmulatorProcess, tmp_path: Path) -> None:
    """SIGKILLs at seeded random moments (pages slowed down at random, so kills land in fetches and in
    transactions alike), each followed by the invariant check; then a rerun on the last warehouse completes."""
    truth = ground_truth(fresh)
    rng = random.Random(20240521)
    fresh.add_fault(operation="findings", probability=0.7, kinds=["latency"], seed=5, latency=0.5)
    mid_pull = 0
    for attempt in range(5):
        tally("crash.points.extraction_random")
        warehouse = tmp_path / f"warehouse-{attempt}.db"
        mark = last_seq(fresh)
        process = start("extract", config(fresh, warehouse))
        # the moment is random, counted from the first page's answer (not from the interpreter's start-up)
        wait_until(lambda mark=mark: api_requests(fresh, "findings", since=mark), timeout=60,
                   what="the first page request")
        time.sleep(rng.uniform(0.0, 1.0))
        killed = kill_if_running(process)
        assert_watermark_skipped_nothing(truth, warehouse)
        mid_pull += killed and len(warehouse_findings(warehouse)) < len(truth)
    assert mid_pull >= 3, f"only {mid_pull} of 5 kills landed in the middle of a pull"
    tally("crash.points.extraction_random_mid_pull", mid_pull)
    settle(fresh)
    fresh.clear_faults()
    run_to_end("extract", config(fresh, warehouse))
    assert_complete_and_exact(truth, warehouse)
    assert_watermark_skipped_nothing(truth, warehouse)


# --- triage ---------------------------------------------------------------------------------------------------------


def preload(emu: EmulatorProcess, warehouse: Path) -> None:
    run_to_end("extract", config(emu, warehouse, page_size=3000))


def triage_selection(emu: EmulatorProcess) -> set[int]:
    return {i for i, f in fetch_findings(emu, "sast").items()
            if f["status"] == "open" and ((f.get("assistant") or {}).get("autotriage") or {}).get("verdict")
            == "false_positive"}


def assert_triage_exact(emu: EmulatorProcess, warehouse: Path, selected: set[int]) -> None:
    sent = {int(i) for e in api_requests(emu, "triage") for i in (e["body"] or {}).get("issue_ids", [])}
    assert sent <= selected, f"triaged outside the policy: {sorted(sent - selected)[:10]}"
    after = fetch_findings(emu, "sast")
    untriaged = [i for i in selected if after[i]["status"] != "ignored"]
    assert not untriaged, f"selected findings left untriaged: {untriaged[:10]}"
    stored = {r["id"]: r for r in warehouse_findings(warehouse) if r["issue_type"] == "sast"}
    differ = [i for i, f in after.items() if (stored[i]["status"], stored[i]["triage_state"])
              != (f["status"], f["triage_state"])]
    assert not differ, f"warehouse and service disagree on {differ[:10]}"


@pytest.mark.parametrize("crash", ["request-in-flight", "response-not-recorded"])
def test_triage_killed_mid_batch_then_rerun_triages_exactly_the_selection(fresh: EmulatorProcess, warehouse_path: Path,
                                                                          crash: str) -> None:
    tally("crash.points.triage")
    preload(fresh, warehouse_path)
    selected = triage_selection(fresh)
    assert len(selected) > 20  # more than two requests of 10
    fresh.clear_requests()
    if crash == "request-in-flight":
        fresh.add_fault(operation="triage", schedule=["ok", "latency"], latency=LONG)
        killed_after_latency(fresh, "triage", config(fresh, warehouse_path, run_id="run-1"))
        settle(fresh)  # the server finishes the request the dead client sent
    else:
        killed_by_itself("triage", config(fresh, warehouse_path, run_id="run-1", die_after=["bulk_triage", 2]))
    partial = fetch_findings(fresh, "sast")
    assert 0 < sum(partial[i]["status"] == "ignored" for i in selected) < len(selected), "not mid-batch"
    fresh.clear_faults()
    run_to_end("triage", config(fresh, warehouse_path, run_id="run-2"))
    assert_triage_exact(fresh, warehouse_path, selected)


# --- tickets --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("crash", ["request-in-flight", "response-not-recorded"])
def test_tickets_killed_after_the_server_created_them_are_never_sent_again(fresh: EmulatorProcess,
                                                                           warehouse_path: Path, crash: str) -> None:
    tally("crash.points.tickets")
    preload(fresh, warehouse_path)
    selected = ticket_selection(fresh)
    assert len(selected) > 6
    fresh.clear_requests()
    if crash == "request-in-flight":
        # the second request is held by the server; the client dies; the server then creates the tickets
        fresh.add_fault(operation="tickets", schedule=["ok", "latency"], latency=LONG)
        killed_after_latency(fresh, "tickets", config(fresh, warehouse_path, run_id="run-1"))
        settle(fresh)
    else:
        killed_by_itself("tickets", config(fresh, warehouse_path, run_id="run-1", die_after=["create_tickets", 2]))
    created = ticket_counts(fresh)
    assert created, "no ticket was created before the crash"
    recorded = {r["finding_id"] for r in warehouse_rows(warehouse_path, "ticket_actions")
                if r["outcome"] == "succeeded"}
    assert set(created) - recorded, "the crash did not land between the server's action and the warehouse's"
    fresh.clear_faults()
    for number in (2, 3):
        run_to_end("tickets", config(fresh, warehouse_path, run_id=f"run-{number}"))
        assert_no_double_tickets(fresh)
    after = {**fetch_findings(fresh, "sast"), **fetch_findings(fresh, "sca")}
    counts = ticket_counts(fresh)
    assert all(counts[i] == 1 for i in selected), {i: counts[i] for i in selected if counts[i] != 1}
    stored = {(r["issue_type"], r["id"]): r for r in warehouse_findings(warehouse_path)}
    disagree = [i for i, t in selected.items() if stored[(t, i)]["external_ticket_id"]
                != after[i]["external_ticket"]["id"]]
    assert not disagree, f"warehouse does not record the service's ticket of {disagree}"
