"""The bulk upserts on a real SQLite file and a real PostgreSQL: findings (only what changed is written, raw kept
byte for byte, the last of duplicate keys wins) and the other API tables."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import msgspec
import orjson
import pytest
from findings_provider.warehouse import (
    Warehouse,
    dependency_repository_rows,
    dependency_rows,
    finding_row_from_dict,
    finding_rows,
    make_engine,
    policy_rule_rows,
    scan_rows,
    upsert,
)
from findings_provider.warehouse.rows import FINDING_COLUMNS, content_digest
from findings_provider.warehouse.schema import dependencies, dependency_repositories, findings, policy_rules, scans
from psycopg2.errors import ReadOnlySqlTransaction
from sqlalchemy import event, func, select, text
from sqlalchemy.engine import Engine
from warehouse_rows import finding, stored

# JSON text whose bytes must survive both dialects' bulk paths: whitespace including tab and newline between
# tokens, backslash escapes, quotes, a literal backslash-N, non-ASCII.
AWKWARD_RAW = (
    '{\n\t"id": 1,\r\n "status": "open",'
    ' "rule_message": "a \\"quoted\\" \\\\N \\\\ \\t\\n caf\u00e9 \\u00e9",'
    ' "relevant_since": "2020-11-18T23:28:12.391Z"}'
)


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


def _prepared(rows: list[Any]) -> tuple[list[Any], list[int], list[str]]:
    """``rows`` as the extraction's worker process returns them for a PostgreSQL warehouse: without ``raw`` (their
    last column), with their digests and their COPY text lines."""
    digests = [content_digest(row[-1]) for row in rows]
    return [row[:-1] for row in rows], digests, upsert.finding_copy_lines(rows, digests)


def test_findings_copied_from_their_prepared_lines_are_stored_as_from_their_rows(postgresql_engine):
    """The COPY text lines a worker process formats (``finding_copy_lines``) store the same values as the rows they
    were formatted from, new and changed findings alike, with rows that leave out ``raw`` (the lines carry it):
    awkward text, NULLs, numbers; the marks, ``synced_at`` and the history are the write's own."""
    engine = postgresql_engine
    warehouse = Warehouse(engine)
    warehouse.create_all()
    first = [*finding_rows("sast", [msgspec.Raw(AWKWARD_RAW.encode())]),
             finding(2, rule_message="tab\there\\ and\r\n", match_based_id=None), finding(3, match_based_id="m3")]
    second = [first[0], finding(2, rule_name="changed\ttab", match_based_id=None, status="fixed"),
              finding(4, match_based_id="m3")]
    columns = (*FINDING_COLUMNS, "digest", "counted")
    stores = []
    for with_lines in (True, False):
        with engine.begin() as conn:
            conn.execute(findings.delete())
            conn.execute(text("DELETE FROM finding_events"))
        for rows in (first, second):
            short, digests, lines = _prepared(rows)
            written = (warehouse.upsert_findings(short, digests=digests, lines=lines) if with_lines
                       else warehouse.upsert_findings(rows, digests=digests))
            assert written == (3 if rows is first else 2)
        with engine.connect() as conn:
            events = conn.execute(text("SELECT finding_id, field, old_value, new_value FROM finding_events "
                                       "ORDER BY finding_id, field")).all()
        stores.append((stored(engine, findings, *columns), events))
    assert stores[0] == stores[1]
    from_lines, events = stores[0]
    assert from_lines[0][FINDING_COLUMNS.index("raw")] == AWKWARD_RAW
    assert from_lines[1][FINDING_COLUMNS.index("rule_name")] == "changed\ttab"
    assert ("2", "status", "open", "fixed") in [tuple(map(str, event)) for event in events]
    short, digests, lines = _prepared(second)
    assert warehouse.upsert_findings(short, digests=digests, lines=lines) == 0


def test_copy_lines_are_refused_by_a_sqlite_warehouse(sqlite_engine):
    warehouse = Warehouse(sqlite_engine)
    warehouse.create_all()
    short, digests, lines = _prepared([finding(1)])
    with pytest.raises(ValueError, match=r"lines are COPY text for a PostgreSQL warehouse.* for a sqlite warehouse"):
        warehouse.upsert_findings(short, digests=digests, lines=lines)
    assert stored(sqlite_engine, findings, "id") == []


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


# --- findings: only the new and changed reach the database ----------------------------------------

#: A statement that changes something (SQLite's trace of a connection shows each statement it runs).
WRITE = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b", re.IGNORECASE)


@contextmanager
def observed(engine: Engine) -> Iterator[tuple[Warehouse, list[str]]]:
    """A warehouse on ``engine``'s database whose writes show: on SQLite the statements that write, of every
    connection it opens, are listed; on PostgreSQL its sessions are read-only, so any write (a temporary staging
    table included) raises."""
    writes: list[str] = []
    if engine.dialect.name == "sqlite":
        watched = make_engine(engine.url)

        def trace(dbapi_connection, _record) -> None:
            dbapi_connection.set_trace_callback(lambda sql: writes.append(sql) if WRITE.match(sql) else None)

        event.listen(watched, "connect", trace)
    else:
        options = f"{engine.url.query['options']} -cdefault_transaction_read_only=on"
        watched = make_engine(engine.url.update_query_dict({"options": options}))
    try:
        yield Warehouse(watched), writes
    finally:
        watched.dispose()


def test_an_unchanged_page_sends_no_write_to_the_database(warehouse, engine):
    rows = [finding(i, severity="high") for i in range(1, 51)]
    rows.append(finding_row_from_dict("sca", {"id": 3, "status": "open"}))  # same id, other issue type
    assert warehouse.upsert_findings(rows) == 51
    before = stored(engine, findings, "issue_type", "id", "synced_at", "raw", "digest")
    assert [digest for *_, raw, digest in before] == [content_digest(raw) for *_, raw, _ in before]

    with observed(engine) as (store, writes):
        assert store.upsert_findings(rows) == 0
        assert writes == []
        # the observation sees a write when there is one
        if engine.dialect.name == "sqlite":
            assert store.upsert_findings([finding(1, severity="low")]) == 1
            assert any("ON CONFLICT" in sql for sql in writes)
        else:
            with pytest.raises(ReadOnlySqlTransaction):
                store.upsert_findings([finding(1, severity="low")])
    after = stored(engine, findings, "issue_type", "id", "synced_at", "raw", "digest")
    assert [row for row in after if row[:2] != ("sast", 1)] == [row for row in before if row[:2] != ("sast", 1)]


def test_a_change_only_in_raw_is_written_with_its_digest(warehouse, engine):
    warehouse.upsert_findings([finding(1, rule={"message": "old"}), finding(2)])
    ((first_sync, first_digest),) = stored(engine, findings, "synced_at", "digest", id=1)
    assert warehouse.upsert_findings([finding(1, rule={"message": "new"}), finding(2)]) == 1
    ((raw, digest, synced_at),) = stored(engine, findings, "raw", "digest", "synced_at", id=1)
    assert orjson.loads(raw)["rule"] == {"message": "new"}
    assert digest == content_digest(raw) != first_digest
    assert synced_at > first_sync


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


@pytest.mark.parametrize("second_page", [
    pytest.param([finding(1, severity="high", match_based_id="fp-1")], id="the-same-finding"),
    pytest.param([finding(2, severity="high", match_based_id="fp-1")], id="another-copy-of-its-fingerprint"),
])
def test_concurrent_upserts_of_new_findings_wait_for_each_other(postgresql_engine, monkeypatch, second_page):
    """PostgreSQL copies a page's new findings straight into ``findings``: an upsert that found a finding new must
    still find it so at its COPY. A second upsert of the same finding (or of another copy of its fingerprint),
    started while the first is between its lookup and its COPY, waits for it (the advisory lock), then reads what
    the first stored: both succeed (without the lock, one COPY fails on the primary key), the second's reading is
    kept, and the second copy is stored unmarked (NULL) for the recount to rank, not counted beside the first."""
    warehouse = Warehouse(postgresql_engine)
    warehouse.create_all()
    looked_up, go = threading.Event(), threading.Event()
    real = upsert._lookup

    def pausing(*args: Any) -> Any:
        answer = real(*args)
        if threading.current_thread().name == "first":
            looked_up.set()
            assert go.wait(60)
        return answer

    monkeypatch.setattr(upsert, "_lookup", pausing)
    outcome: dict[str, Any] = {}

    def run(name: str, rows: list[tuple]) -> None:
        try:
            outcome[name] = warehouse.upsert_findings(rows)
        except Exception as error:  # reported by the assertions below
            outcome[name] = error

    first = threading.Thread(target=run, name="first", args=("first", [finding(1, match_based_id="fp-1")]))
    second = threading.Thread(target=run, name="second", args=("second", second_page))
    first.start()
    assert looked_up.wait(60)
    second.start()
    with postgresql_engine.connect() as conn:  # the second waits for the lock (or, without one, finishes)
        for _ in range(600):
            if not second.is_alive() or conn.execute(text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).scalar_one():
                break
            second.join(0.1)
    go.set()
    first.join(60)
    second.join(60)
    assert outcome == {"first": 1, "second": 1}
    rows = stored(postgresql_engine, findings, "id", "severity", "counted")
    assert rows == ([(1, "high", True)] if second_page[0][FINDING_COLUMNS.index("id")] == 1
                    else [(1, None, True), (2, "high", None)])


def test_findings_to_write_names_the_new_and_changed_findings_as_the_upsert_decides(warehouse, engine):
    """``findings_to_write`` (read before the rows are built) answers the positions of the findings the upsert
    would write: new ones, changed ones and those stored without a digest; of duplicate ids the last one, as the
    upsert keeps it; nothing for another issue type's stored findings."""
    stored_rows = [finding(i) for i in range(1, 6)]
    warehouse.upsert_findings(stored_rows)
    with engine.begin() as conn:
        conn.execute(findings.update().where(findings.c.id == 4).values(digest=None))
    page = [finding(1), finding(2, status="fixed"), finding(3), finding(4), finding(9), finding(3, status="fixed"),
            finding(5)]
    digests = [content_digest(row[-1]) for row in page]
    ids = [row[FINDING_COLUMNS.index("id")] for row in page]

    assert warehouse.findings_to_write("sast", ids, digests) == [1, 3, 4, 5]
    assert warehouse.findings_to_write("sca", ids, digests) == [0, 1, 3, 4, 5, 6]  # none stored as sca
    assert warehouse.findings_to_write("sast", [], []) == []
    # the upsert writes exactly those (its own lookup, under its lock)
    assert warehouse.upsert_findings(page) == 4
    # nothing left: the first copy of id 3 differs from the stored one, but the last copy, stored now, is the page's
    assert warehouse.findings_to_write("sast", ids, digests) == []
