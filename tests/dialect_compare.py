"""The one comparison of two warehouses filled from the two wire dialects: every canonical column equal.

Used by the pipeline test (``pipeline/test_both_dialects.py``) and the DAG test (``dags/test_real_dialect_dags.py``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

#: Secrets in the real dialect have no rule name (a provider type instead), triage state or reason, first scan,
#: fingerprint, triage or state-change time, or relevant_since (canonically their createdAt, a different moment
#: than the reference's relevant_since); the emulator also shows reviewing/fixing secrets as open there.
SECRETS_ONLY_IN_REFERENCE = {"rule_name", "triage_state", "triage_reason", "first_seen_scan_id", "match_based_id",
                             "status", "relevant_since", "triaged_at", "state_updated_at"}
#: Canonical timestamps: equal within ``CLOCK_SLACK``.
TIMESTAMPS = {"relevant_since", "triaged_at", "state_updated_at"}
#: Both emulators generate their data relative to their own start: timestamps differ by that much.
CLOCK_SLACK = timedelta(minutes=5)
#: Columns that are not canonical values: the bytes as received, their digest, and when this warehouse wrote the row.
NOT_CANONICAL = {"raw", "digest", "synced_at"}


def finding_rows_of(database: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every row of the ``findings`` table of a SQLite warehouse, by (issue type, id)."""
    from findings_provider.warehouse import make_engine
    from findings_provider.warehouse.schema import findings
    from sqlalchemy import select

    engine = make_engine(f"sqlite:///{database}")
    try:
        with engine.connect() as conn:
            return {(r.issue_type, r.id): dict(r._mapping) for r in conn.execute(select(findings))}
    finally:
        engine.dispose()


def canonical_differences(reference: dict[tuple[str, int], dict[str, Any]],
                          real: dict[tuple[str, int], dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(key, column, reference value, real value) for every canonical value that differs, and for every finding
    only one side holds (column ``"<row>"``)."""
    differences: list[tuple[Any, ...]] = [(k, "<row>", k in reference, k in real)
                                          for k in sorted(set(reference) ^ set(real))]
    for key, ref in reference.items():
        other = real.get(key)
        if other is None:
            continue
        for column, value in ref.items():
            if column in NOT_CANONICAL or (key[0] == "secrets" and column in SECRETS_ONLY_IN_REFERENCE):
                continue
            if column in TIMESTAMPS and value is not None and other[column] is not None:
                if abs(other[column] - value) > CLOCK_SLACK:
                    differences.append((key, column, value, other[column]))
            elif other[column] != value:
                differences.append((key, column, value, other[column]))
    return differences
