"""Helpers shared by the governance pipelines: coercion of templated values, XCom caps, warehouse reads."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # SQLAlchemy is imported by the reads that use it: the operators import this module at a parse
    import pandas as pd
    from pydantic import BaseModel
    from sqlalchemy import Table
    from sqlalchemy.sql import Select

    from findings_provider.warehouse import Warehouse

#: Rows of a plan or proposal copied into an XCom; the full list lives in the warehouse and the report files.
XCOM_PREVIEW_ROWS = 20
_DELETE_CHUNK = 500


def as_id_list(value: Any, name: str = "policy_ids") -> list[str] | None:
    """Numeric ids from a list, a (JSON or Python) list as text, or "1, 2"; None and "" give None."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    if isinstance(value, str):
        text = value.strip()
        # a JSON list, a rendered Python list (templates without native rendering), or "1, 2"
        value = ast.literal_eval(text) if text.startswith("[") else [v for v in text.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} = {value!r} is not a list of ids")
    ids = [str(v).strip() for v in value]
    bad = [v for v in ids if not v.isdigit()]
    if bad:
        raise ValueError(f"{name}: {bad} are not numeric ids")
    return list(dict.fromkeys(ids))


def preview(rows: Sequence[dict[str, Any]], limit: int = XCOM_PREVIEW_ROWS) -> list[dict[str, Any]]:
    """The first ``limit`` rows, for an XCom (the caller reports the total)."""
    return [dict(r) for r in rows[:limit]]


def state_key(kind: str, dag_id: str | None, run_id: str | None) -> str:
    """The ``pipeline_state`` key under which a run keeps its full plan or proposal."""
    return f"{kind}/{dag_id or 'adhoc'}/{run_id or 'adhoc'}"


def run_identity(context: Any) -> tuple[str | None, str | None]:
    """``(dag_id, run_id)`` of the running task (None outside a DAG run)."""
    ti = context.get("ti") if hasattr(context, "get") else None
    return getattr(ti, "dag_id", None), getattr(ti, "run_id", None) or context.get("run_id")


def model_json(model: BaseModel) -> dict[str, Any]:
    """A response model as the JSON object it came from (unknown fields kept, unset ones left out)."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def read_frame(warehouse: Warehouse, stmt: Select[Any]) -> pd.DataFrame:
    """Run a SELECT on the warehouse into a DataFrame (column names from the statement)."""
    import pandas as pd

    with warehouse.engine.connect() as conn:
        result = conn.execute(stmt)
        return pd.DataFrame(result.fetchall(), columns=list(result.keys()))


def prune_missing(
    warehouse: Warehouse, table: Table, seen: Iterable[Any], *, key: str = "id", where: Any = None
) -> int:
    """Delete the rows of ``table`` whose ``key`` was not seen in a complete pull; return how many.

    The warehouse's upserts never delete, so a table that must mirror what the API serves (dependencies,
    repositories, a policy's rules) is pruned after each complete pull. ``where`` restricts the candidates
    (e.g. one policy's rules).
    """
    from sqlalchemy import select

    column = table.c[key]
    stmt = select(column) if where is None else select(column).where(where)
    seen_set = set(seen)
    with warehouse.engine.begin() as conn:
        stale = [k for k in conn.execute(stmt).scalars() if k not in seen_set]
        for start in range(0, len(stale), _DELETE_CHUNK):
            chunk = stale[start : start + _DELETE_CHUNK]
            condition = column.in_(chunk) if where is None else column.in_(chunk) & where
            conn.execute(table.delete().where(condition))
    return len(stale)
