"""Rows for the warehouse's own tests: a finding row from a dict, and what a table holds."""

from __future__ import annotations

from findings_provider.warehouse import finding_row_from_dict
from sqlalchemy import select
from sqlalchemy.engine import Engine


def finding(finding_id: int, **fields) -> tuple:
    """One finding row built from a dict (status open unless given)."""
    return finding_row_from_dict("sast", {"id": finding_id, "status": "open", **fields})


def stored(engine: Engine, table, *columns, **where) -> list[tuple]:
    """Rows of ``table`` (selected columns) matching ``where``, ordered by the table's primary key."""
    stmt = select(*(table.c[c] for c in columns)).where(*(table.c[k] == v for k, v in where.items()))
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(stmt.order_by(*table.primary_key.columns))]
