"""Bring warehouse findings up to date after a write to the API.

The finding's raw JSON is patched with what the API changed, and the row is rebuilt from it by the warehouse's
own row builder (``finding_row_from_dict``), so the columns and ``raw`` can never disagree and the column mapping
exists once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from sqlalchemy import select

from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.batches import id_batches
from findings_provider.warehouse.rows import finding_row_from_dict
from findings_provider.warehouse.schema import findings


def patch_findings(warehouse: Warehouse, issue_type: str, ids: Iterable[int], raw_fields: Mapping[str, Any]) -> int:
    """Set the top-level ``raw_fields`` in the given findings' JSON and rewrite their rows.

    Findings not in the warehouse are ignored (they arrive with the next extraction). One transaction per batch of
    ids (``id_batches``); returns how many rows were rewritten.
    """
    updated = 0
    for chunk in id_batches(ids):
        with warehouse.engine.connect() as conn:
            raws = conn.execute(
                select(findings.c.raw).where(findings.c.issue_type == issue_type, findings.c.id.in_(chunk))
            ).scalars()
            rows = []
            for raw in raws:
                data = orjson.loads(raw)
                if isinstance(data, dict):
                    rows.append(finding_row_from_dict(issue_type, {**data, **raw_fields}))
        updated += warehouse.upsert_findings(rows)
    return updated
