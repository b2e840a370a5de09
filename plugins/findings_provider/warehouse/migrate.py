"""Bring an unversioned warehouse up to a set of tables: add the columns and indexes later versions added.

A warehouse made before the schema was versioned (see :mod:`.versioning`) is brought to the tables of revision
0001 by these steps, then stamped; later changes are Alembic revisions, which can fill a new finding column from
``raw`` with :func:`fill_finding_columns`. ``create_all`` creates missing tables, but never changes a table that
exists. A column added to a table after a
release (``findings.validation_state`` and ``findings.path``, for instance) is added here with ``ALTER TABLE ...
ADD COLUMN`` (nullable, no default: instant on both databases). A finding column is then filled from each stored
finding's ``raw`` JSON by the same row builder the extraction uses, so the warehouse holds what a fresh sync
would write without pulling again (the upsert rewrites a finding only when its ``raw`` changes, so a later pull
would not fill it). The caller holds the schema lock and the transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from sqlalchemy import Column, Index, MetaData, Table, and_, bindparam, column, inspect, or_, select, update
from sqlalchemy import table as lightweight_table
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from .rows import FINDING_COLUMNS, Rejection, finding_rows
from .schema import findings, metadata

log = logging.getLogger(__name__)

#: Findings read (and updated) per batch while a new finding column is filled from ``raw``.
BACKFILL_BATCH = 5000


#: Values of new finding columns computed from one stored finding: ``derive(issue_type, raw JSON as a dict)``
#: returns ``{column: value}``.
Derive = Callable[[str, Any], dict[str, Any]]


def missing_columns(conn: Connection, target: MetaData = metadata) -> dict[str, list[Column[Any]]]:
    """Columns of ``target`` (default :mod:`.schema`) that the existing tables lack, by table name (tables that do
    not exist yet are left to ``create_all``)."""
    inspector = inspect(conn)
    existing = set(inspector.get_table_names())
    missing: dict[str, list[Column[Any]]] = {}
    for name, table in target.tables.items():
        if name not in existing:
            continue
        have = {c["name"] for c in inspector.get_columns(name)}
        absent = [c for c in table.columns if c.name not in have]
        if absent:
            missing[name] = absent
    return missing


def missing_indexes(conn: Connection, target: MetaData = metadata) -> list[Index]:
    """Indexes of ``target`` (default :mod:`.schema`) that the existing tables lack (a new table gets its indexes
    from ``create_all``)."""
    inspector = inspect(conn)
    existing = set(inspector.get_table_names())
    missing = []
    for name, table in target.tables.items():
        if name not in existing:
            continue
        have = {i["name"] for i in inspector.get_indexes(name)}
        missing += [index for index in table.indexes if index.name not in have]
    return missing


def add_indexes(conn: Connection, missing: list[Index]) -> None:
    """Create each missing index (on a large warehouse this takes a while, once)."""
    for index in missing:
        index.create(conn)
        table = index.table.name if index.table is not None else None
        log.warning("warehouse: created the index %s on %s (new in this version)", index.name, table)


def add_columns(conn: Connection, missing: dict[str, list[Column[Any]]]) -> None:
    """``ALTER TABLE ADD COLUMN`` each missing column, then fill new finding columns from ``raw``."""
    quote = conn.dialect.identifier_preparer.quote
    for name, columns in missing.items():
        target = quote(name)
        for added in columns:
            if not added.nullable:
                raise RuntimeError(f"cannot add the NOT NULL column {name}.{added.name} to an existing warehouse")
            kind = added.type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {target} ADD COLUMN {quote(added.name)} {kind}")
            log.warning("warehouse: added the column %s.%s (new in this version)", name, added.name)
    if missing.get(findings.name):
        filled = fill_finding_columns(conn, [c.name for c in missing[findings.name]])
        log.warning("warehouse: filled %s from the stored raw JSON of %d findings",
                    ", ".join(c.name for c in missing[findings.name]), filled)


def fill_finding_columns(conn: Connection, names: Sequence[str], derive: Derive | None = None) -> int:
    """Set the columns ``names`` of every stored finding from its ``raw`` JSON; return the findings read.

    By default the values are the ones the extraction's row builder (:func:`.rows.finding_rows`) gives, so each
    name must be one of ``FINDING_COLUMNS``; an Alembic revision that adds such a column calls this with
    ``op.get_bind()``. ``derive`` computes other columns instead. Findings are read in batches of
    ``BACKFILL_BATCH`` in key order.
    """
    if derive is None:
        unknown = [n for n in names if n not in FINDING_COLUMNS]
        if unknown:
            raise ValueError(f"not finding columns of the row builder: {', '.join(unknown)}; "
                             f"expected some of {', '.join(FINDING_COLUMNS)} (or pass derive)")
    target = lightweight_table("findings", column("issue_type"), column("id"),
                               *(column(n, findings.c[n].type if n in findings.c else None) for n in names))
    statement = (
        update(target)
        .where(target.c.issue_type == bindparam("k_type"), target.c.id == bindparam("k_id"))
        .values({n: bindparam(f"v_{n}") for n in names})
    )
    after: tuple[str, int] | None = None
    done = 0
    while True:
        query = select(findings.c.issue_type, findings.c.id, findings.c.raw).order_by(
            findings.c.issue_type, findings.c.id).limit(BACKFILL_BATCH)
        if after is not None:
            query = query.where(_after(findings, after))
        batch = conn.execute(query).all()
        if not batch:
            return done
        params = _derived(batch, names, derive) if derive is not None else _built(batch, names)
        if params:
            conn.execute(statement, params)
        done += len(batch)
        after = (batch[-1].issue_type, batch[-1].id)


def _built(batch: Sequence[Any], names: Sequence[str]) -> list[dict[str, Any]]:
    """Update parameters of ``names`` for a batch of stored findings, from the extraction's row builder."""
    positions = [FINDING_COLUMNS.index(n) for n in names]
    params = []
    for issue_type in sorted({r.issue_type for r in batch}):
        of_type = [r for r in batch if r.issue_type == issue_type]
        rejected: list[Rejection] = []
        try:
            rows = finding_rows(issue_type, [r.raw.encode() for r in of_type], rejected)
        except ValueError:  # an issue type this version no longer knows: leave its columns NULL
            continue
        for row in rows:
            params.append({"k_type": issue_type, "k_id": row[FINDING_COLUMNS.index("id")],
                           **{f"v_{n}": row[i] for n, i in zip(names, positions, strict=True)}})
    return params


def _derived(batch: Sequence[Any], names: Sequence[str], derive: Derive) -> list[dict[str, Any]]:
    """Update parameters of ``names`` for a batch of stored findings, from ``derive``."""
    params = []
    for r in batch:
        values = derive(r.issue_type, orjson.loads(r.raw))
        params.append({"k_type": r.issue_type, "k_id": r.id, **{f"v_{n}": values.get(n) for n in names}})
    return params


def _after(keyed: Table, key: tuple[str, int]) -> ColumnElement[bool]:
    """Keyset condition: rows after ``key`` in (issue_type, id) order."""
    issue_type, finding_id = key
    return or_(keyed.c.issue_type > issue_type, and_(keyed.c.issue_type == issue_type, keyed.c.id > finding_id))
