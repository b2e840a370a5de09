"""Bulk triage by policy: selection, chunks, recorded actions, refreshed warehouse rows, dry run."""

from __future__ import annotations

import json

import httpx
import pytest
from findings_provider.client import ValidationError
from findings_provider.config import TriagePolicy, load_pipeline_config
from findings_provider.pipeline import extraction, triage
from findings_provider.warehouse.schema import triage_actions
from sqlalchemy import select
from warehouse_rows import stored_finding

from .fakes import NOW, FakeApi, finding

POLICY = load_pipeline_config().autotriage_triage.policies[0]  # the shipped default policy


def seed(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [
        finding(1, verdict="false_positive"),
        finding(2, verdict="false_positive"),
        finding(3, verdict="false_positive"),
        finding(4, verdict="true_positive"),
        finding(5),  # no verdict
        finding(6, verdict="false_positive", status="fixed"),
        finding(7, verdict="false_positive"),
        {**finding(8, verdict="true_positive"), "match_based_id": "fp-1", "ref": "release"},  # 1's twin
    ]
    api.findings["sca"] = [finding(1, verdict="false_positive")]  # same id, other type: never touched
    extraction.run_extraction(api.client(), warehouse, ["sast", "sca"], now=NOW, page_size=100)
    api.requests.clear()


def actions(warehouse):
    with warehouse.engine.connect() as conn:
        return conn.execute(select(triage_actions).order_by(triage_actions.c.id)).all()


def test_default_policy_selects_only_open_code_false_positives(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    (plan,) = triage.plan_triage(warehouse, [POLICY])
    assert [f.id for f in plan.selected] == [1, 2, 3, 7]
    assert plan.chunks == [[1, 2, 3, 7]]


def test_chunks_never_exceed_the_chunk_size(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    (plan,) = triage.plan_triage(warehouse, [POLICY], chunk_size=3)
    assert plan.chunks == [[1, 2, 3], [7]]
    with pytest.raises(ValueError, match=r"chunk_size = 3001 is out of range: .* must be 1\.\.3000"):
        triage.chunked([1], 3001)


def test_execute_records_requests_and_refreshes_triaged_rows(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    plans = triage.plan_triage(warehouse, [POLICY], chunk_size=3)
    ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="autotriage_triage", run_id="run-1")
    assert [a.status for a in actions(warehouse)] == ["planned", "planned"]

    counts = triage.execute_plan(api.client(), warehouse, ids, [POLICY])

    sent = [json.loads(r.content) for r in api.calls("/triage")]
    assert [b["issue_ids"] for b in sent] == [[1, 2, 3], [7]]
    for body in sent:
        assert body["issue_type"] == "sast"
        assert (body["new_triage_state"], body["new_triage_reason"]) == ("ignored", "false_positive")
        assert "false_positive" in body["new_note"]
        assert "autotriage_triage run run-1" in body["new_note"]
    assert counts["requests"] == 2
    assert counts["triaged"] == 5
    rows = actions(warehouse)
    assert [(a.status, a.num_triaged, a.dry_run) for a in rows] == [("succeeded", 4, False), ("succeeded", 1, False)]
    assert rows[0].response["triaged_issues"] == [1, 2, 3, 8]
    assert rows[0].request["issue_ids"] == [1, 2, 3]
    assert rows[0].run_id == "run-1"
    for finding_id in (1, 2, 3, 7, 8):
        row = stored_finding(warehouse, "sast", finding_id)
        raw = json.loads(row.raw)
        assert (row.status, row.triage_state, row.triage_reason) == ("ignored", "ignored", "false_positive")
        assert (raw["status"], raw["triage_state"], raw["triage_reason"]) == ("ignored", "ignored", "false_positive")
    for finding_id in (4, 5):
        assert stored_finding(warehouse, "sast", finding_id).status == "open"
    assert stored_finding(warehouse, "sast", 6).status == "fixed"
    assert stored_finding(warehouse, "sca", 1).status == "open"


def test_dry_run_records_the_plan_and_sends_nothing(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    plans = triage.plan_triage(warehouse, [POLICY])
    ids = triage.record_plan(warehouse, plans, dry_run=True, dag_id="d", run_id="r")
    counts = triage.execute_plan(api.client(), warehouse, ids, [POLICY])
    assert api.calls("/triage") == []
    assert counts["skipped_dry_run"] == 1
    assert counts["requests"] == 0
    (row,) = actions(warehouse)
    assert (row.status, row.dry_run, row.issue_ids) == ("planned", True, [1, 2, 3, 7])
    assert stored_finding(warehouse, "sast", 1).status == "open"


def test_a_failed_request_is_recorded_and_sent_again_by_a_retry(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    ids = triage.record_plan(warehouse, triage.plan_triage(warehouse, [POLICY]), dry_run=False, dag_id="d", run_id="r")
    original = api._triage
    api._triage = lambda body: httpx.Response(422, json={"error": "nope"})  # type: ignore[method-assign]
    with pytest.raises(ValidationError):
        triage.execute_plan(api.client(), warehouse, ids, [POLICY])
    (row,) = actions(warehouse)
    assert row.status == "failed"
    assert "ValidationError" in row.error

    api._triage = original  # type: ignore[method-assign]
    triage.execute_plan(api.client(), warehouse, ids, [POLICY])
    assert actions(warehouse)[0].status == "succeeded"
    assert len(api.calls("/triage")) == 2
    triage.execute_plan(api.client(), warehouse, ids, [POLICY])  # nothing left to do: not sent a third time
    assert len(api.calls("/triage")) == 2


def test_a_rejected_plan_is_never_sent(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    ids = triage.record_plan(warehouse, triage.plan_triage(warehouse, [POLICY]), dry_run=False, dag_id="d", run_id="r")
    assert triage.close_open_plans(warehouse, "r", f"{triage.REJECTED} by alice") == 1
    triage.execute_plan(api.client(), warehouse, ids, [POLICY])
    assert api.calls("/triage") == []
    assert actions(warehouse)[0].error == "rejected in the approval step by alice"


def test_replanning_a_run_supersedes_its_open_plan(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    plans = triage.plan_triage(warehouse, [POLICY])
    triage.record_plan(warehouse, plans, dry_run=False, dag_id="d", run_id="r")
    triage.record_plan(warehouse, plans, dry_run=False, dag_id="d", run_id="r")
    assert [(a.status, a.error) for a in actions(warehouse)] == [
        ("failed", "superseded by a new plan of the same run"), ("planned", None)]


def test_disabled_and_other_type_policies(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    off = POLICY.model_copy(update={"enabled": False})
    sca = TriagePolicy.model_validate({**POLICY.model_dump(), "name": "sca", "issue_type": "sca"})
    plans = triage.plan_triage(warehouse, [off, sca])
    assert [(p.policy.name, [f.id for f in p.selected]) for p in plans] == [("sca", [1])]


def test_note_placeholders_and_approval_text(api: FakeApi, warehouse) -> None:
    policy = POLICY.model_copy(update={"note": "by {dag_id}/{run_id} ({policy}) {unknown}"})
    assert triage.render_note(policy, dag_id="d", run_id="r") == "by d/r (autotriage-false-positives) {unknown}"
    seed(api, warehouse)
    plans = triage.plan_triage(warehouse, [POLICY])
    reasons = triage.approval_reasons(plans, 2)
    assert reasons == ["4 findings selected, above the approval threshold of 2"]
    subject, body = triage.approval_text(plans, reasons=reasons, dry_run=False)
    assert subject == "Bulk-triage 4 findings by policy autotriage-false-positives?"
    assert "**4**" in body
    assert "above the approval threshold of 2" in body
    assert "| 7 | acme/api | rule\\.a | main | high |" in body


HOSTILE_REPO = 'acme/x | 1 | ![i](http://evil) <img src=x onerror=alert(1)> [link](http://evil)'


def test_approval_body_shows_service_data_as_inert_cells(api: FakeApi, warehouse) -> None:
    from markdown_view import table_rows

    api.findings["sast"] = [
        finding(i, verdict="false_positive", repo=HOSTILE_REPO, rule="r\n| [x](http://evil)") for i in (1, 2)
    ]
    extraction.run_extraction(api.client(), warehouse, ["sast"], now=NOW, page_size=100)
    plans = triage.plan_triage(warehouse, [POLICY])
    _, body = triage.approval_text(plans, reasons=triage.approval_reasons(plans, 0), dry_run=False)
    rows = table_rows(body)  # fails on any link, image, HTML or emphasis
    assert len(rows) == 2
    assert all(len(row) == 5 for row in rows)
    assert [row[1:3] for row in rows] == [[HOSTILE_REPO, "r | [x](http://evil)"]] * 2  # one line, one cell
