"""The Warehouse on a real SQLite file and a real PostgreSQL: schema, state, logs, selections (its bulk upserts:
``test_upsert.py``)."""

from __future__ import annotations

import threading

import pytest
from findings_provider.warehouse import TicketAction, Warehouse, finding_row_from_dict
from findings_provider.warehouse.schema import (
    metadata,
    pipeline_state,
    policy_changes,
    ticket_actions,
    triage_actions,
)
from sqlalchemy import inspect
from warehouse_rows import finding, stored

from devtools.warehouse import make_pre_versioning_warehouse

# --- schema ---------------------------------------------------------------------------------------


def test_create_all_creates_every_table_and_is_idempotent(engine):
    store = Warehouse(engine)
    store.create_all()
    assert set(inspect(engine).get_table_names()) >= set(metadata.tables)
    store.upsert_findings([finding(1)])
    store.create_all()
    Warehouse(engine).create_all()
    assert store.count_findings() == 1


def test_create_all_creates_what_is_missing(engine):
    """A warehouse made before versioning (no version table) that lacks a table gets it."""
    make_pre_versioning_warehouse(engine, without_tables=("pipeline_state",))
    assert "pipeline_state" not in inspect(engine).get_table_names()
    store = Warehouse(engine)
    store.create_all()
    store.set_state("k", 1)
    assert store.get_state("k") == 1


def test_create_all_races_safely(engine):
    barrier = threading.Barrier(4)
    errors: list[Exception] = []

    def create() -> None:
        barrier.wait()
        try:
            Warehouse(engine).create_all()
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(inspect(engine).get_table_names()) >= set(metadata.tables)


# --- pipeline state -------------------------------------------------------------------------------


def test_state_round_trip(warehouse, engine):
    assert warehouse.get_state("watermark:sast") is None
    assert warehouse.get_state("watermark:sast", {"since": 0}) == {"since": 0}
    warehouse.set_state("watermark:sast", {"since": 1605741292.391, "ids": [1, 2], "note": "café"})
    warehouse.set_state("watermark:sast", {"since": 1605741300, "ids": []})
    warehouse.set_state("other", [1, "two", None, True])
    assert warehouse.get_state("watermark:sast") == {"since": 1605741300, "ids": []}
    assert warehouse.get_state("other") == [1, "two", None, True]
    ((updated_at,),) = stored(engine, pipeline_state, "updated_at", key="other")
    assert updated_at.tzinfo is not None


# --- action logs ----------------------------------------------------------------------------------


def test_triage_action_recorded_then_updated(warehouse, engine):
    action_id = warehouse.record_triage_action(
        run_id="manual__1",
        dag_id="autotriage_triage",
        issue_type="sast",
        dry_run=False,
        issue_ids=(11, 12),
        request={"issue_ids": [11, 12], "new_triage_state": "ignored"},
    )
    other_id = warehouse.record_triage_action(
        run_id="manual__1",
        dag_id="autotriage_triage",
        issue_type="sast",
        dry_run=True,
        issue_ids=[13],
        request={"issue_ids": [13]},
    )
    assert other_id != action_id
    warehouse.update_triage_action(
        action_id,
        status="succeeded",
        response={"num_triaged": 3, "triaged_issues": [11, 12, 99]},
        num_triaged=3,
    )
    columns = ("dry_run", "issue_ids", "request", "response", "num_triaged", "status", "error")
    assert stored(engine, triage_actions, *columns, id=action_id) == [
        (
            False,
            [11, 12],
            {"issue_ids": [11, 12], "new_triage_state": "ignored"},
            {"num_triaged": 3, "triaged_issues": [11, 12, 99]},
            3,
            "succeeded",
            None,
        )
    ]
    assert stored(engine, triage_actions, "status", "response", id=other_id) == [("planned", None)]


def test_triage_action_rejects_unknown_status_and_id(warehouse):
    with pytest.raises(ValueError, match="unknown triage status 'done'"):
        warehouse.record_triage_action(
            run_id=None, dag_id=None, issue_type="sast", dry_run=True, issue_ids=[], request={}, status="done"
        )
    with pytest.raises(KeyError):
        warehouse.update_triage_action(12345, status="failed", error="boom")


def test_ticket_actions_and_ticketed_ids(warehouse, engine):
    warehouse.upsert_findings(
        [
            finding(1, external_ticket={"id": 900}),
            *(finding(i) for i in (2, 3, 4, 5)),
            finding_row_from_dict("sca", {"id": 6, "external_ticket": {"id": 901}}),
        ]
    )
    recorded = warehouse.record_ticket_actions(
        [
            TicketAction(
                "sast",
                2,
                "succeeded",
                run_id="r",
                ticket_id=77,
                ticket_url="https://t/77",
                external_slug="SEC-77",
            ),
            TicketAction("sast", 3, "ambiguous", run_id="r", message="response lost"),
            TicketAction("sast", 4, "failed", run_id="r", message="fixed findings cannot be ticketed"),
            TicketAction("sast", 5, "skipped", run_id="r", message="already ticketed"),
            TicketAction("sca", 7, "succeeded", run_id="r", ticket_id=78),
        ]
    )
    assert recorded == 5
    assert warehouse.ticketed_finding_ids("sast") == {1, 2, 3}
    assert warehouse.ticketed_finding_ids("sca") == {6, 7}
    assert warehouse.ticketed_finding_ids("secrets") == set()
    assert stored(engine, ticket_actions, "finding_id", "outcome", "ticket_id", "external_slug", finding_id=2) == [
        (2, "succeeded", 77, "SEC-77")
    ]


def test_ticket_actions_reject_unknown_outcomes_and_accept_none(warehouse, engine):
    with pytest.raises(ValueError, match="unknown ticket outcome 'done'"):
        warehouse.record_ticket_actions([TicketAction("sast", 1, "planned"), TicketAction("sast", 2, "done")])  # type: ignore[arg-type]  # unknown on purpose
    assert stored(engine, ticket_actions, "id") == []
    assert warehouse.record_ticket_actions([]) == 0


def test_policy_change_recorded(warehouse, engine):
    change_id = warehouse.record_policy_change(
        run_id="scheduled__1",
        policy_id="5",
        rule_path="python.sqli",
        previous_mode="MODE_BLOCK",
        new_mode="MODE_MONITOR",
        status="applied",
        response={"policyId": "5"},
    )
    assert stored(
        engine, policy_changes, "rule_path", "previous_mode", "new_mode", "status", "response", id=change_id
    ) == [("python.sqli", "MODE_BLOCK", "MODE_MONITOR", "applied", {"policyId": "5"})]


# --- selections -----------------------------------------------------------------------------------


def test_count_and_select_findings(warehouse):
    verdicts = {1: "false_positive", 2: "false_positive", 3: "true_positive", 4: None}
    warehouse.upsert_findings(
        [finding(i, assistant={"autotriage": {"verdict": v}} if v else {}) for i, v in verdicts.items()]
        + [finding(5, status="fixed", assistant={"autotriage": {"verdict": "false_positive"}})]
        + [finding_row_from_dict("sca", {"id": 1, "status": "open", "severity": "high"})]
    )
    assert warehouse.count_findings() == 6
    assert warehouse.count_findings("sast") == 5
    assert warehouse.count_findings("sast", status="open") == 4
    assert warehouse.count_findings(status="open") == 5
    assert warehouse.finding_ids_where("sast", status="open", autotriage_verdict="false_positive") == [1, 2]
    assert warehouse.finding_ids_where("sast", autotriage_verdict=None) == [4]
    assert warehouse.finding_ids_where("sast", status=["open", "fixed"], autotriage_verdict={"false_positive"}) == [
        1,
        2,
        5,
    ]
    with pytest.raises(ValueError, match="findings has no column 'verdict'"):
        warehouse.count_findings(verdict="x")
