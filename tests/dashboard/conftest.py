"""A SQLite warehouse per test, and a helper that stores findings in it."""

from __future__ import annotations

from typing import Any

from findings_provider.warehouse import finding_row_from_dict


def finding(finding_id: int, issue_type: str = "sast", **fields: Any) -> tuple:
    """A finding row (open, high, detected 2026-01-01 unless given)."""
    return finding_row_from_dict(issue_type, {
        "id": finding_id, "status": "open", "severity": "high", "relevant_since": "2026-01-01T00:00:00Z", **fields})
