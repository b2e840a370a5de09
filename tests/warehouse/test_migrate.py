"""A warehouse made before versioning gains the columns and indexes of revision 0001 on first use, finding columns
filled from each finding's stored ``raw`` (each test builds such a warehouse from revision 0001 with
``devtools.warehouse.make_pre_versioning_warehouse``, less what the release before versioning lacked)."""

from __future__ import annotations

import pytest
from finding_payloads import ITEMS, SAST, raw
from findings_provider.warehouse import Warehouse, finding_rows
from findings_provider.warehouse import migrate as migrate_module
from findings_provider.warehouse.schema import findings
from sqlalchemy import inspect, select

from devtools.warehouse import make_pre_versioning_warehouse


def _older_warehouse(engine) -> Warehouse:
    """A warehouse as the release before versioning left it: findings stored, without ``validation_state`` and
    ``path``."""
    make_pre_versioning_warehouse(engine, {t: [raw(item)] for t, item in ITEMS.items()},
                                  without_columns=("findings.validation_state", "findings.path"))
    assert "path" not in {c["name"] for c in inspect(engine).get_columns("findings")}
    return Warehouse(engine)


def test_create_all_adds_new_columns_and_fills_them_from_raw(engine):
    store = _older_warehouse(engine)
    store.create_all()
    with engine.connect() as conn:
        got = {(r.issue_type, r.id): (r.validation_state, r.path) for r in conn.execute(
            select(findings.c.issue_type, findings.c.id, findings.c.validation_state, findings.c.path))}
    assert got == {
        ("secrets", 691234): ("confirmed_valid", "config/aws.py"),
        ("sast", 17): (None, "src/db.py"),
        ("sca", 18): (None, "web/package.json"),
        ("ai_sast", 19): (None, "src/ai.py"),
    }
    # later upserts write the new columns, and a second create_all finds nothing to do
    store.upsert_findings(finding_rows("sast", [raw({**SAST, "location": {"filePath": "b.py"}})]))
    store.create_all()
    with engine.connect() as conn:
        assert conn.execute(select(findings.c.path).where(findings.c.id == 17)).scalar_one() == "b.py"


def test_backfill_pages_through_every_finding(engine, monkeypatch):
    """More findings than one batch: every one is filled (the keyset paging does not stop early or repeat)."""
    monkeypatch.setattr(migrate_module, "BACKFILL_BATCH", 2)
    items = [{"id": i, "location": {"filePath": f"f{i}.py"}} for i in range(1, 8)]
    make_pre_versioning_warehouse(engine, {"sast": [raw(i) for i in items], "ai_sast": [raw(items[0])]},
                                  without_columns=("findings.path",))
    Warehouse(engine).create_all()
    with engine.connect() as conn:
        paths = dict(conn.execute(select(findings.c.id, findings.c.path).where(findings.c.issue_type == "sast")).all())
        ai = conn.execute(select(findings.c.path).where(findings.c.issue_type == "ai_sast")).scalar_one()
    assert paths == {i: f"f{i}.py" for i in range(1, 8)}
    assert ai == "f1.py"


def test_a_not_null_column_is_refused_with_its_name(engine):
    from sqlalchemy import Column, Text

    store = Warehouse(engine)
    store.create_all()
    column = Column("made_up", Text, nullable=False)
    with engine.begin() as conn, pytest.raises(RuntimeError, match=r"findings\.made_up"):
        migrate_module.add_columns(conn, {"findings": [column]})


def test_an_index_of_the_baseline_is_created_on_first_use(engine) -> None:
    make_pre_versioning_warehouse(engine, without_indexes=("ix_findings_rule",))
    assert "ix_findings_rule" not in {i["name"] for i in inspect(engine).get_indexes("findings")}
    Warehouse(engine).create_all()
    assert "ix_findings_rule" in {i["name"] for i in inspect(engine).get_indexes("findings")}
