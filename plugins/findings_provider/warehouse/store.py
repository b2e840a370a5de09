"""The warehouse: pipeline state, action logs, reports and selections over one engine, above its bulk upserts.

The upserts of API objects, and the repetition of an operation that lost its PostgreSQL connection, are
:mod:`.upsert`'s. Recording a triage request is an insert: before repeating it, the store looks for the row that
the lost attempt may have committed (the commit's acknowledgement can be what was lost), so the request is logged
exactly once.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any, Literal, get_args

from sqlalchemy import delete, func, select, union, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.sql.elements import ColumnElement

from .history import take_snapshot
from .indexes import build_missing_logged
from .schema import findings, pipeline_state, policy_changes, reports, ticket_actions, triage_actions
from .timestamps import utc_now_text
from .upsert import BulkUpserter
from .versioning import ensure_current

TriageStatus = Literal["planned", "succeeded", "failed", "dropped"]
#: ``linked``: a person's existing ticket linked through ``LinkTicketOperator``; ``unlinked`` / ``replaced``: a ticket
#: of ours (created or linked) that the service no longer links to the finding, or that another ticket replaced.
TicketOutcome = Literal["succeeded", "failed", "skipped", "planned", "ambiguous", "linked", "unlinked", "replaced"]
TRIAGE_STATUSES: tuple[str, ...] = get_args(TriageStatus)
TICKET_OUTCOMES: tuple[str, ...] = get_args(TicketOutcome)
#: Outcomes after which a finding must not be ticketed again (an ambiguous request may have created one).
TICKETED_OUTCOMES = ("succeeded", "ambiguous", "linked")
#: Stored reports kept per name (older ones are deleted when a new one is saved).
REPORTS_KEPT = 30


@dataclass(frozen=True)
class TicketAction:
    """One finding's outcome of a ticket-creation or ticket-link request (or of a dry run's plan), or what became
    of its ticket of ours in the service (``unlinked``, ``replaced``)."""

    issue_type: str
    finding_id: int
    outcome: TicketOutcome
    run_id: str | None = None
    ticket_id: int | None = None
    ticket_url: str | None = None
    external_slug: str | None = None
    message: str | None = None


class Warehouse(BulkUpserter):
    """Read and write the warehouse tables through one engine (SQLite or PostgreSQL); the bulk upserts are
    :class:`.upsert.BulkUpserter`'s.

    :param run_id: the Airflow run reading the service through this warehouse, recorded with the changes of
        findings it observes (``finding_events``).
    """

    # --- schema -----------------------------------------------------------------------------------

    def create_all(self) -> None:
        """Bring the warehouse to the newest schema revision: create it in an empty database, version one made
        before versioning (its missing columns filled from ``raw``), apply the revisions it lacks (see
        :mod:`.versioning`); then create any index of ``findings`` missing (left by a first load that did not
        finish: :mod:`.indexes`). Two queries when it is already current; safe to race (a schema lock)."""
        ensure_current(self.engine)
        build_missing_logged(self.engine)

    # --- daily snapshot ---------------------------------------------------------------------------

    def take_snapshot(self, day: date) -> int:
        """Replace ``day``'s daily counts (``finding_snapshots``) with the current ones; return the rows written."""

        def write() -> int:
            with self.engine.begin() as conn:
                return take_snapshot(conn, day)

        return self._reconnecting(f"snapshot of {day}", write)

    # --- pipeline state ---------------------------------------------------------------------------

    def get_state(self, key: str, default: Any = None) -> Any:
        """Return the JSON value stored under ``key``, or ``default`` when there is none."""

        def read() -> Any:
            with self.engine.connect() as conn:
                return conn.execute(select(pipeline_state.c.value).where(pipeline_state.c.key == key)).first()

        row = self._reconnecting(f"reading state {key}", read)
        return default if row is None else row.value

    def set_state(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under ``key``, in its own transaction."""
        stmt = self._insert(pipeline_state).values(key=key, value=value, updated_at=utc_now_text())
        stmt = stmt.on_conflict_do_update(
            index_elements=[pipeline_state.c.key],
            set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
        )

        def write() -> None:
            with self.engine.begin() as conn:
                conn.execute(stmt)

        self._reconnecting(f"saving state {key}", write)

    # --- action logs ------------------------------------------------------------------------------

    def record_triage_action(
        self,
        *,
        run_id: str | None,
        dag_id: str | None,
        issue_type: str,
        dry_run: bool,
        issue_ids: Sequence[int],
        request: Any,
        status: TriageStatus = "planned",
        response: Any = None,
        num_triaged: int | None = None,
        error: str | None = None,
    ) -> int:
        """Log one bulk-triage request (made or planned) and return its id; exactly once, even across a lost
        connection (see the module's docstring)."""
        _check(status, TRIAGE_STATUSES, "triage status")
        # Set here, not by the column default: it is what identifies this row if an attempt's outcome is lost.
        identity = {
            "run_id": run_id,
            "dag_id": dag_id,
            "issue_type": issue_type,
            "dry_run": dry_run,
            "issue_ids": list(issue_ids),
            "status": status,
            "created_at": utc_now_text(),
        }
        stmt = triage_actions.insert().values(
            **identity, request=request, response=response, num_triaged=num_triaged, error=error
        )
        landed = select(triage_actions.c.id).where(*(triage_actions.c[key] == value for key, value in identity.items()))
        attempted = False

        def record() -> int:
            nonlocal attempted
            if attempted:  # an earlier attempt lost its connection: it may have committed the row
                with self.engine.connect() as conn:
                    found = conn.execute(landed).scalar()
                if found is not None:
                    return int(found)
            attempted = True
            with self.engine.begin() as conn:
                return _inserted_id(conn.execute(stmt))

        return self._reconnecting("recording a triage request", record)

    def update_triage_action(
        self,
        action_id: int,
        *,
        status: TriageStatus,
        response: Any = None,
        num_triaged: int | None = None,
        error: str | None = None,
    ) -> None:
        """Set the outcome of a logged bulk-triage request (all four fields are written)."""
        _check(status, TRIAGE_STATUSES, "triage status")
        stmt = (
            update(triage_actions)
            .where(triage_actions.c.id == action_id)
            .values(status=status, response=response, num_triaged=num_triaged, error=error)
        )

        def write() -> None:
            with self.engine.begin() as conn:
                if conn.execute(stmt).rowcount != 1:
                    raise KeyError(f"no triage action with id {action_id}")

        self._reconnecting(f"updating triage request {action_id}", write)

    def record_ticket_actions(self, actions: Iterable[TicketAction]) -> int:
        """Log ticket-creation outcomes, one row per finding; return how many were logged."""
        values = [asdict(action) for action in actions]
        for value in values:
            _check(value["outcome"], TICKET_OUTCOMES, "ticket outcome")
        if values:
            with self.engine.begin() as conn:
                conn.execute(ticket_actions.insert(), values)
        return len(values)

    def record_policy_change(
        self,
        *,
        run_id: str | None,
        policy_id: str,
        rule_path: str,
        previous_mode: str | None,
        new_mode: str,
        status: str,
        response: Any = None,
    ) -> int:
        """Log one rule mode change (proposed, applied or failed) and return its id."""
        stmt = policy_changes.insert().values(
            run_id=run_id,
            policy_id=policy_id,
            rule_path=rule_path,
            previous_mode=previous_mode,
            new_mode=new_mode,
            status=status,
            response=response,
        )
        with self.engine.begin() as conn:
            return _inserted_id(conn.execute(stmt))

    # --- reports ------------------------------------------------------------------------------------

    def save_report(self, name: str, title: str, html: str) -> int:
        """Store a report's HTML under ``name`` (with ``self.run_id``); keep the newest ``REPORTS_KEPT`` of the
        name; return its id."""
        with self.engine.begin() as conn:
            report_id = _inserted_id(conn.execute(reports.insert().values(
                name=name, title=title, run_id=self.run_id, html=html, created_at=utc_now_text())
            ))
            oldest_dropped = conn.execute(select(reports.c.id).where(reports.c.name == name).order_by(
                reports.c.id.desc()).offset(REPORTS_KEPT).limit(1)).scalar()
            if oldest_dropped is not None:
                conn.execute(delete(reports).where(reports.c.name == name, reports.c.id <= oldest_dropped))
        return report_id

    def latest_report(self, name: str, *, run_id: str | None = None) -> Any:
        """The newest stored report of ``name`` (of ``run_id`` when given): ``id``, ``name``, ``title``,
        ``run_id``, ``html``, ``created_at``; or None."""
        stmt = select(reports).where(reports.c.name == name)
        if run_id is not None:
            stmt = stmt.where(reports.c.run_id == run_id)
        with self.engine.connect() as conn:
            return conn.execute(stmt.order_by(reports.c.id.desc()).limit(1)).first()

    # --- selections -------------------------------------------------------------------------------

    def ticketed_finding_ids(self, issue_type: str) -> set[int]:
        """Ids of findings with an external ticket, or a succeeded, ambiguous or linked ticket request logged."""
        stmt = union(
            select(findings.c.id).where(
                findings.c.issue_type == issue_type, findings.c.external_ticket_id.is_not(None)
            ),
            select(ticket_actions.c.finding_id).where(
                ticket_actions.c.issue_type == issue_type, ticket_actions.c.outcome.in_(TICKETED_OUTCOMES)
            ),
        )
        with self.engine.connect() as conn:
            return set(conn.execute(stmt).scalars())

    def count_findings(self, issue_type: str | None = None, **equals: Any) -> int:
        """Count findings matching every ``column=value`` (a list/tuple/set means any of; None means NULL)."""
        conditions = _conditions(equals)
        if issue_type is not None:
            conditions.append(findings.c.issue_type == issue_type)
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(findings).where(*conditions)).scalar_one())

    def count_findings_not_in(self, issue_type: str, ids: Container[int]) -> int:
        """Count the findings of ``issue_type`` whose id is not in ``ids`` (streamed: ``ids`` may be large)."""
        stmt = select(findings.c.id).where(findings.c.issue_type == issue_type)

        def count() -> int:
            with self.engine.connect() as conn:
                return sum(1 for found in conn.execute(stmt).scalars() if found not in ids)

        return self._reconnecting(f"counting {issue_type} findings", count)

    def finding_ids_where(self, issue_type: str, **equals: Any) -> list[int]:
        """Ids (ascending) of ``issue_type`` findings matching every ``column=value`` (see count_findings)."""
        stmt = (
            select(findings.c.id)
            .where(findings.c.issue_type == issue_type, *_conditions(equals))
            .order_by(findings.c.id)
        )
        with self.engine.connect() as conn:
            return list(conn.execute(stmt).scalars())


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")


def _inserted_id(result: CursorResult[Any]) -> int:
    """The primary key of the row an INSERT wrote (typed optional by SQLAlchemy: None only for other statements)."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def _conditions(equals: dict[str, Any]) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    for name, value in equals.items():
        if name not in findings.c:
            raise ValueError(f"findings has no column {name!r}")
        column = findings.c[name]
        if value is None:
            conditions.append(column.is_(None))
        elif isinstance(value, (list, tuple, set, frozenset)):
            conditions.append(column.in_(list(value)))
        else:
            conditions.append(column == value)
    return conditions
