"""Bring warehouse findings up to date after a write to the API, columns and raw JSON alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from sqlalchemy import bindparam, select, update

from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import findings
from findings_provider.warehouse.timestamps import utc_now_text

BATCH = 500


def patch_findings(
    warehouse: Warehouse,
    issue_type: str,
    ids: Iterable[int],
    *,
    columns: Mapping[str, Any],
    raw_fields: Mapping[str, Any],
) -> int:
    """Set ``columns`` and the same facts in ``raw`` (top-level ``raw_fields``) of the given findings.

    Findings not in the warehouse are ignored (they arrive with the next extraction). Batches of ``BATCH``
    ids, one transaction each; returns how many rows were updated.
    """
    todo = sorted(set(int(i) for i in ids))
    updated = 0
    stmt = (
        update(findings)
        .where(findings.c.issue_type == bindparam("b_type"), findings.c.id == bindparam("b_id"))
        .values(raw=bindparam("b_raw"), synced_at=bindparam("b_synced"), **{k: bindparam(f"b_{k}") for k in columns})
    )
    for start in range(0, len(todo), BATCH):
        chunk = todo[start : start + BATCH]
        with warehouse.engine.begin() as conn:
            rows = conn.execute(
                select(findings.c.id, findings.c.raw).where(
                    findings.c.issue_type == issue_type, findings.c.id.in_(chunk)
                )
            ).all()
            if not rows:
                continue
            now = utc_now_text()
            params = []
            for finding_id, raw in rows:
                data = orjson.loads(raw)
                if isinstance(data, dict):
                    data.update(raw_fields)
                    raw = orjson.dumps(data).decode()
                params.append(
                    {"b_type": issue_type, "b_id": finding_id, "b_raw": raw, "b_synced": now,
                     **{f"b_{k}": v for k, v in columns.items()}}
                )
            conn.execute(stmt, params)
            updated += len(params)
    return updated
