"""A first load builds the findings table's secondary indexes after its pulls (``warehouse.indexes``): they are
all there afterwards, whatever happened, and the rows and counted marks are those of a load that kept them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from findings_provider.client import ValidationError
from findings_provider.pipeline import extraction
from findings_provider.warehouse import Warehouse, indexes
from findings_provider.warehouse.schema import findings
from fixtures import make_warehouse
from sqlalchemy import inspect, select, text
from warehouse_rows import stored

from devtools.warehouse import drop_every_table

from .fakes import FakeApi, finding

#: Every index the metadata gives ``findings`` (the primary key's aside).
EVERY_INDEX = {str(index.name) for index in findings.indexes}
#: The one a load reads on every insert (the counted mark's lookup of the new row's fingerprint): never dropped.
LOAD_INDEX = "ix_findings_fingerprint"
DEFERRED = EVERY_INDEX - {LOAD_INDEX}


@pytest.fixture(params=["sqlite", "postgresql"])
def any_warehouse(request, tmp_path) -> Iterator[Warehouse]:
    """An empty warehouse on SQLite, then on PostgreSQL (a scratch schema)."""
    if request.param == "sqlite":
        warehouse = make_warehouse(tmp_path / "warehouse.db")
        yield warehouse
    else:
        warehouse = make_warehouse(request.getfixturevalue("postgres_schema_url"))
        yield warehouse
        drop_every_table(warehouse.engine)
    warehouse.engine.dispose()


def index_names(warehouse: Warehouse) -> set[str]:
    """The indexes ``findings`` has, but its key's: SQLite's ``index_list`` pragma (SQLAlchemy's inspector skips an
    expression index there), PostgreSQL's inspector."""
    if warehouse.engine.dialect.name == "sqlite":
        with warehouse.engine.connect() as conn:
            listed = conn.exec_driver_sql(f"PRAGMA index_list({findings.name})").all()
        return {str(row.name) for row in listed if row.origin == "c"}  # c: CREATE INDEX (pk: the primary key's)
    return {str(i["name"]) for i in inspect(warehouse.engine).get_indexes(findings.name)}


def copies(count: int) -> list[dict]:
    """``count`` findings, most of them copies of another on several branches (shared fingerprints), newest
    first in id order."""
    out = []
    for i in range(1, count + 1):
        f = finding(i, minutes_ago=i, repo=f"acme/r{i % 3}", rule=f"rule.{i % 5}")
        f.update(match_based_id=f"fp-{i % 17}", ref=("main", "dev", "feature")[i % 3])
        out.append(f)
    return out


def deferring_on(warehouse: Warehouse) -> bool:
    return warehouse.engine.dialect.name in indexes.DEFERRED_ON


@pytest.fixture
def seen_during_pulls(monkeypatch) -> list[set[str]]:
    """The indexes ``findings`` had when each pull started (``extract_findings`` run as it is, observed)."""
    seen: list[set[str]] = []
    real = extraction.extract_findings

    def observed(client, warehouse, issue_type, **kwargs):
        with warehouse.engine.connect() as conn:
            seen.append(indexes.existing_indexes(conn))
        return real(client, warehouse, issue_type, **kwargs)

    monkeypatch.setattr(extraction, "extract_findings", observed)
    return seen


def run(api: FakeApi, warehouse: Warehouse, types=("sast",)) -> dict:
    return extraction.run_extraction(api.client(), warehouse, list(types), full_refresh=True, page_size=100)


def test_a_first_load_leaves_every_index_of_the_metadata(api: FakeApi, any_warehouse, seen_during_pulls) -> None:
    api.findings["sast"] = copies(250)
    api.findings["sca"] = copies(40)
    run(api, any_warehouse, types=("sast", "sca"))

    assert index_names(any_warehouse) == EVERY_INDEX
    assert len(seen_during_pulls) == 2
    for during in seen_during_pulls:  # the load's own index stays; the others are built after it where deferred
        assert LOAD_INDEX in during
        assert (during & DEFERRED) == (set() if deferring_on(any_warehouse) else DEFERRED)


def every_column(warehouse: Warehouse) -> list[tuple]:
    """Every stored finding's columns but ``synced_at``, the counted mark and digest included, in key order."""
    return stored(warehouse, findings, *(c.name for c in findings.c if c.name != "synced_at"))


def test_the_rows_and_counted_marks_equal_those_of_a_load_that_keeps_its_indexes(
        api: FakeApi, any_warehouse, tmp_path, monkeypatch) -> None:
    api.findings["sast"] = copies(400)
    api.findings["sca"] = copies(60)
    run(api, any_warehouse, types=("sast", "sca"))

    monkeypatch.setattr(indexes, "DEFERRED_ON", frozenset())
    kept = make_warehouse(tmp_path / "kept.db")
    run(api, kept, types=("sast", "sca"))

    deferred_rows = every_column(any_warehouse)
    assert len(deferred_rows) == 460
    with any_warehouse.engine.connect() as conn:  # the copies of one fingerprint were ranked
        assert set(conn.execute(select(findings.c.counted)).scalars()) == {True, False}
    assert deferred_rows == every_column(kept)
    kept.engine.dispose()


def test_a_pull_that_fails_midway_leaves_every_index(api: FakeApi, any_warehouse, seen_during_pulls) -> None:
    api.findings["sast"] = copies(250)
    api.fail_findings_page = 1
    with pytest.raises(ValidationError):
        run(api, any_warehouse)

    assert any_warehouse.count_findings("sast") == 100  # the first page is stored
    assert index_names(any_warehouse) == EVERY_INDEX
    assert (seen_during_pulls[0] & DEFERRED) == (set() if deferring_on(any_warehouse) else DEFERRED)


class TaskTimeout(BaseException):
    """What a task's timeout raises in the middle of a pull (Airflow's ``AirflowTaskTimeout`` is no ``Exception``:
    nothing on the way catches it)."""


def test_a_load_stopped_midway_by_what_no_pull_catches_leaves_every_index(
        api: FakeApi, any_warehouse, monkeypatch) -> None:
    api.findings["sast"] = copies(250)
    real = extraction._store_page
    stored_pages: list[int] = []

    def timed_out(*args, **kwargs):
        if stored_pages:
            raise TaskTimeout
        stored_pages.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(extraction, "_store_page", timed_out)
    with pytest.raises(TaskTimeout):
        run(api, any_warehouse)

    assert any_warehouse.count_findings("sast") == 100
    assert index_names(any_warehouse) == EVERY_INDEX


def test_an_index_missing_is_built_by_the_next_extraction(api: FakeApi, any_warehouse, seen_during_pulls) -> None:
    api.findings["sast"] = copies(120)
    run(api, any_warehouse)
    with any_warehouse.engine.begin() as conn:  # as a first load killed midway leaves them
        conn.execute(text("DROP INDEX ix_findings_rule"))
        conn.execute(text("DROP INDEX ix_findings_severity_order"))
    assert index_names(any_warehouse) == EVERY_INDEX - {"ix_findings_rule", "ix_findings_severity_order"}

    run(api, any_warehouse)

    assert seen_during_pulls[-1] >= EVERY_INDEX  # built before the pull, on a warehouse that holds findings
    assert index_names(any_warehouse) == EVERY_INDEX


def test_create_all_builds_an_index_missing(any_warehouse) -> None:
    assert indexes.drop_deferrable(any_warehouse.engine) == sorted(DEFERRED)
    assert index_names(any_warehouse) == {LOAD_INDEX}

    any_warehouse.create_all()

    assert index_names(any_warehouse) == EVERY_INDEX
    assert indexes.build_missing(any_warehouse.engine) == []  # nothing left to build


def test_a_load_into_a_warehouse_that_holds_findings_drops_nothing(
        api: FakeApi, any_warehouse, seen_during_pulls) -> None:
    api.findings["sast"] = copies(120)
    run(api, any_warehouse)
    api.findings["sast"] = copies(300)  # 180 new findings, the others unchanged

    result = run(api, any_warehouse)

    assert result["issue_types"]["sast"]["written"] == 180
    assert seen_during_pulls[-1] >= EVERY_INDEX
    assert index_names(any_warehouse) == EVERY_INDEX


def test_another_task_building_the_indexes_during_a_first_load_changes_no_row(
        api: FakeApi, any_warehouse, tmp_path, monkeypatch) -> None:
    """A task that starts beside a first load (its own engine, its ``create_all``) builds the missing indexes while
    findings are half stored; the load goes on with them and stores what a load that kept them stores."""
    api.findings["sast"] = copies(300)
    api.findings["sca"] = copies(50)
    real = extraction.extract_findings
    during: list[set[str]] = []

    def beside(client, warehouse, issue_type, **kwargs):
        if issue_type == "sca":  # the sast findings are stored, the sca ones not yet
            other = make_warehouse(warehouse.engine.url.render_as_string(hide_password=False))  # its create_all
            other.engine.dispose()
            with warehouse.engine.connect() as conn:
                during.append(indexes.existing_indexes(conn))
        return real(client, warehouse, issue_type, **kwargs)

    monkeypatch.setattr(extraction, "extract_findings", beside)
    run(api, any_warehouse, types=("sast", "sca"))
    monkeypatch.setattr(extraction, "extract_findings", real)
    monkeypatch.setattr(indexes, "DEFERRED_ON", frozenset())
    kept = make_warehouse(tmp_path / "kept.db")
    run(api, kept, types=("sast", "sca"))

    key = "sqlite_autoindex_findings_1" if any_warehouse.engine.dialect.name == "sqlite" else "pk_findings"
    assert during == [EVERY_INDEX | {key}]  # built by the other task, mid-load
    assert index_names(any_warehouse) == EVERY_INDEX
    assert every_column(any_warehouse) == every_column(kept)
    kept.engine.dispose()
