"""Bulk upserts of API objects over one engine, in each dialect's fastest path, one transaction per call.

Bulk upserts (findings and the other API tables) bypass SQLAlchemy's per-row work:

- SQLite: DBAPI ``executemany`` of ``INSERT ... ON CONFLICT DO UPDATE ... WHERE t.raw IS NOT excluded.raw``
  (findings: the page's stored keys are looked up first, the new rows go through a plain ``INSERT``);
- PostgreSQL: ``COPY`` into a temporary staging table, then one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE
  ... WHERE t.raw IS DISTINCT FROM excluded.raw`` (measured faster than batched ``execute_values``).

A row whose ``raw`` JSON is unchanged is not written at all (its ``synced_at`` keeps the time its content was
last written), so a re-sync writes nothing new. Rows are the tuples of :mod:`.rows`.

On PostgreSQL a lost connection (the server restarted, or the session was terminated) does not fail an operation
whose repetition is harmless: upserts, and the warehouse's pipeline state, reads and triage outcome updates
(:mod:`.store`), run again on a new connection after a short wait, up to ``len(RECONNECT_DELAYS)`` times (about
15 s in all; a longer outage fails the task, whose own retries take over). The transaction that was cut is rolled
back by the server, so a page upsert is repeated whole.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

import orjson
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from .branches import counted_on_insert
from .history import SQLITE_CLEAR, SQLITE_HISTORY_SETUP, SQLITE_SET, postgresql_events
from .rows import (
    DEPENDENCY_COLUMNS,
    DEPENDENCY_REPOSITORY_COLUMNS,
    FINDING_COLUMNS,
    POLICY_RULE_COLUMNS,
    SCAN_COLUMNS,
    Row,
)
from .schema import dependencies, dependency_repositories, findings, policy_rules, scans
from .timestamps import utc_now_text

log = logging.getLogger(__name__)
T = TypeVar("T")

_INSERTS: dict[str, Callable[[Table], Any]] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
#: Seconds to wait before each new attempt of a PostgreSQL operation that lost its connection.
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: SQLSTATEs of a server that is shutting down or starting up (admin_shutdown, crash_shutdown, cannot_connect_now).
_SHUTDOWN_CODES = ("57P01", "57P02", "57P03")


class BulkUpserter:
    """Bulk upserts through one engine (SQLite or PostgreSQL), and the reconnecting run of an operation that is
    harmless to repeat; the base of :class:`.store.Warehouse`.

    :param run_id: the Airflow run reading the service, recorded with the changes of findings it observes
        (``finding_events``).
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

    # --- bulk upserts -----------------------------------------------------------------------------

    def upsert_findings(self, rows: Sequence[Row]) -> int:
        """Insert or update findings (``FINDING_COLUMNS`` tuples) in one transaction; return rows written.

        In the same transaction, every change of a stored finding's ``HISTORY_FIELDS`` is recorded in
        ``finding_events`` as observed now by ``self.run_id`` (see :mod:`.history`).
        """
        return self._upsert(findings, FINDING_COLUMNS, rows, history=True)

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


def _disconnected(error: DBAPIError) -> bool:
    """Whether a PostgreSQL error means the connection was lost or could not be made (the server may be back soon)."""
    if error.connection_invalidated:
        return True
    code = getattr(error.orig, "pgcode", None)
    return isinstance(error, OperationalError) and (code is None or code[:2] == "08" or code in _SHUTDOWN_CODES)


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
    # findings: a new row's ``counted`` mark (branches.counted_on_insert); not in ``on_conflict``'s SET: an update
    # keeps the stored row's mark
    marks = table is findings
    if conn.dialect.name == "postgresql":
        stage = _stage(table)
        source, mark = f"{stage} AS s", ""
        if marks:  # the copies in the page counted over the key columns only (a window over whole rows sorts them)
            fingerprint = ", ".join(quote(c) for c in ("issue_type", "repository_name", "match_based_id"))
            key = " AND ".join(f"c.{quote(k)} = s.{quote(k)}" for k in keys)
            source += (f" JOIN (SELECT {', '.join(quote(k) for k in keys)}, count(*) OVER (PARTITION BY {fingerprint})"
                       f" AS copies FROM {stage}) AS c ON {key}")
            mark = ", " + counted_on_insert("postgresql", target, *(f"s.{quote(c)}" for c in (
                "issue_type", "repository_name", "match_based_id")), copies_in_batch="c.copies")
        return (
            f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {names} FROM {target} WITH NO DATA",
            f"COPY {stage} ({names}) FROM STDIN",
            f"INSERT INTO {target} ({names}, synced_at{', counted' if marks else ''}) "
            f"SELECT {', '.join(f's.{quote(c)}' for c in columns)}, CAST(%s AS timestamptz){mark} FROM {source} "
            f"{on_conflict} WHERE {target}.raw IS DISTINCT FROM excluded.raw",
        )
    placeholders = ", ".join("?" * (len(columns) + 1))
    upsert = (f"INSERT INTO {target} ({names}, synced_at) VALUES ({placeholders}) "
              f"{on_conflict} WHERE {target}.raw IS NOT excluded.raw")
    if not marks:
        return (upsert,)
    # the mark reads the row's own parameters again by number (?N is the N-th column)
    mark = counted_on_insert("sqlite", target, *(f"?{columns.index(c) + 1}"
                                                 for c in ("issue_type", "repository_name", "match_based_id")))
    insert = f"INSERT INTO {target} ({names}, synced_at, counted) VALUES ({placeholders}, {mark})"
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
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:  # most values have none: no call
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def _copy_text(rows: Iterable[Row]) -> str:
    """Rows in PostgreSQL's COPY text format."""
    return "".join(["\t".join([_copy_field(value) for value in row]) + "\n" for row in rows])
