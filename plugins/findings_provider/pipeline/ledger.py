"""What the product wrote, per finding, so that it never fights a person over time.

After policy P triaged a finding, a person may reopen it; after a ticket was created, a person may close or
remove it. The product must not undo that on a later run, also not after a full refresh brings the finding back
as open and without a ticket. The ledger (table ``write_ledger``) keeps each write with the finding's
``relevant_since`` at the time: while it has not moved, the write stands as the person left it. A scan that
reintroduces the finding moves ``relevant_since``: that is new work, and the policy acts again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from findings_provider.client.timeutil import parse_timestamp
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.batches import id_batches
from findings_provider.warehouse.schema import findings, write_ledger

TRIAGE = "triage"
TICKET = "ticket"
#: Tickets are one per finding whatever the policy that asked for it.
TICKET_SCOPE = "any"


def scope_of(kind: str, policy: str) -> str:
    return policy if kind == TRIAGE else TICKET_SCOPE


def record(warehouse: Warehouse, kind: str, policy: str, issue_type: str, ids: Iterable[int],
           run_id: str | None) -> int:
    """Record that ``policy`` wrote to these findings, with their current ``relevant_since``; return how many.

    Findings the warehouse does not hold are left out (their ``relevant_since`` is unknown).
    """
    scope = scope_of(kind, policy)
    recorded = 0
    for chunk in id_batches(ids):
        with warehouse.engine.begin() as conn:
            current = conn.execute(
                select(findings.c.id, findings.c.relevant_since)
                .where(findings.c.issue_type == issue_type, findings.c.id.in_(chunk))
            ).all()
            if not current:
                continue
            conn.execute(write_ledger.delete().where(
                write_ledger.c.kind == kind, write_ledger.c.scope == scope, write_ledger.c.issue_type == issue_type,
                write_ledger.c.finding_id.in_([row.id for row in current])))
            conn.execute(write_ledger.insert(), [
                {"kind": kind, "scope": scope, "issue_type": issue_type, "finding_id": row.id,
                 "relevant_since": row.relevant_since, "run_id": run_id}
                for row in current
            ])
            recorded += len(current)
    return recorded


def undone_writes(
    warehouse: Warehouse,
    kind: str,
    policy: str,
    issue_type: str,
    findings_now: Iterable[tuple[int, Any, str | None]],
) -> dict[int, str]:
    """Of ``findings_now`` (id, relevant_since, triage_state), those a person undid our write on: id -> reason.

    A triaged finding that is open again counts as reopened by a person unless its ``relevant_since`` moved
    past the one recorded (a scan reintroduced it); a triage state of ``reopened`` always counts as a person's.
    A ticketed finding without a ticket now counts as closed or removed by a person unless reintroduced.
    """
    now = {int(i): (parse_timestamp(since), state) for i, since, state in findings_now}
    if not now:
        return {}
    scope = scope_of(kind, policy)
    written: dict[int, tuple[datetime | None, str | None]] = {}
    with warehouse.engine.connect() as conn:
        for chunk in id_batches(now):
            rows = conn.execute(
                select(write_ledger.c.finding_id, write_ledger.c.relevant_since, write_ledger.c.run_id).where(
                    write_ledger.c.kind == kind,
                    write_ledger.c.scope == scope,
                    write_ledger.c.issue_type == issue_type,
                    write_ledger.c.finding_id.in_(chunk),
                )
            ).all()
            written.update((row.finding_id, (row.relevant_since, row.run_id)) for row in rows)
    out = {}
    for finding_id, (since_then, run_id) in written.items():
        since_now, state = now[finding_id]
        reintroduced = since_now is not None and since_then is not None and since_now > since_then
        if kind == TRIAGE and (not reintroduced or state == "reopened"):
            out[finding_id] = (f"reopened by a person after policy {policy} triaged it (run {run_id}); not "
                               "triaged again until a scan reintroduces it")
        elif kind == TICKET and not reintroduced:
            out[finding_id] = (f"its ticket from run {run_id} was closed or removed in the service; not "
                               "ticketed again until a scan reintroduces it")
    return out
