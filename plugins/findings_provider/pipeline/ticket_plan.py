"""Planning a ticket run: each policy's un-ticketed findings, grouped into tickets and cut into requests.

Selection: a policy's findings with no ticket (``external_ticket_id`` NULL, no succeeded ticket request or link, and
a latest request that was neither ambiguous nor skipped). A finding whose ticket of ours the service lost since
(``unlinked``, ``replaced``) is selected again only by a policy with ``reticket_unlinked``. Findings are grouped
locally by (repository, rule), at most 50 per group (the service's per-ticket cap), and sent in batches of at most
``tickets_per_call`` groups, never two groups of the same (repository, rule) in one request (the service would
merge them into one ticket).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from findings_provider.client.limits import FINDINGS_PER_TICKET, TICKETS_LIMIT
from findings_provider.config import TicketPolicy
from findings_provider.pipeline.approval import Cap
from findings_provider.pipeline.selection import SelectedFinding, select_findings
from findings_provider.text import md_escape
from findings_provider.warehouse import Warehouse

log = logging.getLogger(__name__)


@dataclass
class TicketGroup:
    """Findings that become one ticket: same repository and rule, at most 50."""

    repository: str | None
    rule: str | None
    ids: list[int]


@dataclass
class TicketBatch:
    """One ticket-creation request: at most ``tickets_per_call`` groups of one issue type."""

    issue_type: str
    policy: str
    groups: list[TicketGroup] = field(default_factory=list)
    #: When its findings were re-read from the service (``time.monotonic()``; None: not re-read, a dry run's).
    read_at: float | None = None

    @property
    def ids(self) -> list[int]:
        return [i for g in self.groups for i in g.ids]


def _newest_first(finding: SelectedFinding) -> tuple[bool, float, int]:
    since = finding.relevant_since
    return since is None, -since.timestamp() if since is not None else 0.0, finding.id


def group_findings(selected: Sequence[SelectedFinding], *, group_issues: bool = True) -> list[list[TicketGroup]]:
    """Per (repository, rule) key, its groups of <= 50 findings (one group per finding when not grouping), the
    most recently detected first (``relevant_since``, then id): the re-read before a request lists a key's
    findings since the oldest one the request names, so a key's first ticket re-reads its newest 50, not all."""
    if not group_issues:
        return [[TicketGroup(f.repository_name, f.rule_name, [f.id])] for f in selected]
    by_key: dict[tuple[str, str], list[int]] = {}
    for f in sorted(selected, key=_newest_first):
        by_key.setdefault((f.repository_name or "", f.rule_name or ""), []).append(f.id)
    return [
        [
            TicketGroup(repo or None, rule or None, ids[i : i + FINDINGS_PER_TICKET])
            for i in range(0, len(ids), FINDINGS_PER_TICKET)
        ]
        for (repo, rule), ids in sorted(by_key.items())
    ]


def batch_groups(issue_type: str, policy: str, keyed: list[list[TicketGroup]], per_call: int) -> list[TicketBatch]:
    """Batches of at most ``per_call`` groups, never two groups of the same key in one batch."""
    TICKETS_LIMIT.check(per_call, "tickets_per_call")
    queues = [list(groups) for groups in keyed if groups]
    batches = []
    while queues:
        # keys with the most groups left go first: max(ceil(groups / per_call), most groups of one key) batches
        queues.sort(key=len, reverse=True)
        batch = TicketBatch(issue_type, policy)
        for queue in queues[:per_call]:
            batch.groups.append(queue.pop(0))
        queues = [q for q in queues if q]
        batches.append(batch)
    return batches


@dataclass
class TicketPlan:
    """One policy's un-ticketed findings, grouped into tickets, and the cap it is held to."""

    policy: TicketPolicy
    selected: list[SelectedFinding]
    keyed: list[list[TicketGroup]]
    cap: Cap

    @property
    def tickets(self) -> int:
        return sum(len(groups) for groups in self.keyed)

    @property
    def over_cap(self) -> str | None:
        return self.cap.excess(self.tickets, "tickets")

    @property
    def summary(self) -> dict[str, Any]:
        return {"policy": self.policy.name, "issue_type": str(self.policy.issue_type),
                "findings": len(self.selected), "tickets": self.tickets, "cap": self.cap.value}


def plan_policies(
    warehouse: Warehouse,
    policies: Iterable[TicketPolicy],
    *,
    group_issues: bool = True,
    max_tickets: int | None = None,
) -> list[TicketPlan]:
    """Select each enabled policy's un-ticketed findings and group them; ``max_tickets`` lowers every cap."""
    plans: list[TicketPlan] = []
    claimed: set[tuple[str, int]] = set()  # a finding selected by two policies is ticketed once
    for policy in policies:
        if not policy.enabled:
            log.info("ticket policy %s is disabled; skipped", policy.name)
            continue
        issue_type = str(policy.issue_type)
        selected = [
            f for f in select_findings(warehouse, issue_type, policy.selector, without_ticket=True,
                                       reticket_unlinked=policy.reticket_unlinked)
            if (issue_type, f.id) not in claimed
        ]
        claimed.update((issue_type, f.id) for f in selected)
        plan = TicketPlan(policy, selected, group_findings(selected, group_issues=group_issues),
                          Cap(policy.name, policy.max_tickets, max_tickets))
        log.info("policy %s selects %d %s findings without a ticket: %d tickets", policy.name, len(selected),
                 issue_type, plan.tickets)
        plans.append(plan)
    return plans


def limit_tickets(keyed: list[list[TicketGroup]], most: int) -> list[list[TicketGroup]]:
    """At most ``most`` tickets, whole keys first (a key's later groups wait for the next run)."""
    out: list[list[TicketGroup]] = []
    left = most
    for groups in keyed:
        if left <= 0:
            break
        out.append(groups[:left])
        left -= len(out[-1])
    return out


def plan_batches(plans: Sequence[TicketPlan], tickets_per_call: int) -> list[TicketBatch]:
    """Request batches of every plan, as they stand (a dry run's preview)."""
    return [b for p in plans for b in batch_groups(str(p.policy.issue_type), p.policy.name, p.keyed, tickets_per_call)]


def plan_tickets(
    warehouse: Warehouse,
    policies: Iterable[TicketPolicy],
    *,
    tickets_per_call: int = TICKETS_LIMIT.maximum,
    group_issues: bool = True,
) -> list[TicketBatch]:
    """Select each enabled policy's un-ticketed findings and cut them into request batches (no caps, no re-read)."""
    return plan_batches(plan_policies(warehouse, policies, group_issues=group_issues), tickets_per_call)


def approval_text(plans: Sequence[TicketPlan], reasons: Sequence[str]) -> tuple[str, str]:
    """Subject and Markdown body of the approval request (data from the service escaped)."""
    total = sum(p.tickets for p in plans)
    subject = f"Create {total} tickets?"
    lines = [
        f"Approve to create up to **{total}** tickets; reject to create none. Right before sending, each "
        "finding is read again from the service: any that a person changed in the meantime is left alone.",
        "", "Why a person is asked:", "", *[f"- {md_escape(r, 300)}" for r in reasons], "",
        "| policy | issue type | findings | tickets | cap |", "|---|---|---|---|---|",
        *[f"| {md_escape(p.policy.name)} | {p.policy.issue_type} | {len(p.selected)} | {p.tickets} | "
          f"{p.cap.value} |" for p in plans],
    ]
    sample = [g for p in plans for groups in p.keyed for g in groups][:10]
    if sample:
        lines += ["", "Sample tickets:", "", "| repository | rule | findings |", "|---|---|---|"]
        lines += [f"| {md_escape(g.repository, 80)} | {md_escape(g.rule, 80)} | {len(g.ids)} |" for g in sample]
    return subject, "\n".join(lines)
