"""Bulk triage by policy: plan (select and chunk, recorded in ``triage_actions``), then execute the plan.

Every request is one ``triage_actions`` row: recorded as ``planned`` before it is sent (in a dry run it stays
so, flagged ``dry_run``), then ``succeeded`` with the response or ``failed`` with the error (``dropped`` when the
fresh re-read left nothing to send). Right before each request, its findings are read again from the service
(``freshness``): those a person changed, or reopened after this policy triaged them (``ledger``), or whose twin on
another branch a person triaged, are left out with the reason. A policy's findings are cut into requests in
repository and rule order, so that the re-read of one request, narrowed to its repositories and rules, lists little
beyond it. After a request succeeded, every id
the service reports in ``triaged_issues`` (which includes same-fingerprint findings on other refs) is updated in
the warehouse, columns and raw JSON alike, and recorded in the ledger.
"""

from __future__ import annotations

import logging
import string
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update

from findings_provider.client import TriageRequest
from findings_provider.client.limits import TRIAGE_LIMIT
from findings_provider.client.vocabulary import STATUS_AFTER_TRIAGE
from findings_provider.config import TriagePolicy
from findings_provider.pipeline import approval, freshness, ledger
from findings_provider.pipeline.approval import Cap
from findings_provider.pipeline.patching import patch_findings
from findings_provider.pipeline.selection import SelectedFinding, sample_rows, select_by_ids, select_findings
from findings_provider.text import md_escape, truncate
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import findings, triage_actions

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)

DEFAULT_NOTE = "Triaged automatically by policy {policy} ({dag_id} run {run_id})"
#: Error text of requests a person rejected in the approval step (they are never sent).
REJECTED = "rejected in the approval step"


@dataclass
class PolicyPlan:
    """What one policy selects, in request-sized chunks, and the cap it is held to."""

    policy: TriagePolicy
    selected: list[SelectedFinding]
    chunks: list[list[int]] = field(default_factory=list)
    cap: Cap | None = None
    #: Findings left out because a person reopened them after this policy triaged them (see ``ledger``).
    held_back: int = 0

    @property
    def over_cap(self) -> str | None:
        return self.cap.excess(len(self.selected), "findings to triage") if self.cap else None

    @property
    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.policy.name,
            "issue_type": str(self.policy.issue_type),
            "selected": len(self.selected),
            "requests": len(self.chunks),
            "set": self.policy.set.model_dump(exclude_none=True),
            "cap": self.cap.value if self.cap else None,
            "held_back_reopened": self.held_back,
        }


def chunked(ids: Sequence[int], size: int) -> list[list[int]]:
    """``ids`` in consecutive chunks of at most ``size`` (1..3000)."""
    TRIAGE_LIMIT.check(size, "chunk_size")
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


def plan_triage(
    warehouse: Warehouse,
    policies: Iterable[TriagePolicy],
    *,
    chunk_size: int = TRIAGE_LIMIT.maximum,
    max_findings: int | None = None,
) -> list[PolicyPlan]:
    """Select each enabled policy's findings from the warehouse and cut them into chunks of <= ``chunk_size``, in
    (repository, rule, id) order: each chunk spans few repositories and rules, which narrow its re-read
    (``freshness.request_filters``).

    Findings a person reopened after this policy triaged them are held back (``ledger``). ``max_findings``
    lowers every policy's cap for this run (it never raises one).
    """
    plans = []
    for policy in policies:
        if not policy.enabled:
            log.info("triage policy %s is disabled; skipped", policy.name)
            continue
        issue_type = str(policy.issue_type)
        selected = select_findings(warehouse, issue_type, policy.selector)
        undone = ledger.undone_writes(warehouse, ledger.TRIAGE, policy.name, issue_type,
                                      ((f.id, f.relevant_since, f.triage_state) for f in selected))
        kept = sorted((f for f in selected if f.id not in undone),
                      key=lambda f: (f.repository_name or "", f.rule_name or "", f.id))
        plan = PolicyPlan(policy, kept, chunked([f.id for f in kept], chunk_size),
                          Cap(policy.name, policy.max_findings, max_findings), held_back=len(undone))
        log.info("policy %s selects %d %s findings in %d request(s)%s", policy.name, len(kept), issue_type,
                 len(plan.chunks), f"; {len(undone)} reopened by a person after it triaged them: held back"
                 if undone else "")
        plans.append(plan)
    return plans


def approval_reasons(plans: Sequence[PolicyPlan], threshold: int | None) -> list[str]:
    """Why a person must approve these plans first: policies above their caps, a selection above the threshold."""
    reasons = [reason for plan in plans if (reason := plan.over_cap)]
    total = sum(len(p.selected) for p in plans)
    if threshold is not None and total > threshold:
        reasons.append(f"{total} findings selected, above the approval threshold of {threshold}")
    return reasons


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
        limit=TRIAGE_LIMIT.maximum,
    )


def record_plan(
    warehouse: Warehouse,
    plans: Iterable[PolicyPlan],
    *,
    dry_run: bool,
    dag_id: str | None,
    run_id: str | None,
    reasons: Sequence[str] = (),
) -> list[int]:
    """Record one ``planned`` ``triage_actions`` row per request and the run's plan (``approval``); return the
    rows' ids (in order)."""
    plans = list(plans)
    if run_id:
        close_open_plans(warehouse, run_id, "superseded by a new plan of the same run")
    action_ids = []
    policy_of: dict[int, str] = {}
    for plan in plans:
        note = render_note(plan.policy, dag_id=dag_id, run_id=run_id)
        for chunk in plan.chunks:
            request = triage_request(plan.policy, chunk, note)
            action_id = warehouse.record_triage_action(
                run_id=run_id,
                dag_id=dag_id,
                issue_type=str(plan.policy.issue_type),
                dry_run=dry_run,
                issue_ids=chunk,
                request=request.body(),
                status="planned",
            )
            action_ids.append(action_id)
            policy_of[action_id] = plan.policy.name
    approval.record_plan(warehouse, approval.TRIAGE, run_id, reasons=list(reasons),
                         planned={p.policy.name: len(p.selected) for p in plans}, actions=policy_of)
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


def execute_plan(
    client: FindingsClient,
    warehouse: Warehouse,
    action_ids: Sequence[int],
    policies: Sequence[TriagePolicy] = (),
) -> dict[str, Any]:
    """Send each recorded request with its unchanged findings only, each re-read right before its own request.

    Right before a request is sent, its findings are read again from the service (``freshness.reread``, narrowed to
    the request's repositories and rules): those a person changed since the last extraction, or reopened after this
    policy triaged them, are dropped with the reason (``dropped_findings``) and the request is narrowed to the rest
    (a request left empty is ``dropped``). Dry-run
    rows are never sent; a request whose policy is not known (``policies``, by the name recorded with the
    plan) is not sent either. A request that fails is recorded as failed and the error is raised once the row
    is written (a task retry re-reads and sends it again: setting a triage state twice is harmless). After a
    policy's requests, the findings they wrote are read back and stored (``freshness.settle_written``): the
    warehouse equals the service for them when the run ends. ``window_p50_s``, ``window_p99_s`` and
    ``window_max_s`` are the seconds from each request's re-read to the request.
    """
    counts: dict[str, Any] = {"requests": 0, "triaged": 0, "refreshed": 0, "skipped_dry_run": 0,
                              "already_done": 0, "dropped": 0, "reread_requests": 0, "settle_requests": 0,
                              "settled": 0, "settle_named": 0}
    with warehouse.engine.connect() as conn:
        rows = {
            row.id: row
            for row in conn.execute(select(triage_actions).where(triage_actions.c.id.in_(list(action_ids))))
        }
    missing = [a for a in action_ids if a not in rows]
    if missing:
        raise ValueError(f"triage actions {missing} are not in the warehouse")
    by_name = {p.name: p for p in policies}
    pending: dict[str, list[Any]] = {}
    windows: list[float] = []
    for action_id in action_ids:
        row = rows[action_id]
        if row.dry_run:
            counts["skipped_dry_run"] += 1
        elif row.status == "succeeded":
            counts["already_done"] += 1
        elif row.status in ("planned", "failed") and not (row.error or "").startswith(REJECTED):
            plan = approval.get_plan(warehouse, approval.TRIAGE, row.run_id) or {}
            name = (plan.get("actions") or {}).get(str(action_id))
            if name not in by_name:
                warehouse.update_triage_action(action_id, status="failed",
                                               error=f"not sent: its policy {name!r} is not among the policies "
                                                     "given; plan again")
                raise ValueError(f"triage request {action_id}: its policy {name!r} is unknown; not sent")
            pending.setdefault(name, []).append(row)
    for name, policy_rows in pending.items():
        policy = by_name[name]
        issue_type = str(policy.issue_type)
        written: list[int] = []
        planned = sum(len(row.issue_ids or ()) for row in policy_rows)
        try:
            for number, row in enumerate(policy_rows, 1):
                # the request's own findings, re-read right before it (not once for the whole policy)
                kept, read_at = _fresh_chunk(client, warehouse, policy, row, counts,
                                             f"request {row.id} ({number} of {len(policy_rows)})", planned)
                send = [i for i in row.issue_ids or () if int(i) in kept]
                if not send:
                    warehouse.update_triage_action(row.id, status="dropped",
                                                   error="nothing left to send after the fresh re-read "
                                                         "(reasons in dropped_findings)")
                    continue
                request = TriageRequest.model_validate({**row.request, "issue_ids": send})
                if len(send) != len(row.issue_ids or ()):
                    _narrow(warehouse, row.id, send, request)
                windows.append(time.monotonic() - read_at)
                log.info("triage request %d: %.3f s from its re-read to the request", row.id, windows[-1])
                written += _send(client, warehouse, row.id, request, policy, counts, row.run_id)
        finally:  # what was sent, also when a later request of the policy failed
            freshness.settle_written(client, warehouse, issue_type, policy.selector, written, counts,
                                     status=_target(policy)["status"])
    counts.update(freshness.window_summary(windows))
    return counts


def _fresh_chunk(client: FindingsClient, warehouse: Warehouse, policy: TriagePolicy, row: Any,
                 counts: dict[str, Any], label: str, planned: int) -> tuple[set[int], float]:
    """Re-read the findings of one planned request (``freshness.reread``, within the budget of a re-read of the
    policy's ``planned`` findings) and leave out those whose twin a person triaged; return the ids still to send
    and when the service answered the re-read (``time.monotonic()``)."""
    name, issue_type, target = policy.name, str(policy.issue_type), _target(policy)
    ids = [int(i) for i in row.issue_ids or ()]
    fresh = freshness.reread(client, warehouse, kind=ledger.TRIAGE, policy=name, issue_type=issue_type,
                             selector=policy.selector, candidates=select_by_ids(warehouse, issue_type, ids),
                             target=target, run_id=row.run_id, label=label, budget_for=planned)
    counts["reread_requests"] += fresh.requests
    kept = set(fresh.kept)
    twins = twin_conflicts(warehouse, issue_type, kept, target)
    freshness.record_drops(warehouse, twins, kind=ledger.TRIAGE, policy=name, issue_type=issue_type,
                           run_id=row.run_id)
    counts["dropped"] += len(fresh.dropped) + len(twins)
    return kept - set(twins), fresh.read_at


def twin_conflicts(warehouse: Warehouse, issue_type: str, ids: set[int], target: dict[str, Any]) -> dict[int, str]:
    """Of ``ids``, those with a twin (same fingerprint, another branch, not among ``ids``) that a person triaged.

    The service triages a finding together with its twins; sending such a finding would override the person's
    decision on the twin. The twin's state is the warehouse's (refreshed by the last extraction or re-read).
    """
    todo = sorted(ids)
    fingerprint: dict[int, str] = {}
    with warehouse.engine.connect() as conn:
        for start in range(0, len(todo), 500):
            fingerprint.update(conn.execute(
                select(findings.c.id, findings.c.match_based_id).where(
                    findings.c.issue_type == issue_type, findings.c.id.in_(todo[start : start + 500]),
                    findings.c.match_based_id.is_not(None))
            ).tuples().all())
        prints = sorted(set(fingerprint.values()))
        twins: list[Any] = []  # rows of the select below (their typing differs between SQLAlchemy 2.0 and 2.1)
        for start in range(0, len(prints), 500):
            twins += conn.execute(
                select(findings.c.id, findings.c.match_based_id, findings.c.ref, findings.c.status,
                       findings.c.triage_state, findings.c.triage_reason)
                .where(findings.c.issue_type == issue_type, findings.c.match_based_id.in_(prints[start : start + 500]))
            ).all()
    touched: dict[str, str] = {}
    for twin in twins:
        if twin.id in ids or twin.triage_state in (None, "untriaged"):
            continue
        if (twin.status, twin.triage_state, twin.triage_reason) == (
            target["status"], target["triage_state"], target["triage_reason"]
        ):
            continue
        touched.setdefault(twin.match_based_id, (
            f"a twin on another branch (id {twin.id}, ref {twin.ref}) was triaged by a person "
            f"({twin.triage_state}); the service would triage it together with this one"
        ))
    return {i: touched[fp] for i, fp in fingerprint.items() if fp in touched}


def _target(policy: TriagePolicy) -> dict[str, Any]:
    """The warehouse columns a policy's triage leaves behind."""
    state = str(policy.set.triage_state)
    return {"status": STATUS_AFTER_TRIAGE.get(state, state), "triage_state": state,
            "triage_reason": str(policy.set.triage_reason) if policy.set.triage_reason else None}


def _narrow(warehouse: Warehouse, action_id: int, ids: list[int], request: TriageRequest) -> None:
    """Record that a planned request goes out with fewer ids (the rest were dropped by the re-read)."""
    with warehouse.engine.begin() as conn:
        conn.execute(update(triage_actions).where(triage_actions.c.id == action_id)
                     .values(issue_ids=ids, request=request.body()))


def _send(client: FindingsClient, warehouse: Warehouse, action_id: int, request: TriageRequest, policy: TriagePolicy,
          counts: dict[str, Any], run_id: str | None) -> list[int]:
    """Send one request and record its outcome; return the ids it wrote (those named and the twins the service
    triaged with them)."""
    try:
        result = client.bulk_triage(request)
    except Exception as exc:
        warehouse.update_triage_action(action_id, status="failed", error=f"{type(exc).__name__}: {exc}"[:2000])
        log.error("bulk triage request %d (%d ids) failed: %s", action_id, len(request.issue_ids or ()), exc)
        raise
    response = {"num_triaged": result.num_triaged, "triaged_issues": list(result.triaged_issues)}
    warehouse.update_triage_action(action_id, status="succeeded", response=response, num_triaged=result.num_triaged)
    refreshed = refresh_triaged(warehouse, request, result.triaged_issues)
    ledger.record(warehouse, ledger.TRIAGE, policy.name, str(request.issue_type),
                  [*(request.issue_ids or ()), *result.triaged_issues], run_id=run_id)
    counts["requests"] += 1
    counts["triaged"] += result.num_triaged
    counts["refreshed"] += refreshed
    sent = len(request.issue_ids or ())
    log.info(
        "triaged %d findings (%d requested, %d same-fingerprint), request %d; %d warehouse rows refreshed",
        result.num_triaged, sent, max(0, len(result.triaged_issues) - sent), action_id, refreshed,
    )
    return [*(int(i) for i in request.issue_ids or ()), *(int(i) for i in result.triaged_issues)]


def refresh_triaged(warehouse: Warehouse, request: TriageRequest, triaged_ids: Iterable[int]) -> int:
    """Apply a succeeded triage to the warehouse rows of every triaged id (columns and raw JSON)."""
    if request.new_triage_state is None:  # a note-only request changes no state
        return 0
    state = str(request.new_triage_state)
    status = STATUS_AFTER_TRIAGE.get(state, state)
    reason = str(request.new_triage_reason) if request.new_triage_reason else None
    now = datetime.now(timezone.utc).isoformat()
    raw_fields: dict[str, Any] = {"status": status, "triage_state": state, "triage_reason": reason,
                                  "triaged_at": now}
    if request.new_note is not None:
        raw_fields["triage_comment"] = request.new_note
    return patch_findings(warehouse, str(request.issue_type), triaged_ids, raw_fields)


def approval_text(
    plans: Sequence[PolicyPlan], *, reasons: Sequence[str], dry_run: bool
) -> tuple[str, str]:
    """Subject and Markdown body of the approval request a person sees in the Airflow UI.

    Everything that comes from the service (repository, rule, ref) is escaped: it cannot add rows, links or
    images to the body.
    """
    total = sum(len(p.selected) for p in plans)
    names = ", ".join(p.policy.name for p in plans if p.selected) or "no policy"
    subject = truncate(f"Bulk-triage {total} findings by policy {names}?", 250)
    lines = [
        f"Approve to triage **{total}** findings{' (dry run: nothing is sent)' if dry_run else ''}; reject to "
        "triage nothing. Right before sending, each finding is read again from the service: any that a person "
        "changed in the meantime is left alone.",
        "",
        "Why a person is asked:",
        "",
        *[f"- {md_escape(reason, 300)}" for reason in reasons],
        "",
    ]
    for plan in plans:
        s = plan.summary
        lines.append(f"- **{md_escape(s['policy'])}** ({s['issue_type']}): {s['selected']} findings, "
                     f"{s['requests']} request(s), set {md_escape(s['set'])}, cap {s['cap']}")
    sample = [row for p in plans for row in sample_rows(p.selected, 10)][:10]
    if sample:
        lines += ["", "Sample:", "", "| id | repository | rule | ref | severity |", "|---|---|---|---|---|"]
        lines += [
            "| " + " | ".join(md_escape(r[k], 80) for k in ("id", "repository", "rule", "ref", "severity")) + " |"
            for r in sample
        ]
    return subject, "\n".join(lines)
