"""Caps on what one run may write, and the approval a person gives above them, checked by the write itself.

The plan task records what it planned and why a person must approve it (a policy above its cap, the selection
above the approval threshold, any proposed rule mode change) in ``pipeline_state`` under
``<kind>.plan.<run_id>``. The approval task records the person's decision there (only its completion handler
does: a task marked successful by hand records nothing). The write task reads the record and refuses to act
when approval was needed and not given.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from findings_provider.warehouse import Warehouse

TRIAGE = "triage"
TICKETS = "tickets"
POLICIES = "policies"
#: The writes that ask a person: bulk triage, ticket creation, rule mode changes (policy tuning).
KINDS = (TRIAGE, TICKETS, POLICIES)


class ApprovalError(Exception):
    """A write refused to act: it needed a person's approval and has none (no task retry can fix that)."""


def plan_key(kind: str, run_id: str | None) -> str:
    return f"{kind}.plan.{run_id or '-'}"


@dataclass
class Cap:
    """A limit of one policy for one run: the file's value, lowered (never raised) by a run's parameter."""

    policy: str
    file_value: int
    run_value: int | None = None

    @property
    def value(self) -> int:
        return self.file_value if self.run_value is None else min(self.file_value, self.run_value)

    def excess(self, planned: int, what: str) -> str | None:
        """Why ``planned`` needs a person (above the cap), or None."""
        if planned <= self.value:
            return None
        lowered = f" (lowered for this run from {self.file_value})" if self.value < self.file_value else ""
        return f"policy {self.policy} plans {planned} {what}, above its cap of {self.value} per run{lowered}"


def record_plan(
    warehouse: Warehouse, kind: str, run_id: str | None, *, reasons: list[str], planned: dict[str, int],
    actions: dict[int, str] | None = None,
) -> dict[str, Any]:
    """Record a run's plan: per-policy counts, the reasons it needs approval (none: it does not), the actions."""
    record = {
        "needs_approval": bool(reasons),
        "reasons": reasons,
        "planned": planned,
        "actions": {str(k): v for k, v in (actions or {}).items()},
        "decision": None,
    }
    warehouse.set_state(plan_key(kind, run_id), record)
    return record


def get_plan(warehouse: Warehouse, kind: str, run_id: str | None) -> dict[str, Any] | None:
    value = warehouse.get_state(plan_key(kind, run_id))
    return value if isinstance(value, dict) else None


def record_decision(warehouse: Warehouse, kind: str, run_id: str | None, *, approved: bool, by: str | None) -> None:
    """Store a person's answer to the run's approval request."""
    record = get_plan(warehouse, kind, run_id) or {"needs_approval": True, "reasons": [], "planned": {}}
    record["decision"] = {"approved": approved, "by": by or "a person",
                          "at": datetime.now(timezone.utc).isoformat()}
    warehouse.set_state(plan_key(kind, run_id), record)


def missing_approval(record: dict[str, Any] | None) -> str | None:
    """Why the write must not proceed (approval needed and not given), or None when it may."""
    if record is None or not record.get("needs_approval"):
        return None
    decision = record.get("decision") or {}
    if decision.get("approved") is True:
        return None
    why = "; ".join(record.get("reasons") or ()) or "the plan needs approval"
    if decision.get("approved") is False:
        return f"a person ({decision.get('by')}) rejected this plan: {why}"
    return (f"this plan needs a person's approval and none is recorded ({why}). Approve it in the approval "
            "task's Required Action; marking the approval task successful by hand is not approval")


def approved_count(record: dict[str, Any] | None, policy: str) -> int:
    """How many items of ``policy`` a recorded approval covers (0 without an approval)."""
    if record is None or not (record.get("decision") or {}).get("approved"):
        return 0
    return int((record.get("planned") or {}).get(policy, 0))
