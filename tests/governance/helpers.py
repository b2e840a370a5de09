"""Builders of known warehouse data for the governance tests."""

from __future__ import annotations

from typing import Any

from findings_provider.warehouse import Warehouse, finding_row_from_dict


def code_finding(
    finding_id: int,
    rule: str,
    *,
    verdict: str | None = None,
    status: str = "open",
    triage_state: str = "untriaged",
    triage_reason: str | None = None,
    match_based_id: str | None = None,
) -> dict[str, Any]:
    """A code finding as the API sends it, with the fields the statistics read."""
    finding: dict[str, Any] = {
        "id": finding_id,
        "rule_name": rule,
        "repository": {"name": "acme/payments-api", "url": "https://github.com/acme/payments-api"},
        "ref": "refs/heads/main",
        "severity": "high",
        "confidence": "high",
        "status": status,
        "triage_state": triage_state,
        "triage_reason": triage_reason,
        "match_based_id": match_based_id or f"mb-{finding_id}",
        "relevant_since": "2024-05-01T10:00:00Z",
    }
    if verdict is not None:
        finding["assistant"] = {"autotriage": {"verdict": verdict, "reason": "test"}}
    return finding


class FindingWriter:
    """Adds code findings with controlled verdicts to a warehouse, numbering them."""

    def __init__(self, warehouse: Warehouse, first_id: int = 1_000_000) -> None:
        self.warehouse = warehouse
        self.next_id = first_id

    def add(
        self,
        rule: str,
        *,
        false_positive: int = 0,
        true_positive: int = 0,
        no_verdict: int = 0,
        **fields: Any,
    ) -> list[int]:
        """Add that many findings of ``rule`` per verdict; return their ids."""
        findings = []
        for verdict, count in (
            ("false_positive", false_positive),
            ("true_positive", true_positive),
            (None, no_verdict),
        ):
            for _ in range(count):
                findings.append(code_finding(self.next_id, rule, verdict=verdict, **fields))
                self.next_id += 1
        self.warehouse.upsert_findings([finding_row_from_dict("sast", f) for f in findings])
        return [f["id"] for f in findings]
