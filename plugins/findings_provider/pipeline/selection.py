"""Policy selections of warehouse findings (SQL, portable between SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.sql.elements import ColumnElement

from findings_provider.config import FindingSelector
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.batches import id_batches
from findings_provider.warehouse.schema import findings, ticket_actions, write_ledger

#: Outcomes after which a finding is never sent to ticket creation again (a ticket we created, or linked).
TICKET_DONE = ("succeeded", "linked")
#: Outcomes recorded when the service no longer links a ticket of ours to the finding (unlinked or its link deleted),
#: or another ticket replaced it: not ticketed again unless the policy says ``reticket_unlinked``.
TICKET_GONE = ("unlinked", "replaced")
#: Outcomes that block a finding while they are its latest: ``ambiguous`` until reconciled, ``skipped`` (reported).
TICKET_BLOCKING_WHEN_LATEST = ("ambiguous", "skipped")


#: The warehouse columns of a ``SelectedFinding``, in its field order.
SELECTED_COLUMNS = ("id", "repository_name", "rule_name", "ref", "severity", "status", "triage_state",
                    "triage_reason", "external_ticket_id", "relevant_since")


@dataclass(frozen=True)
class SelectedFinding:
    """The columns of a selected finding that planning needs (never its payload)."""

    id: int
    repository_name: str | None
    rule_name: str | None
    ref: str | None
    severity: str | None
    # the state a write must find unchanged in the service (see ``freshness``)
    status: str | None = None
    triage_state: str | None = None
    triage_reason: str | None = None
    external_ticket_id: int | None = None
    relevant_since: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repository": self.repository_name,
            "rule": self.rule_name,
            "ref": self.ref,
            "severity": self.severity,
        }


def selector_conditions(issue_type: str, selector: FindingSelector) -> list[ColumnElement[bool]]:
    """WHERE conditions of a selector: every set field must match one of its values."""
    conditions: list[ColumnElement[bool]] = [findings.c.issue_type == str(issue_type)]
    for column, values in selector.columns().items():
        conditions.append(findings.c[column].in_([str(v) for v in values]))
    return conditions


def ticket_blocked(*, reticket_unlinked: bool = False) -> ColumnElement[bool]:
    """True for a finding that has, or may have, a ticket, or whose last ticket request was skipped.

    A finding that had a ticket of ours stays blocked after the service lost it (``TICKET_GONE``), unless
    ``reticket_unlinked``: then one with no ticket now and such a latest outcome is free to be ticketed again.
    """
    done = ticket_actions.alias("ta_done")
    last = ticket_actions.alias("ta_last")
    latest = ticket_actions.alias("ta_latest")
    has_succeeded = (
        select(done.c.id)
        .where(done.c.issue_type == findings.c.issue_type, done.c.finding_id == findings.c.id,
               done.c.outcome.in_(TICKET_DONE))
        .exists()
    )
    latest_id = (
        select(func.max(latest.c.id))
        .where(latest.c.issue_type == findings.c.issue_type, latest.c.finding_id == findings.c.id,
               latest.c.outcome != "planned")
        .correlate(findings)
        .scalar_subquery()
    )
    blocking_latest = (
        select(last.c.id).where(last.c.id == latest_id, last.c.outcome.in_(TICKET_BLOCKING_WHEN_LATEST)).exists()
    )
    # a ticket of ours whose finding a scan reintroduced since (relevant_since moved): new work
    reintroduced = (
        select(write_ledger.c.finding_id)
        .where(write_ledger.c.kind == "ticket", write_ledger.c.issue_type == findings.c.issue_type,
               write_ledger.c.finding_id == findings.c.id, findings.c.relevant_since > write_ledger.c.relevant_since)
        .exists()
    )
    ours = has_succeeded & ~reintroduced
    if reticket_unlinked:
        gone = ticket_actions.alias("ta_gone")
        gone_latest = select(gone.c.id).where(gone.c.id == latest_id, gone.c.outcome.in_(TICKET_GONE)).exists()
        ours = ours & ~gone_latest
    return findings.c.external_ticket_id.is_not(None) | ours | blocking_latest


def select_findings(
    warehouse: Warehouse,
    issue_type: str,
    selector: FindingSelector,
    *,
    without_ticket: bool = False,
    reticket_unlinked: bool = False,
) -> list[SelectedFinding]:
    """Findings of ``issue_type`` matching ``selector`` (ascending id); optionally only those with no ticket
    (``reticket_unlinked``: see :func:`ticket_blocked`)."""
    conditions = selector_conditions(issue_type, selector)
    if without_ticket:
        conditions.append(~ticket_blocked(reticket_unlinked=reticket_unlinked))
    stmt = (
        select(*(findings.c[name] for name in SELECTED_COLUMNS))
        .where(and_(*conditions))
        .order_by(findings.c.id)
    )
    with warehouse.engine.connect() as conn:
        return [SelectedFinding(*row) for row in conn.execute(stmt)]


def select_by_ids(warehouse: Warehouse, issue_type: str, ids: Sequence[int]) -> list[SelectedFinding]:
    """The warehouse's ``SelectedFinding`` of each of ``ids`` that it holds (ascending id)."""
    out: list[SelectedFinding] = []
    with warehouse.engine.connect() as conn:
        for chunk in id_batches(ids):
            stmt = (
                select(*(findings.c[name] for name in SELECTED_COLUMNS))
                .where(findings.c.issue_type == issue_type, findings.c.id.in_(chunk))
                .order_by(findings.c.id)
            )
            out += [SelectedFinding(*row) for row in conn.execute(stmt)]
    return out


def latest_ticket_outcomes(warehouse: Warehouse, issue_type: str, outcome: str | Sequence[str]) -> list[int]:
    """Ids of findings whose latest (non-planned) ticket outcome is ``outcome`` (or one of them)."""
    outcomes = [outcome] if isinstance(outcome, str) else list(outcome)
    latest = (
        select(ticket_actions.c.finding_id, func.max(ticket_actions.c.id).label("last"))
        .where(ticket_actions.c.issue_type == issue_type, ticket_actions.c.outcome != "planned")
        .group_by(ticket_actions.c.finding_id)
        .subquery()
    )
    stmt = (
        select(ticket_actions.c.finding_id)
        .join(latest, latest.c.last == ticket_actions.c.id)
        .where(ticket_actions.c.outcome.in_(outcomes))
        .order_by(ticket_actions.c.finding_id)
    )
    with warehouse.engine.connect() as conn:
        return list(conn.execute(stmt).scalars())


def sample_rows(selected: Sequence[SelectedFinding], limit: int = 10) -> list[dict[str, Any]]:
    """A few selected findings for a person to look at (ids, repository, rule, ref, severity)."""
    return [f.as_dict() for f in selected[:limit]]
