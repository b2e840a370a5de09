"""Exact after every write: when a triage or ticket run ends, the warehouse holds what the service holds for every
finding the run's requests named, what a person did in the service while a request was in flight included.

The person acts through the emulator's admin route, from inside the client's write call: after our re-read,
before our request reaches the service (the window no re-read before a write can close). Against a real emulator
subprocess and a real SQLite warehouse.
"""

from __future__ import annotations

import math

import pytest
from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import extraction, tickets, triage
from findings_provider.warehouse.schema import triage_actions
from fixtures import acting_in_the_window, ops, seq_of, service_state, warehouse_state
from sqlalchemy import select

pytestmark = pytest.mark.integration
CONFIG = load_pipeline_config()
TRIAGE_POLICY = CONFIG.autotriage_triage.policies[0]
TICKET_POLICIES = CONFIG.ticket_creation.policies
def test_after_a_triage_run_the_warehouse_equals_the_service_for_what_it_wrote(
    fresh, emulator_client, warehouse, monkeypatch
):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    acted = acting_in_the_window(monkeypatch, emulator_client, "bulk_triage", fresh, [
        {"status": "reviewing"}, {"ticket": "create"}, {"triage_state": "reopened"}])
    plans = triage.plan_triage(warehouse, [TRIAGE_POLICY], chunk_size=40)
    ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="autotriage_triage", run_id="r1")
    seq = seq_of(fresh)

    counts = triage.execute_plan(emulator_client, warehouse, ids, [TRIAGE_POLICY])

    assert len(acted) == 3
    sent = ops(fresh, seq, "triage")
    assert counts["requests"] == len(sent) > 1  # several requests of one policy
    with warehouse.engine.connect() as conn:  # each request's ids and the twins the service triaged with them
        recorded = conn.execute(select(triage_actions.c.issue_ids, triage_actions.c.response).where(
            triage_actions.c.status == "succeeded")).all()
    written = {int(i) for ids, response in recorded for i in [*ids, *response["triaged_issues"]]}
    assert written >= {int(i) for r in sent for i in r["body"]["issue_ids"]}
    service = service_state(emulator_client, "sast")
    assert warehouse_state(warehouse, "sast", written) == {i: service[i] for i in written}
    # what the person did in the window is in the warehouse, though the write's own answer cannot say it
    reviewing, ticketed, _reopened = acted
    assert warehouse_state(warehouse, "sast", {ticketed})[ticketed][3] is not None
    assert service[reviewing][0] == warehouse_state(warehouse, "sast", {reviewing})[reviewing][0]
    # the cost: one re-read for the policy's requests, at most ceil(written / 3000) + 1 requests
    assert counts["settled"] == len(written)
    # the race window: seconds from the policy's re-read to each of its requests, the later ones the longer
    assert 0 <= counts["window_p50_s"] <= counts["window_p99_s"] <= counts["window_max_s"]
    assert 1 <= counts["settle_requests"] <= math.ceil(len(written) / 3000) + 1


def test_after_a_ticket_run_the_warehouse_equals_the_service_for_what_it_named(
    fresh, emulator_client, warehouse, monkeypatch
):
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    acted = acting_in_the_window(monkeypatch, emulator_client, "create_tickets", fresh, [
        {"triage_state": "ignored", "triage_reason": "acceptable_risk"}, {"status": "reviewing"}])
    seq = seq_of(fresh)

    out = tickets.run_tickets(emulator_client, warehouse, TICKET_POLICIES, tickets_per_call=5, run_id="t1")

    assert len(acted) == 2
    sent = ops(fresh, seq, "tickets")
    assert out["requests"] == len(sent) > 1
    for issue_type in ("sast", "sca"):
        named = {int(i) for r in sent if r["body"]["issue_type"] == issue_type for i in r["body"]["issue_ids"]}
        assert named
        service = service_state(emulator_client, issue_type)
        assert warehouse_state(warehouse, issue_type, named) == {i: service[i] for i in named}
    ignored = sent[0]["body"]["issue_type"]  # the person acted on findings of the first request
    assert warehouse_state(warehouse, ignored, {acted[0]})[acted[0]][1:3] == ("ignored", "acceptable_risk")
    assert out["settled"] == sum(len(r["body"]["issue_ids"]) for r in sent)
    assert 0 <= out["window_p50_s"] <= out["window_p99_s"] <= out["window_max_s"]
    # the cost: one re-read per policy, at most ceil(named / 3000) + 1 requests each
    per_type = [sum(len(r["body"]["issue_ids"]) for r in sent if r["body"]["issue_type"] == t) for t in ("sast", "sca")]
    assert 2 <= out["settle_requests"] <= sum(math.ceil(n / 3000) + 1 for n in per_type)


def test_the_window_summary_is_the_median_the_99th_percentile_and_the_largest() -> None:
    from findings_provider.pipeline.freshness import window_summary

    assert window_summary([i / 10 for i in range(10, 0, -1)]) == {
        "window_p50_s": 0.5, "window_p99_s": 1.0, "window_max_s": 1.0}
    assert window_summary([0.25] * 200 + [3.0]) == {"window_p50_s": 0.25, "window_p99_s": 0.25, "window_max_s": 3.0}
    assert window_summary([]) == {"window_p50_s": None, "window_p99_s": None, "window_max_s": None}
