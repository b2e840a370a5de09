"""Warehouses as earlier releases left them, for the tests and the bench that model one: a release made before
versioning (:func:`make_pre_versioning_warehouse`), findings stored at any revision (:func:`store_findings`).

It is built from the tables of revision 0001 (``versioning.baseline_metadata()``, the first versioned release),
never from ``schema.py`` or by upgrading to head: a later revision changes neither what it builds nor its callers
(they name only what the release before versioning lacked, which is part of the baseline). Not the provider's code:
the provider never makes such a warehouse, it only upgrades one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import msgspec
from findings_provider.warehouse import FINDING_COLUMNS, finding_rows
from findings_provider.warehouse.timestamps import utc_now_text
from findings_provider.warehouse.versioning import baseline_metadata
from sqlalchemy import MetaData, Table, insert
from sqlalchemy.engine import Engine


def make_pre_versioning_warehouse(
    engine: Engine,
    findings: Mapping[str, Sequence[msgspec.Raw]] | None = None,
    *,
    without_tables: Collection[str] = (),
    without_columns: Collection[str] = (),
    without_indexes: Collection[str] = (),
) -> None:
    """Create on the empty database of ``engine`` the tables and indexes of revision 0001 but ``without_tables``,
    ``without_columns`` (``"table.column"``) and ``without_indexes``, and no version table; store ``findings`` (raw
    findings by issue type) as that release did: the baseline's columns of their rows (``finding_rows``)."""
    baseline = baseline_metadata()
    baseline.create_all(engine, tables=[t for t in baseline.sorted_tables if t.name not in without_tables])
    store_findings(engine, findings or {})
    with engine.begin() as conn:
        quote = conn.dialect.identifier_preparer.quote
        for index in without_indexes:
            conn.exec_driver_sql(f"DROP INDEX {quote(index)}")
        for qualified in without_columns:
            table, column = qualified.split(".")
            conn.exec_driver_sql(f"ALTER TABLE {quote(table)} DROP COLUMN {quote(column)}")


def store_findings(engine: Engine, findings: Mapping[str, Sequence[msgspec.Raw]]) -> None:
    """Insert ``findings`` (raw findings by issue type) as a release whose ``findings`` table is the one in the
    database stored them: the row builder's values (``finding_rows``) of the columns that table has, whatever
    revision it is at (a plain insert: the product's upsert writes the columns of ``schema.py``)."""
    with engine.begin() as conn:
        stored = Table("findings", MetaData(), autoload_with=conn)
        now = utc_now_text()
        rows = [
            {**{c: v for c, v in zip(FINDING_COLUMNS, row, strict=True) if c in stored.c}, "synced_at": now}
            for issue_type, items in findings.items()
            for row in finding_rows(issue_type, items)
        ]
        if rows:
            conn.execute(insert(stored), rows)


def drop_every_table(engine: Engine) -> None:
    """Drop every table of the engine's (default) schema: the warehouse's, its version table and any other."""
    present = MetaData()
    present.reflect(engine)
    present.drop_all(engine)
