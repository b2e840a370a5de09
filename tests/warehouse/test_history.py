"""Findings history: observed changes (``finding_events``) and daily counts (``finding_snapshots``), on SQLite and
PostgreSQL."""

from __future__ import annotations

from datetime import date
from typing import Any

from findings_provider.warehouse import Warehouse, finding_row_from_dict
from findings_provider.warehouse.history import SNAPSHOT_KEY, snapshot_counts
from findings_provider.warehouse.rows import content_digest
from findings_provider.warehouse.schema import finding_events, finding_snapshots, findings
from sqlalchemy import inspect, select, update
from sqlalchemy.engine import Engine
from warehouse_rows import stored


def finding(finding_id: int, issue_type: str = "sast", **fields) -> tuple:
    return finding_row_from_dict(issue_type, {"id": finding_id, "status": "open", "severity": "high", **fields})


def events(engine: Engine) -> list[tuple]:
    stmt = select(finding_events.c.issue_type, finding_events.c.finding_id, finding_events.c.field,
                  finding_events.c.old_value, finding_events.c.new_value, finding_events.c.run_id)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(stmt.order_by(finding_events.c.id))]


def test_first_observation_is_the_starting_state_not_an_event(warehouse: Warehouse):
    warehouse.upsert_findings([finding(1), finding(2, status="fixed")])
    assert events(warehouse.engine) == []


def test_each_changed_field_is_one_event_with_the_observing_run(engine: Engine):
    first = Warehouse(engine, run_id="scheduled__1")
    first.create_all()
    first.upsert_findings([finding(1), finding(2), finding(3, "sca")])
    second = Warehouse(engine, run_id="manual__2")
    second.upsert_findings([
        finding(1, status="ignored", triage_state="ignored", triage_reason="false_positive"),
        finding(2, severity="critical", external_ticket={"id": 77}),
        finding(3, "sca"),  # unchanged
        finding(4),  # new: no event
    ])
    assert sorted(events(engine)) == sorted([
        ("sast", 1, "status", "open", "ignored", "manual__2"),
        ("sast", 1, "triage_state", None, "ignored", "manual__2"),
        ("sast", 1, "triage_reason", None, "false_positive", "manual__2"),
        ("sast", 2, "severity", "high", "critical", "manual__2"),
        ("sast", 2, "external_ticket_id", None, "77", "manual__2"),
    ])


def test_rereading_the_same_state_records_nothing_twice(warehouse: Warehouse):
    warehouse.upsert_findings([finding(1)])
    changed = [finding(1, status="fixed")]
    warehouse.upsert_findings(changed)
    warehouse.upsert_findings(changed)  # a rerun, or a full refresh, reads the same state
    warehouse.upsert_findings([*changed, *changed])  # and a page that repeats an item
    assert events(warehouse.engine) == [("sast", 1, "status", "open", "fixed", None)]


def test_same_id_in_two_issue_types_is_two_findings(warehouse: Warehouse):
    warehouse.upsert_findings([finding(5), finding(5, "sca")])
    warehouse.upsert_findings([finding(5, "sca", status="fixed"), finding(5)])
    assert events(warehouse.engine) == [("sca", 5, "status", "open", "fixed", None)]


def test_a_page_of_new_and_stored_findings_writes_the_new_and_the_changed(warehouse: Warehouse):
    # on SQLite the new rows go through a plain INSERT and the stored ones through the upsert
    warehouse.upsert_findings([finding(1), finding(2)])
    written = warehouse.upsert_findings([finding(3, "sca"), finding(1), finding(2, status="fixed"), finding(3)])
    assert written == 3  # sca 3, sast 2 (changed), sast 3; sast 1 is unchanged
    assert warehouse.count_findings() == 4
    assert events(warehouse.engine) == [("sast", 2, "status", "open", "fixed", None)]


def test_a_change_outside_the_history_fields_is_written_without_an_event(warehouse: Warehouse):
    warehouse.upsert_findings([finding(1, rule={"message": "old"})])
    ((first_sync,),) = stored(warehouse, findings, "synced_at")
    assert warehouse.upsert_findings([finding(1, rule={"message": "new"})]) == 1
    ((raw, synced_at),) = stored(warehouse, findings, "raw", "synced_at")
    assert '"new"' in raw
    assert synced_at > first_sync
    assert events(warehouse.engine) == []


def test_a_finding_stored_without_a_digest_is_written_once(warehouse: Warehouse):
    """A finding stored before the digest existed counts as changed once: written with its digest (its changes
    recorded; ``synced_at`` kept when ``raw`` is the same), then skipped like any other."""
    warehouse.upsert_findings([finding(1), finding(2), finding(3, "sca")])
    with warehouse.engine.begin() as conn:
        conn.execute(update(findings).values(digest=None))
    before = {(t, i): (s, r) for t, i, s, r in stored(warehouse, findings, "issue_type", "id", "synced_at", "raw")}
    page = [finding(1), finding(2, status="fixed"), finding(3, "sca")]

    assert warehouse.upsert_findings(page) == 3
    after = stored(warehouse, findings, "issue_type", "id", "synced_at", "raw", "digest")
    assert [digest for *_, raw, digest in after] == [content_digest(raw) for *_, raw, _ in after]
    unchanged = {(t, i): (s, r) for t, i, s, r, _ in after if (t, i) != ("sast", 2)}
    assert unchanged == {key: value for key, value in before.items() if key != ("sast", 2)}
    (changed_sync,) = [s for t, i, s, *_ in after if (t, i) == ("sast", 2)]
    assert changed_sync > before[("sast", 2)][0]
    assert events(warehouse.engine) == [("sast", 2, "status", "open", "fixed", None)]

    assert warehouse.upsert_findings(page) == 0
    assert stored(warehouse, findings, "issue_type", "id", "synced_at", "raw", "digest") == after
    assert len(events(warehouse.engine)) == 1


def snapshot(engine: Engine, day: str) -> set[tuple]:
    stmt = select(finding_snapshots.c.issue_type, finding_snapshots.c.repository_name, finding_snapshots.c.severity,
                  finding_snapshots.c.status, finding_snapshots.c["count"]).where(finding_snapshots.c.day == day)
    with engine.connect() as conn:
        return {tuple(r) for r in conn.execute(stmt)}


def test_daily_snapshot_counts_and_is_replaced_by_the_days_last(warehouse: Warehouse):
    repo: dict[str, Any] = {"repository": {"name": "acme/web"}}
    warehouse.upsert_findings([finding(1, **repo), finding(2, **repo), finding(3, status="fixed", **repo),
                               finding(4, "sca", severity=None)])
    assert warehouse.take_snapshot(date(2026, 11, 24)) == 3
    expected = {("sast", "acme/web", "high", "open", 2), ("sast", "acme/web", "high", "fixed", 1),
                ("sca", "", "", "open", 1)}
    assert snapshot(warehouse.engine, "2026-11-24") == expected
    warehouse.upsert_findings([finding(2, status="fixed", **repo)])
    warehouse.take_snapshot(date(2026, 11, 25))
    warehouse.take_snapshot(date(2026, 11, 25))  # a second run the same day replaces, never adds
    assert snapshot(warehouse.engine, "2026-11-25") == {
        ("sast", "acme/web", "high", "open", 1), ("sast", "acme/web", "high", "fixed", 2), ("sca", "", "", "open", 1)}
    assert snapshot(warehouse.engine, "2026-11-24") == expected  # earlier days are kept


def test_the_daily_snapshot_reads_the_covering_index_not_the_rows(warehouse: Warehouse):
    # the snapshot runs after every extraction over every finding: on the 2-3 KB rows it cost five times the CPU
    # (CHANGELOG.md); an index that stops covering SNAPSHOT_KEY, or a key column added without the index, fails
    if warehouse.engine.dialect.name != "sqlite":
        assert {"issue_type", "status", *SNAPSHOT_KEY} <= set(index_columns(warehouse.engine, "ix_findings_counts"))
        return
    sql = str(snapshot_counts(date(2026, 11, 24)).compile(warehouse.engine, compile_kwargs={"literal_binds": True}))
    with warehouse.engine.connect() as conn:
        plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
    assert "USING COVERING INDEX ix_findings_counts" in plan, plan


def index_columns(engine: Engine, name: str) -> list[str | None]:
    return next(i["column_names"] for i in inspect(engine).get_indexes("findings") if i["name"] == name)
