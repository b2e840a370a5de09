"""Every schema step fills the ``findings`` columns read from the API that it adds, for the findings already stored,
exactly as a fresh load of the same raw findings fills them (the revision's ``fill_finding_columns`` call; "A new
warehouse column or table" in docs/extending.md, step 3).

The steps: a warehouse made before versioning brought to revision 0001 (lacking every such column of 0001, so the
check runs while 0001 is the only revision), then each shipped revision from the one before it. The findings are
one of each issue type with every field of ``canonical.FINDING_FIELDS`` set (``finding_payloads.every_field``: a
new column has a value without a change here) and the hand-written ones of ``finding_payloads.ITEMS``.
"""

from __future__ import annotations

from typing import Any

import pytest
from alembic.script import ScriptDirectory
from finding_payloads import ITEMS, every_field, raw
from findings_provider.client.canonical import ISSUE_TYPES
from findings_provider.warehouse import FINDING_COLUMNS, Warehouse, finding_rows, versioning
from findings_provider.warehouse.schema import findings
from sqlalchemy import inspect, select
from sqlalchemy.engine import Engine

from devtools.warehouse import drop_every_table, make_pre_versioning_warehouse, store_findings

FINDINGS = {t: [raw(every_field(100 + n)), *([raw(ITEMS[t])] if t in ITEMS else [])]
            for n, t in enumerate(ISSUE_TYPES)}
#: Columns of a finding's row that are not read from the API's fields.
KEYS_AND_RAW = ("issue_type", "id", "raw")


def _steps() -> list[tuple[str | None, str]]:
    """(revision before, revision) for every shipped revision, in order; None before the baseline (a warehouse
    made before versioning)."""
    script = ScriptDirectory.from_config(versioning.alembic_config())
    order = [r.revision for r in reversed(list(script.walk_revisions()))]
    return list(zip([None, *order[:-1]], order, strict=True))


def _columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("findings")}


def _values(engine: Engine, names: list[str]) -> dict[str, dict[tuple[str, int], Any]]:
    """The stored values of the columns ``names``, by column and finding."""
    with engine.connect() as conn:
        rows = conn.execute(select(findings.c.issue_type, findings.c.id, *(findings.c[n] for n in names))).all()
    return {name: {(r[0], r[1]): r[2 + i] for r in rows} for i, name in enumerate(names)}


@pytest.mark.parametrize(("before", "revision"), _steps(), ids=lambda r: r or "unversioned")
def test_a_step_fills_the_finding_columns_it_adds_as_a_fresh_load_does(engine, before, revision):
    if before is None:
        baseline = versioning.baseline_metadata().tables["findings"]
        lacking = [c for c in FINDING_COLUMNS if c in baseline.c and c not in KEYS_AND_RAW]
        make_pre_versioning_warehouse(engine, FINDINGS, without_columns=[f"findings.{c}" for c in lacking],
                                      without_indexes=[i.name for i in baseline.indexes if i.name])
    else:
        versioning.upgrade(engine, target=before)
        store_findings(engine, FINDINGS)
    had = _columns(engine)

    assert versioning.upgrade(engine, target=revision) == revision

    added = [c for c in FINDING_COLUMNS if c in _columns(engine) - had]
    if before is None:
        assert added == lacking
    migrated = _values(engine, added)
    drop_every_table(engine)
    store = Warehouse(engine)
    store.create_all()
    for issue_type, items in FINDINGS.items():
        store.upsert_findings(finding_rows(issue_type, items))
    fresh = _values(engine, added)
    assert [name for name, by_finding in fresh.items() if set(by_finding.values()) == {None}] == []  # all compared
    assert migrated == fresh
