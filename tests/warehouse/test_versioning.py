"""The versioned warehouse (Alembic): revision 0001 is schema.py, a next revision keeps every row, a warehouse made
before versioning is brought to head and stamped, the fast path is one query, and first use is safe to race."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from datetime import date, datetime, timezone
from pathlib import Path

import msgspec
import orjson
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from finding_payloads import ITEMS, SAST, raw
from findings_provider.client.models import Project
from findings_provider.governance import sbom
from findings_provider.pipeline import freshness, ledger
from findings_provider.warehouse import (
    TicketAction,
    Warehouse,
    branches,
    dependency_repository_rows,
    dependency_rows,
    finding_rows,
    make_engine,
    policy_rule_rows,
    scan_rows,
    versioning,
)
from findings_provider.warehouse.__main__ import main
from findings_provider.warehouse.rows import content_digest
from findings_provider.warehouse.schema import finding_events, findings, metadata
from findings_provider.warehouse.versioning import VERSION_TABLE
from sqlalchemy import Index, column, event, func, inspect, select, table, text
from sqlalchemy.engine import Dialect, Engine

from devtools.warehouse import make_pre_versioning_warehouse, store_findings

#: The test-only revision after the shipped head (a nullable finding column filled from raw, and a new table).
FIXTURE = Path(__file__).with_name("migrations_fixture")
NEXT = "next_fixture"
#: The head of the shipped revisions (the tests hold for whichever it is).
(HEAD,) = versioning.head_revisions()

def versions(engine: Engine) -> list[str]:
    """The rows of the version table."""
    with engine.connect() as conn:
        return list(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())


def differences(engine: Engine) -> list:
    """What Alembic's autogenerate finds between the database and ``schema.metadata`` (types compared), but for
    expression indexes that differ only in layout (``written_alike``)."""
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE, "compare_type": True})
        found = compare_metadata(context, metadata)
        replaced: dict[str, list[Index]] = {}
        for d in found:
            if isinstance(d, tuple) and d[0] in ("remove_index", "add_index"):
                replaced.setdefault(d[1].name, []).append(d[1])
        alike = {name for name, pair in replaced.items()
                 if len(pair) == 2 and written_alike(pair[0], pair[1], conn.dialect)}
        return [d for d in found if not (isinstance(d, tuple) and d[1].name in alike)]


def written_alike(one: Index, other: Index, dialect: Dialect) -> bool:
    """Whether two indexes (one read from the database, one declared) are the same: same uniqueness and the same
    expressions once PostgreSQL's casts (``::text``) and all layout are taken out. PostgreSQL gives an expression
    back with casts and line breaks, which Alembic (it removes casts and spaces, not line breaks) reports as the
    index removed and added again; any other difference (a word, a value, an order) still counts."""
    def written(index: Index) -> list[str]:
        return [re.sub(r"::\w+|\s+", "", e if isinstance(e, str) else str(e.compile(dialect=dialect, compile_kwargs={
            "literal_binds": True, "include_table": False}))) for e in index.expressions]
    return one.unique == other.unique and written(one) == written(other)


def contents(engine: Engine) -> dict[str, list[tuple]]:
    """Every row of every table of ``schema.metadata`` as the driver returns it (no type processing), sorted."""
    out = {}
    with engine.connect() as conn:
        for stored in metadata.sorted_tables:
            plain = table(stored.name, *(column(c.name) for c in stored.columns))
            out[stored.name] = sorted((tuple(row) for row in conn.execute(select(plain))), key=repr)
    return out


def fill_every_table(store: Warehouse) -> None:
    """At least one row in every table, each written by the product's own code."""
    for issue_type, item in ITEMS.items():
        store.upsert_findings(finding_rows(issue_type, [raw(item)]))
    store.run_id = "run-2"
    store.upsert_findings(finding_rows("sast", [raw({**SAST, "status": "fixed", "severity": "low"})]))  # events
    store.upsert_scans(scan_rows([{"id": "10", "status": "SCAN_STATUS_COMPLETED", "is_full_scan": True,
                                   "started_at": "2020-11-18T23:28:12Z", "exit_code": 0}]))
    store.upsert_policy_rules(policy_rule_rows("5", [{"id": "r1", "path": "python.sqli",
                                                      "policyMode": "MODE_MONITOR"}]))
    store.upsert_dependencies(dependency_rows([{"id": "d1", "name": "lodash", "version": "4.17.21",
                                                "license": ["MIT"]}]))
    store.upsert_dependency_repositories(dependency_repository_rows([{"id": 3, "name": "acme/web",
                                                                      "numDependencies": 10}]))
    action = store.record_triage_action(run_id="run-2", dag_id="autotriage_triage", issue_type="sast",
                                        dry_run=False, issue_ids=[17], request={"issue_ids": [17]})
    store.update_triage_action(action, status="succeeded", response={"ok": True}, num_triaged=1)
    store.record_ticket_actions([TicketAction("sca", 18, "succeeded", run_id="run-2", ticket_id=99,
                                              ticket_url="https://tracker.example.com/99", external_slug="T-99")])
    store.set_state("watermark:sast", {"since": "2024-07-11T20:46:25Z"})
    store.record_policy_change(run_id="run-2", policy_id="5", rule_path="python.sqli", previous_mode="MODE_MONITOR",
                               new_mode="MODE_BLOCK", status="applied", response={"ok": True})
    ledger.record(store, ledger.TRIAGE, "fixed-noise", "ai_sast", [19], "run-2")
    freshness.record_drops(store, {18: "changed in the service by a person"}, kind="ticket", policy="critical",
                           issue_type="sca", run_id="run-2")
    branches.store_projects(store, [Project(id=3, name="acme/web", primary_branch="main")],
                            now=datetime(2026, 11, 26, tzinfo=timezone.utc))
    store.take_snapshot(date(2026, 11, 26))
    sbom.store_export(store, sbom.ExportJob(3, "tok-1", sbom.COMPLETED), {
        "bomFormat": "CycloneDX", "specVersion": "1.6",
        "components": [{"name": "lodash", "version": "4.17.21", "purl": "pkg:npm/lodash@4.17.21",
                        "licenses": [{"license": {"id": "MIT"}}]}]})
    store.save_report("summary", "Open findings", "<html><body>3 open</body></html>")


# --- revision 0001 is schema.py ------------------------------------------------------------------


def test_an_empty_database_upgraded_to_head_is_exactly_schema_metadata(engine):
    (head,) = versioning.head_revisions()
    assert versioning.upgrade(engine) == head
    assert versions(engine) == [head]
    assert differences(engine) == []
    # the comparison sees a difference when there is one (a missing index, a column of another type)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_findings_rule")
        conn.exec_driver_sql("ALTER TABLE reports DROP COLUMN run_id")
        conn.exec_driver_sql("ALTER TABLE reports ADD COLUMN run_id INTEGER")
    found = {(d[0] if isinstance(d, tuple) else d[0][0]) for d in differences(engine)}
    assert found == {"add_index", "modify_type"}
    if engine.dialect.name == "postgresql":  # SQLite's expression indexes cannot be read back, so not compared
        with engine.begin() as conn:  # the severity order's index, with two severities swapped
            conn.exec_driver_sql("DROP INDEX ix_findings_severity_order")
            conn.exec_driver_sql("CREATE INDEX ix_findings_severity_order ON findings ((CASE severity "
                                 "WHEN 'high' THEN 0 WHEN 'critical' THEN 1 WHEN 'medium' THEN 2 WHEN 'low' THEN 3 "
                                 "ELSE 4 END), relevant_since, issue_type, id, counted, status, severity)")
        assert {(d[0], d[1].name) for d in differences(engine) if isinstance(d, tuple) and "index" in d[0]} == {
            ("add_index", "ix_findings_rule"), ("remove_index", "ix_findings_severity_order"),
            ("add_index", "ix_findings_severity_order")}


def test_the_recorded_baseline_is_what_revision_0001_creates(engine):
    """The MetaData a pre-versioning warehouse is brought to (0001's ``create_schema`` on a recorder) is exactly
    what revision 0001 creates through Alembic."""
    baseline = versioning.baseline_metadata()
    # the tables later revisions added
    assert set(metadata.tables) - set(baseline.tables) == {"projects", "sboms", "sbom_components"}
    assert versioning.upgrade(engine, target=versioning.BASELINE) == versioning.BASELINE
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE, "compare_type": True})
        assert compare_metadata(context, baseline) == []


# --- a next revision keeps every row ------------------------------------------------------------------


def test_a_next_revision_keeps_every_row_of_a_first_release_warehouse(engine):
    store = Warehouse(engine, run_id="run-1")
    store.create_all()
    assert versions(engine) == [HEAD]
    fill_every_table(store)
    before = contents(engine)
    assert [name for name, rows in before.items() if not rows] == []  # every table holds rows

    assert versioning.upgrade(engine, version_locations=[FIXTURE]) == NEXT

    assert versions(engine) == [NEXT]
    assert contents(engine) == before
    with engine.connect() as conn:
        added = dict(conn.execute(text("SELECT id, fixture_raw_status FROM findings")).all())
        assert conn.execute(text("SELECT count(*) FROM fixture_notes")).scalar_one() == 0
    assert added == {691234: "FINDING_STATUS_OPEN", 17: "fixed", 18: "open", 19: "open"}
    # the product keeps writing to the upgraded tables, and the fast path holds at the new head
    store.upsert_findings(finding_rows("sast", [raw({**SAST, "status": "open"})]))
    assert store.count_findings("sast", status="open") == 1
    assert versioning.is_current(engine, [FIXTURE])
    assert not versioning.is_current(engine)  # this release's own scripts do not know the next revision


def test_a_warehouse_at_a_revision_this_release_does_not_know_is_refused_by_name(engine):
    versioning.upgrade(engine, version_locations=[FIXTURE])
    with pytest.raises(RuntimeError, match=rf"revision '{NEXT}'.*knows .*{HEAD}"):
        Warehouse(engine).create_all()


# --- a warehouse made before versioning ------------------------------------------------------------


def _unversioned_warehouse(engine: Engine) -> dict:
    """A warehouse as the release before versioning left it, without ``path``, ``validation_state``, the index
    ``ix_findings_rule`` and the table ``reports``; return its findings' stored columns."""
    make_pre_versioning_warehouse(engine, {t: [raw(item)] for t, item in ITEMS.items()}, without_tables=("reports",),
                                  without_columns=UNVERSIONED_LACKS, without_indexes=("ix_findings_rule",))
    Warehouse(engine).set_state("watermark:sast", {"since": "2024-07-11T20:46:25Z"})
    assert VERSION_TABLE not in inspect(engine).get_table_names()
    return _kept(engine)


#: The finding columns of revision 0001 that the release before versioning lacked.
UNVERSIONED_LACKS = ("findings.validation_state", "findings.path")


def _kept(engine: Engine) -> dict:
    """The stored findings' columns of the release before versioning, by key, as the driver returns them."""
    names = [c.name for c in versioning.baseline_metadata().tables["findings"].columns
             if f"findings.{c.name}" not in UNVERSIONED_LACKS]
    stored = table("findings", *(column(n) for n in names))
    with engine.connect() as conn:
        return {(r.issue_type, r.id): tuple(r) for r in conn.execute(select(stored))}


def test_a_warehouse_made_before_versioning_is_brought_to_head_and_stamped(engine):
    kept = _unversioned_warehouse(engine)
    Warehouse(engine).create_all()
    assert versions(engine) == [HEAD]
    assert differences(engine) == []
    assert _kept(engine) == kept
    with engine.connect() as conn:
        filled = {(r.issue_type, r.id): (r.validation_state, r.path) for r in conn.execute(
            select(findings.c.issue_type, findings.c.id, findings.c.validation_state, findings.c.path))}
    assert filled == {
        ("secrets", 691234): ("confirmed_valid", "config/aws.py"),
        ("sast", 17): (None, "src/db.py"),
        ("sca", 18): (None, "web/package.json"),
        ("ai_sast", 19): (None, "src/ai.py"),
    }
    assert Warehouse(engine).get_state("watermark:sast") == {"since": "2024-07-11T20:46:25Z"}


def test_a_warehouse_made_before_versioning_is_stamped_0001_then_upgraded_through_later_revisions(engine):
    kept = _unversioned_warehouse(engine)
    assert versioning.upgrade(engine, version_locations=[FIXTURE]) == NEXT
    assert versions(engine) == [NEXT]
    assert _kept(engine) == kept
    with engine.connect() as conn:
        got = dict(conn.execute(text("SELECT id, fixture_raw_status FROM findings")).all())
    assert got == {691234: "FINDING_STATUS_OPEN", 17: "open", 18: "open", 19: "open"}


def test_findings_stored_before_the_content_digest_are_written_once_after_the_upgrade(engine):
    """Findings stored at revision 0005 have no digest (``findings.digest``, revision 0006): the
    first upsert after the upgrade writes each of them once, with its digest, keeping its ``synced_at`` (its raw is
    unchanged) and recording no event; the next upsert writes none."""
    assert versioning.upgrade(engine, target="0005") == "0005"
    store_findings(engine, {t: [raw(item)] for t, item in ITEMS.items()})
    Warehouse(engine).create_all()
    columns = (findings.c.issue_type, findings.c.id, findings.c.synced_at, findings.c.raw, findings.c.digest)
    with engine.connect() as conn:
        before = conn.execute(select(*columns).order_by(findings.c.issue_type)).all()
    assert [r.digest for r in before] == [None] * len(ITEMS)

    store = Warehouse(engine, run_id="after-upgrade")
    page = [row for t, item in ITEMS.items() for row in finding_rows(t, [raw(item)])]
    assert store.upsert_findings(page) == len(ITEMS)
    with engine.connect() as conn:
        after = conn.execute(select(*columns).order_by(findings.c.issue_type)).all()
        assert conn.execute(select(func.count()).select_from(finding_events)).scalar_one() == 0
    assert [r[:4] for r in after] == [r[:4] for r in before]
    assert [r.digest for r in after] == [content_digest(r.raw) for r in after]
    assert store.upsert_findings(page) == 0


def test_marks_left_stale_by_updates_before_revision_0008_are_recounted_by_the_upgrade(engine):
    """Before revision 0008 an update that moved a counted copy to another fingerprint left its old fingerprint's
    copies all marked not counted, and copies without a repository stayed unmarked: the upgrade recounts them."""
    assert versioning.upgrade(engine, target="0007") == "0007"

    def copy(ident: int, ref: str, since: str, repository: str | None) -> msgspec.Raw:
        body = {"id": ident, "ref": ref, "relevant_since": since, "match_based_id": "fp", "status": "open"}
        return msgspec.Raw(orjson.dumps(body if repository is None else {**body, "repository": {"name": repository}}))

    store_findings(engine, {"sast": [copy(1, "dev", "2026-01-01T00:00:00Z", "acme/api"),
                                     copy(2, "dev", "2026-02-01T00:00:00Z", "acme/api"),
                                     copy(3, "dev", "2026-01-01T00:00:00Z", None),
                                     copy(4, "dev", "2026-02-01T00:00:00Z", None)]})
    with engine.begin() as conn:
        conn.execute(findings.update().where(findings.c.id.in_([1, 2])).values(counted=False))
    Warehouse(engine).create_all()
    with engine.connect() as conn:
        assert dict(conn.execute(select(findings.c.id, findings.c.counted)).all()) == {
            1: False, 2: True, 3: False, 4: True}


# --- the fast path --------------------------------------------------------------------------------


def _statements(engine: Engine, work) -> list[str]:
    """The SQL statements ``work()`` sends through ``engine``."""
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return sent


def test_create_all_on_a_current_warehouse_is_two_selects(engine):
    Warehouse(engine).create_all()
    sent = _statements(engine, Warehouse(engine).create_all)
    assert len(sent) == 2, sent
    assert all(s.lstrip().upper().startswith("SELECT") for s in sent)
    assert VERSION_TABLE in sent[0]
    # the findings table's indexes, from the catalogue: none missing, none built (warehouse.indexes)
    assert ("sqlite_master" if engine.dialect.name == "sqlite" else "pg_indexes") in sent[1]
    # a warehouse behind the scripts' head is upgraded (the fast path is not taken blindly)
    sent = _statements(engine, lambda: versioning.ensure_current(engine, [FIXTURE]))
    assert any(s.lstrip().upper().startswith("ALTER TABLE") for s in sent), sent
    assert versions(engine) == [NEXT]


# --- concurrent first use ------------------------------------------------------------------------


def test_two_workers_on_an_empty_database_leave_one_version_row(engine):
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def first_use() -> None:
        own = make_engine(engine.url)  # a worker of its own: its own pool and connections
        try:
            barrier.wait()
            Warehouse(own).create_all()
        except BaseException as error:
            errors.append(error)
        finally:
            own.dispose()

    workers = [threading.Thread(target=first_use) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert versions(engine) == [HEAD]
    assert differences(engine) == []


def test_two_processes_upgrading_by_hand_at_once_leave_one_version_row(engine):
    url = engine.url.render_as_string(hide_password=False)
    command = [sys.executable, "-m", "findings_provider.warehouse", "upgrade", "--url", url]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=os.environ.copy()) for _ in range(2)]
    outcomes = [(p.wait(timeout=120), *p.communicate()) for p in processes]
    assert [(code, out.strip()) for code, out, _ in outcomes] == [(0, f"warehouse at revision {HEAD}")] * 2, outcomes
    assert versions(engine) == [HEAD]


# --- the command ------------------------------------------------------------------------------------


def test_current_and_upgrade_commands(engine, capsys):
    url = engine.url.render_as_string(hide_password=False)
    assert main(["current", "--url", url]) == 0
    assert capsys.readouterr().out == f"warehouse at revision none (not versioned) (not head: upgrade to {HEAD})\n"
    assert main(["upgrade", "--url", url]) == 0
    assert capsys.readouterr().out == f"warehouse at revision {HEAD}\n"
    assert main(["current", "--url", url]) == 0
    assert capsys.readouterr().out == f"warehouse at revision {HEAD} (head)\n"
    assert differences(engine) == []
