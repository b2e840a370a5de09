"""The warehouse: idempotent upserts of API objects, pipeline state and action logs over one engine.

Bulk upserts (findings and the other API tables) bypass SQLAlchemy's per-row work and use each dialect's
fastest path, one transaction per call:

- SQLite: DBAPI ``executemany`` of ``INSERT ... ON CONFLICT DO UPDATE ... WHERE t.raw IS NOT excluded.raw``
  (findings: the page's stored keys are looked up first, the new rows go through a plain ``INSERT``);
- PostgreSQL: ``COPY`` into a temporary staging table, then one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE
  ... WHERE t.raw IS DISTINCT FROM excluded.raw`` (measured faster than batched ``execute_values``).

A row whose ``raw`` JSON is unchanged is not written at all (its ``synced_at`` keeps the time its content was
last written), so a re-sync writes nothing new. Rows are the tuples of :mod:`.rows`.

On PostgreSQL a lost connection (the server restarted, or the session was terminated) does not fail an operation
whose repetition is harmless: upserts, pipeline state, reads and triage outcome updates run again on a new
connection after a short wait, up to ``len(RECONNECT_DELAYS)`` times (about 15 s in all; a longer outage fails the
task, whose own retries take over). The transaction that was cut is rolled back by the server, so a page upsert
is repeated whole. Recording a triage request is an insert: before repeating it, the store looks for the row
that the lost attempt may have committed (the commit's acknowledgement can be what was lost), so the request is
logged exactly once.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from itertools import groupby
from operator import itemgetter
from typing import Any, Literal, TypeVar, get_args

import orjson
from sqlalchemy import Table, delete, func, select, union, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.sql.elements import ColumnElement

from .history import SQLITE_CLEAR, SQLITE_HISTORY_SETUP, SQLITE_SET, postgresql_events, take_snapshot
from .rows import (
    DEPENDENCY_COLUMNS,
    DEPENDENCY_REPOSITORY_COLUMNS,
    FINDING_COLUMNS,
    POLICY_RULE_COLUMNS,
    SCAN_COLUMNS,
    Row,
)
from .schema import (
    dependencies,
    dependency_repositories,
    findings,
    pipeline_state,
    policy_changes,
    policy_rules,
    reports,
    scans,
    ticket_actions,
    triage_actions,
)
from .timestamps import utc_now_text
from .versioning import ensure_current

log = logging.getLogger(__name__)
T = TypeVar("T")

TriageStatus = Literal["planned", "succeeded", "failed", "dropped"]
TicketOutcome = Literal["succeeded", "failed", "skipped", "planned", "ambiguous"]
TRIAGE_STATUSES: tuple[str, ...] = get_args(TriageStatus)
TICKET_OUTCOMES: tuple[str, ...] = get_args(TicketOutcome)
#: Outcomes after which a finding must not be ticketed again (an ambiguous request may have created one).
TICKETED_OUTCOMES = ("succeeded", "ambiguous")
#: Stored reports kept per name (older ones are deleted when a new one is saved).
REPORTS_KEPT = 30

_INSERTS: dict[str, Callable[[Table], Any]] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
#: Seconds to wait before each new attempt of a PostgreSQL operation that lost its connection.
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: SQLSTATEs of a server that is shutting down or starting up (admin_shutdown, crash_shutdown, cannot_connect_now).
_SHUTDOWN_CODES = ("57P01", "57P02", "57P03")


@dataclass(frozen=True)
class TicketAction:
    """One finding's outcome of a ticket-creation request (or of a dry run's plan)."""

    issue_type: str
    finding_id: int
    outcome: TicketOutcome
    run_id: str | None = None
    ticket_id: int | None = None
    ticket_url: str | None = None
    external_slug: str | None = None
    message: str | None = None


class Warehouse:
    """Read and write the warehouse tables through one engine (SQLite or PostgreSQL).

    :param run_id: the Airflow run reading the service through this warehouse, recorded with the changes of
        findings it observes (``finding_events``).
    """

    def __init__(self, engine: Engine, *, run_id: str | None = None) -> None:
        dialect = engine.dialect.name
        if dialect not in _INSERTS or (dialect == "postgresql" and engine.dialect.driver != "psycopg2"):
            raise ValueError(
                f"unsupported warehouse database {dialect}+{engine.dialect.driver}: "
                "use SQLite or PostgreSQL through psycopg2"
            )
        self.engine = engine
        self.run_id = run_id
        self._insert = _INSERTS[dialect]
        self._statements: dict[str, tuple[str, ...]] = {}

    # --- schema -----------------------------------------------------------------------------------

    def create_all(self) -> None:
        """Bring the warehouse to the newest schema revision: create it in an empty database, version one made
        before versioning (its missing columns filled from ``raw``), apply the revisions it lacks (see
        :mod:`.versioning`). One query when it is already current; safe to race (a schema lock)."""
        ensure_current(self.engine)

    # --- bulk upserts -----------------------------------------------------------------------------

    def upsert_findings(self, rows: Sequence[Row]) -> int:
        """Insert or update findings (``FINDING_COLUMNS`` tuples) in one transaction; return rows written.

        In the same transaction, every change of a stored finding's ``HISTORY_FIELDS`` is recorded in
        ``finding_events`` as observed now by ``self.run_id`` (see :mod:`.history`).
        """
        return self._upsert(findings, FINDING_COLUMNS, rows, history=True)

    def take_snapshot(self, day: date) -> int:
        """Replace ``day``'s daily counts (``finding_snapshots``) with the current ones; return the rows written."""

        def write() -> int:
            with self.engine.begin() as conn:
                return take_snapshot(conn, day)

        return self._reconnecting(f"snapshot of {day}", write)

    def upsert_scans(self, rows: Sequence[Row]) -> int:
        """Insert or update scans (``SCAN_COLUMNS`` tuples); return rows written."""
        return self._upsert(scans, SCAN_COLUMNS, rows)

    def upsert_policy_rules(self, rows: Sequence[Row]) -> int:
        """Insert or update policy rules (``POLICY_RULE_COLUMNS`` tuples); return rows written."""
        return self._upsert(policy_rules, POLICY_RULE_COLUMNS, rows)

    def upsert_dependencies(self, rows: Sequence[Row]) -> int:
        """Insert or update dependencies (``DEPENDENCY_COLUMNS`` tuples); return rows written."""
        return self._upsert(dependencies, DEPENDENCY_COLUMNS, rows)

    def upsert_dependency_repositories(self, rows: Sequence[Row]) -> int:
        """Insert or update repository summaries (``DEPENDENCY_REPOSITORY_COLUMNS``); return rows written."""
        return self._upsert(dependency_repositories, DEPENDENCY_REPOSITORY_COLUMNS, rows)

    def _upsert(
        self,
        table: Table,
        columns: tuple[str, ...],
        rows: Sequence[Row],
        *,
        history: bool = False,
    ) -> int:
        """Upsert rows keyed by the table's primary key; of duplicate keys in ``rows`` the last one wins.

        Rows are written in key order so that concurrent upserts of overlapping pages cannot deadlock. With
        ``history`` (findings), the changes of ``HISTORY_FIELDS`` are recorded in the same transaction.
        """
        key = itemgetter(*(columns.index(column.name) for column in table.primary_key.columns))
        unique = sorted({key(row): row for row in rows}.values(), key=key)
        if not unique:
            return 0
        now = utc_now_text()

        def write() -> int:
            with self.engine.begin() as conn:
                cursor = conn.connection.cursor()
                try:
                    if conn.dialect.name == "postgresql":
                        create_stage, copy, merge = self._sql(conn, table, columns)
                        cursor.execute(create_stage)
                        cursor.copy_expert(copy, io.StringIO(_copy_text(unique)))
                        if history:
                            cursor.execute(postgresql_events(_stage(table), _target(conn, table)),
                                           (now, self.run_id))
                        cursor.execute(merge, (now,))
                    elif history:
                        return self._sqlite_history_upsert(conn, cursor, table, columns, unique, now)
                    else:
                        upsert = self._sql(conn, table, columns)[0]
                        cursor.executemany(upsert, [(*row, now) for row in unique])
                    # A lost connection raises here as the driver's error; the rollback on the way out then fails
                    # as a SQLAlchemy error marked as a disconnect (and the pool is invalidated).
                    written = int(cursor.rowcount)
                    if history and conn.dialect.name == "sqlite":
                        cursor.execute(SQLITE_CLEAR)
                    return written
                finally:
                    cursor.close()

        return self._reconnecting(f"upsert of {len(unique)} {table.name} rows", write)

    def _sqlite_history_upsert(
        self, conn: Connection, cursor: Any, table: Table, columns: tuple[str, ...], unique: list[Row], now: str
    ) -> int:
        """SQLite, with history (findings): rows not stored yet by a plain ``INSERT``, the others by the upsert.

        With the history trigger on the table, SQLite's ``INSERT ... ON CONFLICT DO UPDATE`` costs about twice the
        CPU of a plain ``INSERT`` even for rows that do not conflict (the first load's figures before and after are
        in ``CHANGELOG.md``), so the stored keys of the page are looked up first (one indexed query per
        issue type) and only the rows already stored go through the upsert. The write lock is taken before the
        lookup (``BEGIN IMMEDIATE``): no other writer can store one of the new keys in between.
        """
        upsert, insert, lookup = self._sql(conn, table, columns)
        driver = conn.connection.driver_connection
        if driver is None or not driver.in_transaction:
            cursor.execute("BEGIN IMMEDIATE")
        for statement in SQLITE_HISTORY_SETUP:
            cursor.execute(statement)
        cursor.execute(SQLITE_SET, (self.run_id, now))
        first, second = (columns.index(column.name) for column in table.primary_key.columns)
        stored: set[tuple[Any, Any]] = set()
        for value, group in groupby(unique, key=itemgetter(first)):
            cursor.execute(lookup, (value, orjson.dumps([row[second] for row in group]).decode()))
            stored.update(cursor.fetchall())
        written = 0
        new = [(*row, now) for row in unique if (row[first], row[second]) not in stored]
        if new:
            cursor.executemany(insert, new)
            written += int(cursor.rowcount)
        if stored:
            cursor.executemany(upsert, [(*row, now) for row in unique if (row[first], row[second]) in stored])
            written += int(cursor.rowcount)
        cursor.execute(SQLITE_CLEAR)
        return written

    def _sql(self, conn: Connection, table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
        """Build (once per table) the dialect's upsert statements for ``columns`` plus ``synced_at``."""
        statements = self._statements.get(table.name)
        if statements is None:
            statements = _upsert_sql(conn, table, columns)
            self._statements[table.name] = statements
        return statements

    def _reconnecting(self, what: str, work: Callable[[], T]) -> T:
        """Run ``work`` (harmless to repeat, one transaction); on PostgreSQL again after a lost connection."""
        if self.engine.dialect.name != "postgresql":
            return work()
        for delay in (*RECONNECT_DELAYS, None):
            try:
                return work()
            except DBAPIError as error:
                if delay is None or not _disconnected(error):
                    raise
                reason = str(error.orig).strip().partition("\n")[0] or type(error.orig).__name__
                log.warning("%s: the warehouse connection was lost (%s); trying again in %.1f s", what, reason, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

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
        """Ids of findings with an external ticket, or a succeeded or ambiguous ticket request logged."""
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


def _disconnected(error: DBAPIError) -> bool:
    """Whether a PostgreSQL error means the connection was lost or could not be made (the server may be back soon)."""
    if error.connection_invalidated:
        return True
    code = getattr(error.orig, "pgcode", None)
    return isinstance(error, OperationalError) and (code is None or code[:2] == "08" or code in _SHUTDOWN_CODES)


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


def _stage(table: Table) -> str:
    """The temporary table a PostgreSQL upsert of ``table`` copies its rows into."""
    return f"stage_{table.name}"


def _target(conn: Connection, table: Table) -> str:
    """``table``'s name as the dialect quotes it."""
    return conn.dialect.identifier_preparer.format_table(table)


def _upsert_sql(conn: Connection, table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
    """Return the upsert statements of ``table`` for ``conn``'s dialect (SQLite: one; PostgreSQL: three)."""
    quote = conn.dialect.identifier_preparer.quote
    target = _target(conn, table)
    names = ", ".join(quote(column) for column in columns)
    keys = [column.name for column in table.primary_key.columns]
    updates = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in (*columns, "synced_at") if c not in keys)
    on_conflict = f"ON CONFLICT ({', '.join(quote(k) for k in keys)}) DO UPDATE SET {updates}"
    if conn.dialect.name == "postgresql":
        stage = _stage(table)
        return (
            f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {names} FROM {target} WITH NO DATA",
            f"COPY {stage} ({names}) FROM STDIN",
            f"INSERT INTO {target} ({names}, synced_at) SELECT {names}, CAST(%s AS timestamptz) FROM {stage} "
            f"{on_conflict} WHERE {target}.raw IS DISTINCT FROM excluded.raw",
        )
    placeholders = ", ".join("?" * (len(columns) + 1))
    insert = f"INSERT INTO {target} ({names}, synced_at) VALUES ({placeholders})"
    upsert = f"{insert} {on_conflict} WHERE {target}.raw IS NOT excluded.raw"
    if len(keys) != 2:
        return (upsert,)
    # which keys of a page are stored: params (first key column's value, JSON array of the second's)
    first, second = (quote(k) for k in keys)
    lookup = (f"SELECT {first}, {second} FROM {target} "
              f"WHERE {first} = ? AND {second} IN (SELECT value FROM json_each(?))")
    return upsert, insert, lookup


def _copy_field(value: Any) -> str:
    """One value in PostgreSQL's COPY text format."""
    if value is None:
        return "\\N"
    if value.__class__ is not str:
        return str(value)
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _copy_text(rows: Iterable[Row]) -> str:
    """Rows in PostgreSQL's COPY text format."""
    return "".join(["\t".join([_copy_field(value) for value in row]) + "\n" for row in rows])
