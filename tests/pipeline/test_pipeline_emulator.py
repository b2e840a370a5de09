"""The pipeline logic against a real emulator subprocess (over HTTP) and a real SQLite warehouse."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from datetime import timedelta

import httpx
import pytest
from findings_provider.client.canonical import ISSUE_TYPES, OFFSET_TYPES
from findings_provider.client.timeutil import parse_timestamp
from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import extraction, scans, ticket_outcomes, ticket_plan, ticket_send, triage
from findings_provider.warehouse.schema import findings, ticket_actions, triage_actions
from present import present
from sqlalchemy import func, select
from warehouse_rows import stored_findings

pytestmark = pytest.mark.integration
CONFIG = load_pipeline_config()


def api_findings(client, issue_type, **filters):
    if issue_type == "secrets":
        return {f.id: f for f in client.items(client.list_secrets)}
    return {f.id: f for f in client.items(client.list_findings, issue_type, page_size=3000, **filters)}


def requests_of(emulator, operation, since=None):
    return [r for r in emulator.requests(since) if r["operation"] == operation]


def last_seq(emulator):
    log = emulator.requests()
    return log[-1]["seq"] if log else 0


# --- extraction ------------------------------------------------------------------------------------------------


def test_extraction_is_complete_idempotent_and_incremental(fresh, emulator_client, warehouse) -> None:
    types = list(ISSUE_TYPES)  # a new issue type fails here until the emulator serves it
    first = extraction.run_extraction(emulator_client, warehouse, types)
    counts = fresh.stats()["counts"]["findings"]
    for issue_type in types:
        truth = api_findings(emulator_client, issue_type)
        rows = stored_findings(warehouse, issue_type)
        assert len(rows) == len(truth) == counts[issue_type] > 0
        for finding_id, model in truth.items():
            row = rows[finding_id]
            raw = json.loads(row.raw)
            assert raw["id"] == finding_id
            assert (row.status, row.severity, row.ref) == (model.status, model.severity, model.ref)
            assert row.repository_name == (model.repository.name if model.repository else raw.get("repository"))
            if issue_type == "sast":
                assert row.autotriage_verdict == model.autotriage_verdict
        assert warehouse.get_state(extraction.watermark_key(issue_type)) is not None
    assert first["written"] == sum(counts.values())
    findings_requests = requests_of(fresh, "findings")
    assert all(r["query"]["page_size"] == ["3000"] for r in findings_requests)
    assert all("since" not in r["query"] for r in findings_requests)

    seq = last_seq(fresh)
    second = extraction.run_extraction(emulator_client, warehouse, types)
    assert second["written"] == 0
    with warehouse.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(findings)).scalar_one() == sum(counts.values())
    incremental = requests_of(fresh, "findings", seq)
    assert {r["query"]["issue_type"][0] for r in incremental} == set(OFFSET_TYPES)
    assert all("since" in r["query"] for r in incremental)
    for issue_type in ("sast", "sca"):
        pulled = second["issue_types"][issue_type]
        assert pulled["full"] is False
        assert 0 < pulled["unique"] < counts[issue_type] / 2  # only the overlap window, not everything again


def test_full_refresh_reconciles_a_triage_made_elsewhere(fresh, emulator_client, warehouse) -> None:
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    mark = present(parse_timestamp(warehouse.get_state(extraction.watermark_key("sast"))))
    older = [r for r in stored_findings(warehouse, "sast").values()
             if r.status == "open" and r.relevant_since < mark - timedelta(hours=3)]
    target = older[0].id
    emulator_client.bulk_triage(issue_type="sast", issue_ids=[target], new_triage_state="reviewing")

    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    assert stored_findings(warehouse, "sast")[target].status == "open"  # not visible through since

    result = extraction.run_extraction(emulator_client, warehouse, ["sast"], full_refresh=True)
    row = stored_findings(warehouse, "sast")[target]
    assert (row.status, row.triage_state) == ("reviewing", "reviewing")
    assert result["issue_types"]["sast"]["written"] >= 1


# --- triage ----------------------------------------------------------------------------------------------------


def test_triage_touches_exactly_the_open_code_false_positives(fresh, emulator_client, warehouse) -> None:
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    before = {t: {i: f.status for i, f in api_findings(emulator_client, t).items()} for t in ("sast", "sca")}
    expected = set(api_findings(emulator_client, "sast", status="open", autotriage_verdict="false_positive"))
    assert expected
    seq = last_seq(fresh)

    plans = triage.plan_triage(warehouse, CONFIG.autotriage_triage.policies, chunk_size=40)
    action_ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="autotriage_triage", run_id="r1")
    counts = triage.execute_plan(emulator_client, warehouse, action_ids, CONFIG.autotriage_triage.policies)

    sent = requests_of(fresh, "triage", seq)
    assert len(sent) == math.ceil(len(expected) / 40) == len(action_ids)
    sent_ids = [i for r in sent for i in r["body"]["issue_ids"]]
    assert sorted(sent_ids) == sorted(expected)
    assert all(len(r["body"]["issue_ids"]) <= 40 for r in sent)
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(triage_actions).order_by(triage_actions.c.id)).all()
    triaged = {i for r in rows for i in r.response["triaged_issues"]}
    assert [r.status for r in rows] == ["succeeded"] * len(sent)
    assert triaged >= expected
    assert counts["triaged"] == len(triaged)

    after = {t: api_findings(emulator_client, t) for t in ("sast", "sca")}
    for finding_id, f in after["sast"].items():
        if finding_id in triaged:
            assert (f.status, f.triage_state, f.triage_reason) == ("ignored", "ignored", "false_positive")
            assert "autotriage_triage run r1" in f.triage_comment
        else:
            assert f.status == before["sast"][finding_id]
    assert {i: f.status for i, f in after["sca"].items()} == before["sca"]
    wh = stored_findings(warehouse, "sast")
    assert all(wh[i].status == "ignored" for i in triaged if i in wh)


def test_triage_dry_run_sends_nothing(fresh, emulator_client, warehouse) -> None:
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    seq = last_seq(fresh)
    plans = triage.plan_triage(warehouse, CONFIG.autotriage_triage.policies)
    ids = triage.record_plan(warehouse, plans, dry_run=True, dag_id="d", run_id="dry")
    triage.execute_plan(emulator_client, warehouse, ids, CONFIG.autotriage_triage.policies)
    assert requests_of(fresh, "triage", seq) == []
    assert ids
    assert sum(len(p.selected) for p in plans) > 0


# --- tickets ---------------------------------------------------------------------------------------------------


def policy_truth(client):
    """What the default ticket policies select, from the emulator's own listing."""
    sast = {i for i, f in api_findings(client, "sast", status="open", autotriage_verdict="true_positive").items()
            if f.severity in ("high", "critical") and f.external_ticket is None}
    sca = {i for i, f in api_findings(client, "sca", status="open").items()
           if f.severity in ("high", "critical") and f.reachability in ("reachable", "always_reachable")
           and ticket_outcomes.ticket_of(f) is None}
    return {"sast": sast, "sca": sca}


def emulator_tickets(emulator, client):
    """Tickets created through the API: the admin route, or (when it fails) rebuilt from the findings' links."""
    try:
        return emulator.tickets()
    except httpx.HTTPError:  # GET /_emulator/tickets answers 500 (orjson and Row._asdict keys)
        created = emulator.stats()["counts"]["tickets"]
        linked = {}
        for issue_type in ("sast", "sca", "secrets"):
            for f in api_findings(client, issue_type).values():
                ticket = ticket_outcomes.ticket_of(f)
                if ticket is not None:
                    linked[ticket["id"]] = {"issue_type": issue_type, "issue_ids": ticket["linkedIssueIds"]}
        api_made = sorted(linked)[:created]  # API tickets count up from 1; generated ones are numbered far above
        return [linked[i] for i in api_made]


def ticketed_ids(emulator, client):
    return Counter((t["issue_type"], i) for t in emulator_tickets(emulator, client) for i in t["issue_ids"])


def test_policy_findings_get_exactly_one_ticket_across_runs(fresh, emulator_client, warehouse) -> None:
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    truth = policy_truth(emulator_client)
    assert truth["sast"]
    assert truth["sca"]
    seq = last_seq(fresh)

    batches = ticket_plan.plan_tickets(warehouse, CONFIG.ticket_creation.policies)
    tally = ticket_send.create_tickets(emulator_client, warehouse, batches, run_id="r1")

    made = ticketed_ids(fresh, emulator_client)
    assert set(made) == {(t, i) for t, ids in truth.items() for i in ids}
    assert max(made.values()) == 1
    posts = requests_of(fresh, "tickets", seq)
    for issue_type in ("sast", "sca"):
        groups = sum(len(b.groups) for b in batches if b.issue_type == issue_type)
        assert len([p for p in posts if p["body"]["issue_type"] == issue_type]) == math.ceil(groups / 20)
    assert all(p["body"]["group_issues"] is True and p["body"]["limit"] == 20 for p in posts)
    assert tally.succeeded == sum(len(v) for v in truth.values())
    wh = {t: stored_findings(warehouse, t) for t in ("sast", "sca")}
    assert all(wh[t][i].external_ticket_id is not None for t, ids in truth.items() for i in ids)

    seq = last_seq(fresh)
    again = ticket_send.create_tickets(
        emulator_client, warehouse, ticket_plan.plan_tickets(warehouse, CONFIG.ticket_creation.policies), run_id="r2")
    assert again.requests == 0
    assert requests_of(fresh, "tickets", seq) == []
    assert ticketed_ids(fresh, emulator_client) == made


def test_lost_ticket_response_creates_no_duplicates(fresh, emulator_client, warehouse) -> None:
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    truth = policy_truth(emulator_client)
    fresh.add_fault(operation="tickets", schedule=["drop_after"])  # created, then the response is lost

    tally = ticket_send.create_tickets(
        emulator_client, warehouse, ticket_plan.plan_tickets(warehouse, CONFIG.ticket_creation.policies), run_id="r1")
    assert tally.recovered > 0

    with warehouse.engine.connect() as conn:
        columns = (ticket_actions.c.issue_type, ticket_actions.c.finding_id, ticket_actions.c.ticket_id)
        recorded = conn.execute(select(*columns).where(ticket_actions.c.outcome == "succeeded")).all()
    made = ticketed_ids(fresh, emulator_client)
    assert {(t, i) for t, i, _ in recorded} == set(made) == {(t, i) for t, ids in truth.items() for i in ids}
    assert max(made.values()) == 1
    ticket_send.create_tickets(
        emulator_client, warehouse, ticket_plan.plan_tickets(warehouse, CONFIG.ticket_creation.policies), run_id="r2")
    assert ticketed_ids(fresh, emulator_client) == made


def test_a_server_error_that_did_nothing_is_sent_again_in_the_same_run(fresh, emulator_client, warehouse,
                                                                       monkeypatch) -> None:
    monkeypatch.setattr(ticket_send, "RESEND_DELAYS", (0.0, 0.0))
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    sast_policy = [p for p in CONFIG.ticket_creation.policies if p.issue_type == "sast"]
    fresh.add_fault(operation="tickets", schedule=["500"])  # the service failed: nothing created
    tally = ticket_send.create_tickets(emulator_client, warehouse, ticket_plan.plan_tickets(warehouse, sast_policy),
                                       run_id="r1")
    assert tally.resent > 0
    assert (tally.succeeded, tally.failed) == (tally.resent, 0)
    assert max(ticketed_ids(fresh, emulator_client).values()) == 1


def test_failed_ticket_requests_are_retried_by_the_next_run(fresh, emulator_client, warehouse) -> None:
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    sast_policy = [p for p in CONFIG.ticket_creation.policies if p.issue_type == "sast"]
    # a gateway's answer: nothing created, but nothing proves the service is done with it: the next run re-reads
    fresh.add_fault(operation="tickets", schedule=["502"])
    first = ticket_send.create_tickets(emulator_client, warehouse, ticket_plan.plan_tickets(warehouse, sast_policy),
                                       run_id="r1")
    assert first.succeeded == 0
    assert first.failed > 0
    assert emulator_tickets(fresh, emulator_client) == []

    second = ticket_send.create_tickets(emulator_client, warehouse, ticket_plan.plan_tickets(warehouse, sast_policy),
                                        run_id="r2")
    assert second.succeeded == first.failed
    assert max(ticketed_ids(fresh, emulator_client).values()) == 1


# --- scans -----------------------------------------------------------------------------------------------------


def test_scan_monitoring_logic_against_the_emulator(fresh, emulator_client, warehouse) -> None:
    running = fresh.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0.5)
    failing = fresh.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0.5,
                                         final_status="SCAN_STATUS_ERROR", exit_code=3)
    result = scans.search_and_store(emulator_client, warehouse, lookback_days=30)
    assert {str(running["id"]), str(failing["id"])} <= set(result["running_ids"])
    assert result["failed_ids"]
    assert result["found"] == sum(fresh.stats()["counts"]["scans"].values())

    time.sleep(1.0)
    refreshed = scans.refresh_scans(emulator_client, warehouse, [str(running["id"]), str(failing["id"])])
    assert refreshed["failed_ids"] == [str(failing["id"])]
    assert refreshed["newly_completed"] == 1

    (alert,) = scans.scan_alerts(emulator_client, warehouse, [str(failing["id"])])
    assert alert.status == "SCAN_STATUS_ERROR"
    assert alert.exit_code == 3
    assert alert.repository
    assert alert.branch
    assert alert.commit == failing["commit"]
