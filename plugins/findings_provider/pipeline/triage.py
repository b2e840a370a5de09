"""Bulk triage by policy: plan (select and chunk, recorded in ``triage_actions``), then execute the plan.

Every request is one ``triage_actions`` row: recorded as ``planned`` before it is sent (in a dry run it stays
so, flagged ``dry_run``), then ``succeeded`` with the response or ``failed`` with the error. After a request
succeeded, every id the service reports in ``triaged_issues`` (which includes same-fingerprint findings on
other refs) is updated in the warehouse: columns and raw JSON alike.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select

from findings_provider.client import TriageRequest
from findings_provider.config import TriagePolicy
from findings_provider.pipeline.patching import patch_findings
from findings_provider.pipeline.selection import SelectedFinding, sample_rows, select_findings
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import triage_actions

log = logging.getLogger(__name__)

MAX_CHUNK = 3000
#: The finding ``status`` that a triage state leaves behind.
STATUS_AFTER_TRIAGE = {"ignored": "ignored", "reviewing": "reviewing", "fixing": "fixing", "reopened": "open"}
DEFAULT_NOTE = "Triaged automatically by policy {policy} ({dag_id} run {run_id})"
#: Error text of requests a person rejected in the approval step (they are never sent).
REJECTED = "rejected in the approval step"


@dataclass
class PolicyPlan:
    """What one policy selects, in request-sized chunks."""

    policy: TriagePolicy
    selected: list[SelectedFinding]
    chunks: list[list[int]] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.policy.name,
            "issue_type": str(self.policy.issue_type),
            "selected": len(self.selected),
            "requests": len(self.chunks),
            "set": self.policy.set.model_dump(exclude_none=True),
        }


def chunked(ids: Sequence[int], size: int) -> list[list[int]]:
    """``ids`` in consecutive chunks of at most ``size`` (1..3000)."""
    if not 1 <= size <= MAX_CHUNK:
        raise ValueError(f"chunk_size {size} is outside 1..{MAX_CHUNK} (the API's bulk triage limit)")
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


def plan_triage(
    warehouse: Warehouse, policies: Iterable[TriagePolicy], *, chunk_size: int = MAX_CHUNK
) -> list[PolicyPlan]:
    """Select each enabled policy's findings from the warehouse and cut them into chunks of <= ``chunk_size``."""
    plans = []
    for policy in policies:
        if not policy.enabled:
            log.info("triage policy %s is disabled; skipped", policy.name)
            continue
        selected = select_findings(warehouse, str(policy.issue_type), policy.select)
        plan = PolicyPlan(policy, selected, chunked([f.id for f in selected], chunk_size))
        log.info("policy %s selects %d %s findings in %d request(s)", policy.name, len(selected),
                 policy.issue_type, len(plan.chunks))
        plans.append(plan)
    return plans


def render_note(policy: TriagePolicy, *, dag_id: str | None, run_id: str | None) -> str:
    """The policy's note with ``{dag_id}``, ``{run_id}``, ``{policy}`` filled in (unknown names left as they are)."""
    template = policy.note or DEFAULT_NOTE
    values = {"dag_id": dag_id or "-", "run_id": run_id or "-", "policy": policy.name}
    out = []
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        out.append(literal)
        if name is not None:
            out.append(values[name] if name in values else "{" + name + "}")
    return "".join(out)[:2000]


def triage_request(policy: TriagePolicy, ids: list[int], note: str) -> TriageRequest:
    """The validated bulk-triage request of one chunk."""
    return TriageRequest(
        issue_type=policy.issue_type,
        issue_ids=ids,
        new_triage_state=policy.set.triage_state,
        new_triage_reason=policy.set.triage_reason,
        new_note=note,
        limit=MAX_CHUNK,
    )


def record_plan(
    warehouse: Warehouse,
    plans: Iterable[PolicyPlan],
    *,
    dry_run: bool,
    dag_id: str | None,
    run_id: str | None,
) -> list[int]:
    """Record one ``planned`` ``triage_actions`` row per request; return their ids (in order)."""
    if run_id:
        close_open_plans(warehouse, run_id, "superseded by a new plan of the same run")
    action_ids = []
    for plan in plans:
        note = render_note(plan.policy, dag_id=dag_id, run_id=run_id)
        for chunk in plan.chunks:
            request = triage_request(plan.policy, chunk, note)
            action_ids.append(
                warehouse.record_triage_action(
                    run_id=run_id,
                    dag_id=dag_id,
                    issue_type=str(plan.policy.issue_type),
                    dry_run=dry_run,
                    issue_ids=chunk,
                    request=request.body(),
                    status="planned",
                )
            )
    return action_ids


def close_open_plans(warehouse: Warehouse, run_id: str, reason: str) -> int:
    """Mark a run's still-planned (not dry-run) requests as failed with ``reason``; return how many."""
    stmt = select(triage_actions.c.id).where(
        triage_actions.c.run_id == run_id,
        triage_actions.c.status == "planned",
        triage_actions.c.dry_run.is_(False),
    )
    with warehouse.engine.connect() as conn:
        ids = list(conn.execute(stmt).scalars())
    for action_id in ids:
        warehouse.update_triage_action(action_id, status="failed", error=reason)
    return len(ids)


def execute_plan(client: Any, warehouse: Warehouse, action_ids: Sequence[int]) -> dict[str, Any]:
    """Send each recorded, not yet succeeded request; record the response; refresh the triaged findings.

    Dry-run rows are never sent. A request that fails is recorded as failed and the error is raised once the
    row is written (a task retry sends it again: setting a triage state twice is harmless).
    """
    counts = {"requests": 0, "triaged": 0, "refreshed": 0, "skipped_dry_run": 0, "already_done": 0}
    with warehouse.engine.connect() as conn:
        rows = {
            row.id: row
            for row in conn.execute(select(triage_actions).where(triage_actions.c.id.in_(list(action_ids))))
        }
    missing = [a for a in action_ids if a not in rows]
    if missing:
        raise ValueError(f"triage actions {missing} are not in the warehouse")
    for action_id in action_ids:
        row = rows[action_id]
        if row.dry_run:
            counts["skipped_dry_run"] += 1
            continue
        if row.status == "succeeded":
            counts["already_done"] += 1
            continue
        if row.status == "failed" and (row.error or "").startswith(REJECTED):
            continue
        request = TriageRequest.model_validate(row.request)
        try:
            result = client.bulk_triage(request)
        except Exception as exc:
            warehouse.update_triage_action(action_id, status="failed", error=f"{type(exc).__name__}: {exc}"[:2000])
            log.error("bulk triage request %d (%d ids) failed: %s", action_id, len(row.issue_ids or ()), exc)
            raise
        response = {"num_triaged": result.num_triaged, "triaged_issues": list(result.triaged_issues)}
        warehouse.update_triage_action(action_id, status="succeeded", response=response, num_triaged=result.num_triaged)
        refreshed = refresh_triaged(warehouse, request, result.triaged_issues)
        counts["requests"] += 1
        counts["triaged"] += result.num_triaged
        counts["refreshed"] += refreshed
        log.info(
            "triaged %d findings (%d requested, %d same-fingerprint), request %d; %d warehouse rows refreshed",
            result.num_triaged, len(row.issue_ids or ()), max(0, len(result.triaged_issues) - len(row.issue_ids or ())),
            action_id, refreshed,
        )
    return counts


def refresh_triaged(warehouse: Warehouse, request: TriageRequest, triaged_ids: Iterable[int]) -> int:
    """Apply a succeeded triage to the warehouse rows of every triaged id (columns and raw JSON)."""
    state = request.new_triage_state
    if state is None:  # a note-only request changes no state
        return 0
    state = str(state)
    status = STATUS_AFTER_TRIAGE.get(state, state)
    reason = str(request.new_triage_reason) if request.new_triage_reason else None
    now = datetime.now(timezone.utc).isoformat()
    raw_fields: dict[str, Any] = {"status": status, "triage_state": state, "triage_reason": reason,
                                  "triaged_at": now}
    if request.new_note is not None:
        raw_fields["triage_comment"] = request.new_note
    return patch_findings(warehouse, str(request.issue_type), triaged_ids, raw_fields)


def approval_text(plans: Sequence[PolicyPlan], *, threshold: int | None, dry_run: bool) -> tuple[str, str]:
    """Subject and Markdown body of the approval request a person sees in the Airflow UI."""
    total = sum(len(p.selected) for p in plans)
    names = ", ".join(p.policy.name for p in plans if p.selected) or "no policy"
    subject = f"Bulk-triage {total} findings by policy {names}?"
    lines = [
        f"The autotriage policies select **{total}** findings, more than the approval threshold "
        f"({threshold}). Approve to triage them{' (dry run: nothing is sent)' if dry_run else ''}; "
        "reject to triage nothing.",
        "",
    ]
    for plan in plans:
        s = plan.summary
        lines.append(f"- **{s['policy']}** ({s['issue_type']}): {s['selected']} findings, {s['requests']} "
                     f"request(s), set {s['set']}")
    sample = [row for p in plans for row in sample_rows(p.selected, 10)][:10]
    if sample:
        lines += ["", "Sample:", "", "| id | repository | rule | ref | severity |", "|---|---|---|---|---|"]
        lines += [f"| {r['id']} | {r['repository']} | {r['rule']} | {r['ref']} | {r['severity']} |" for r in sample]
    return subject, "\n".join(lines)
