"""The Warehouse on a real SQLite file and a real PostgreSQL: schema, upserts, state, logs, selections."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import msgspec
import orjson
import pytest
from findings_provider.warehouse import (
    TicketAction,
    Warehouse,
    dependency_repository_rows,
    dependency_rows,
    finding_row_from_dict,
    finding_rows,
    policy_rule_rows,
    scan_rows,
)
from findings_provider.warehouse.schema import (
    dependencies,
    dependency_repositories,
    findings,
    metadata,
    pipeline_state,
    policy_changes,
    policy_rules,
    scans,
    ticket_actions,
    triage_actions,
)
from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Engine

from devtools.warehouse import make_pre_versioning_warehouse

# JSON text whose bytes must survive both dialects' bulk paths: whitespace including tab and newline between
# tokens, backslash escapes, quotes, a literal backslash-N, non-ASCII.
AWKWARD_RAW = (
    '{\n\t"id": 1,\r\n "status": "open",'
    ' "rule_message": "a \\"quoted\\" \\\\N \\\\ \\t\\n caf\u00e9 \\u00e9",'
    ' "relevant_since": "2020-11-18T23:28:12.391Z"}'
)


def finding(finding_id: int, **fields) -> tuple:
    """One finding row built from a dict (status open unless given)."""
    return finding_row_from_dict("sast", {"id": finding_id, "status": "open", **fields})


def stored(engine: Engine, table, *columns, **where) -> list[tuple]:
    """Rows of ``table`` (selected columns) matching ``where``, ordered by the table's primary key."""
    stmt = select(*(table.c[c] for c in columns)).where(*(table.c[k] == v for k, v in where.items()))
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(stmt.order_by(*table.primary_key.columns))]


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


# --- findings upsert ------------------------------------------------------------------------------


def test_upsert_inserts_then_updates_a_changed_finding(warehouse, engine):
    assert warehouse.upsert_findings([finding(1), finding(2)]) == 2
    ((first_sync,),) = stored(engine, findings, "synced_at", id=1)
    assert warehouse.upsert_findings([finding(1, status="ignored", triage_reason="false_positive")]) == 1
    ((status, reason, synced_at),) = stored(engine, findings, "status", "triage_reason", "synced_at", id=1)
    assert (status, reason) == ("ignored", "false_positive")
    assert synced_at > first_sync
    assert stored(engine, findings, "status", id=2) == [("open",)]


def test_unchanged_findings_are_not_written_again(warehouse, engine):
    rows = [finding(i, severity="high") for i in range(1, 51)]
    assert warehouse.upsert_findings(rows) == 50
    before = stored(engine, findings, "id", "synced_at", "raw")
    assert warehouse.upsert_findings(rows) == 0
    assert stored(engine, findings, "id", "synced_at", "raw") == before


def test_upsert_counts_only_rows_written(warehouse):
    warehouse.upsert_findings([finding(i) for i in range(1, 6)])
    batch = [finding(1), finding(2, status="fixed"), finding(3), finding(6), finding(7)]
    assert warehouse.upsert_findings(batch) == 3


def test_duplicate_ids_in_one_batch_last_wins(warehouse, engine):
    batch = [
        finding(1, status="open"),
        finding(2),
        finding(1, status="fixed"),
        finding(1, status="reviewing"),
    ]
    assert warehouse.upsert_findings(batch) == 2
    assert stored(engine, findings, "id", "status") == [(1, "reviewing"), (2, "open")]


def test_same_id_of_other_issue_types_are_other_findings(warehouse, engine):
    warehouse.upsert_findings(
        [finding_row_from_dict(kind, {"id": 1, "severity": kind}) for kind in ("sast", "sca", "secrets")]
    )
    assert stored(engine, findings, "issue_type", "severity") == [
        ("sast", "sast"),
        ("sca", "sca"),
        ("secrets", "secrets"),
    ]


def test_raw_survives_the_bulk_path_byte_for_byte(warehouse, engine):
    (row,) = finding_rows("sast", [msgspec.Raw(AWKWARD_RAW.encode())])
    warehouse.upsert_findings([row])
    ((raw,),) = stored(engine, findings, "raw")
    assert raw == AWKWARD_RAW
    assert warehouse.upsert_findings([row]) == 0


def test_values_and_types_read_back(warehouse, engine):
    sca = {
        "id": 2**40,
        "repository": {"name": "acme/web"},
        "severity": "high",
        "reachability": "reachable",
        "relevant_since": "2020-11-18T20:46:25.269650Z",
        "external_ticket": {"id": 2**33},
        "first_seen_scan_id": 12,
    }
    warehouse.upsert_findings([finding_row_from_dict("sca", sca)])
    with engine.connect() as conn:
        row = conn.execute(select(findings)).one()
    assert row.id == 2**40
    assert row.external_ticket_id == 2**33
    assert (row.repository_name, row.reachability, row.autotriage_verdict) == ("acme/web", "reachable", None)
    assert row.relevant_since == datetime(2020, 11, 18, 20, 46, 25, 269650, tzinfo=timezone.utc)
    assert row.synced_at.tzinfo is not None
    assert orjson.loads(row.raw) == sca


def test_timestamps_compare_as_instants(warehouse, engine):
    stamps = {
        1: "2020-11-18T23:28:12.391Z",
        2: "2020-11-19 01:00:00.000000+00:00",
        3: "2020-11-18T22:00:00.5Z",
    }
    warehouse.upsert_findings([finding(i, relevant_since=s) for i, s in stamps.items()])
    cutoff = datetime(2020, 11, 18, 23, 0, tzinfo=timezone.utc)
    with engine.connect() as conn:
        later = conn.execute(select(findings.c.id).where(findings.c.relevant_since > cutoff).order_by("id"))
        newest = conn.execute(select(func.max(findings.c.relevant_since))).scalar_one()
    assert list(later.scalars()) == [1, 2]
    assert newest == datetime(2020, 11, 19, 1, tzinfo=timezone.utc)


def test_empty_upsert_writes_nothing(warehouse):
    assert warehouse.upsert_findings([]) == 0
    assert warehouse.count_findings() == 0


# --- other API tables -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "method", "build", "first", "changed"),
    [
        (
            scans,
            "upsert_scans",
            scan_rows,
            {
                "id": "10",
                "status": "SCAN_STATUS_RUNNING",
                "is_full_scan": True,
                "started_at": "2020-11-18T23:28:12Z",
            },
            {
                "id": "10",
                "status": "SCAN_STATUS_COMPLETED",
                "exit_code": 1,
                "completed_at": "2020-11-18T23:30:00Z",
            },
        ),
        (
            policy_rules,
            "upsert_policy_rules",
            lambda items: policy_rule_rows("5", items),
            {"id": "r1", "path": "python.sqli", "policyMode": "MODE_MONITOR"},
            {"id": "r1", "path": "python.sqli", "policyMode": "MODE_BLOCK"},
        ),
        (
            dependencies,
            "upsert_dependencies",
            dependency_rows,
            {"id": "d1", "name": "lodash", "version": "4.17.20", "license": ["MIT"]},
            {"id": "d1", "name": "lodash", "version": "4.17.21", "license": ["MIT"]},
        ),
        (
            dependency_repositories,
            "upsert_dependency_repositories",
            dependency_repository_rows,
            {"id": 3, "name": "acme/web", "numDependencies": 10, "hasDependencyPathScan": False},
            {"id": 3, "name": "acme/web", "numDependencies": 11, "hasDependencyPathScan": True},
        ),
    ],
)
def test_other_tables_upsert_idempotently(warehouse, engine, table, method, build, first, changed):
    upsert = getattr(warehouse, method)
    assert upsert(build([first, first])) == 1
    assert upsert(build([first])) == 0
    assert upsert(build([changed])) == 1
    ((raw,),) = stored(engine, table, "raw")
    assert orjson.loads(raw) == changed


def test_scan_columns_read_back(warehouse, engine):
    warehouse.upsert_scans(
        scan_rows(
            [
                {
                    "id": 7,
                    "repository_id": 3,
                    "commit": "abc",
                    "is_full_scan": False,
                    "exit_code": 2,
                    "started_at": "2020-11-18 23:28:12.391807+00:00",
                    "status": "SCAN_STATUS_ERROR",
                }
            ]
        )
    )
    assert stored(engine, scans, "id", "repository_id", "commit", "is_full_scan", "exit_code", "started_at") == [
        ("7", "3", "abc", False, 2, datetime(2020, 11, 18, 23, 28, 12, 391807, tzinfo=timezone.utc))
    ]


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
