"""Rows for the tests: a finding row from a dict, and what a warehouse's table holds (``stored``, the stored
findings), written once for every suite."""

from __future__ import annotations

from typing import Any

from findings_provider.warehouse import Warehouse, finding_row_from_dict
from findings_provider.warehouse.schema import findings
from sqlalchemy import select
from sqlalchemy.engine import Engine, Row


def finding(finding_id: int, **fields) -> tuple:
    """One finding row built from a dict (status open unless given)."""
    return finding_row_from_dict("sast", {"id": finding_id, "status": "open", **fields})


def stored(store: Engine | Warehouse, table, *columns, **where) -> list[tuple]:
    """Rows of ``table`` (selected columns) in the warehouse ``store`` (or its engine) matching ``where``, ordered
    by the table's primary key."""
    engine = store.engine if isinstance(store, Warehouse) else store
    stmt = select(*(table.c[c] for c in columns)).where(*(table.c[k] == v for k, v in where.items()))
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(stmt.order_by(*table.primary_key.columns))]


def stored_finding(warehouse: Warehouse, issue_type: str, finding_id: int) -> Row[Any]:
    """The warehouse's row of one finding (every column); fails unless there is exactly one."""
    with warehouse.engine.connect() as conn:
        return conn.execute(select(findings).where(findings.c.issue_type == issue_type,
                                                   findings.c.id == finding_id)).one()


def stored_findings(warehouse: Warehouse, issue_type: str) -> dict[int, Row[Any]]:
    """The warehouse's rows of every finding of ``issue_type`` (every column), by id."""
    with warehouse.engine.connect() as conn:
        return {r.id: r for r in conn.execute(select(findings).where(findings.c.issue_type == issue_type))}
