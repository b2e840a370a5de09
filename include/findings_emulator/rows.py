"""The indexed columns stored next to each finding's serialised JSON.

Multi-valued columns (``categories``, ``rulesets``) hold ``|a|b|`` so one value matches as ``%|a|%``.
"""

from __future__ import annotations

from typing import NamedTuple

SAST_ID_BASE = 1
SCA_ID_BASE = 100_000_001
SECRETS_ID_BASE = 200_000_001
AI_SAST_ID_BASE = 300_000_001
MAX_FINDINGS_PER_TYPE = SCA_ID_BASE - SAST_ID_BASE
# The finding's `state` for each `status`.
STATE_OF_STATUS = {"open": "unresolved", "fixed": "fixed", "ignored": "muted", "reviewing": "unresolved",
                   "fixing": "unresolved"}


class FindingRow(NamedTuple):
    """Filter and ordering columns of one finding (the JSON body is stored separately, keyed by ``id``).

    The columns with defaults apply to one issue type only."""

    id: int
    issue_type: str
    relevant_since: float
    repo_id: int
    repo_name: str
    ref: str
    is_primary: int
    status: str
    triage_state: str
    triage_reason: str | None
    severity: str
    confidence: str
    rule_name: str
    match_based_id: str
    has_mates: int
    ticket_id: int | None
    categories: str = ""
    autotriage_verdict: str | None = None
    component_tag: str | None = None
    ctf_state: str | None = None
    pro_rule: int = 0
    rulesets: str = ""
    reachability: str | None = None
    transitivity: str | None = None
    is_malicious: int | None = None
    dependency: str | None = None
    epss: float | None = None
    secret_type: str | None = None
    validation_state: str | None = None
    visibility: str | None = None
    historical: int | None = None


def multi(values: list[str] | tuple[str, ...]) -> str:
    """Encode a list for a multi-valued column."""
    return "|" + "|".join(values) + "|" if values else ""
