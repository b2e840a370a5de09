"""Bulk upserts of API objects over one engine, in each dialect's fastest path, one transaction per call.

Bulk upserts (findings and the other API tables) bypass SQLAlchemy's per-row work:

- SQLite: DBAPI ``executemany`` of ``INSERT ... ON CONFLICT DO UPDATE ... WHERE t.raw IS NOT excluded.raw``;
- PostgreSQL: ``COPY`` into a temporary staging table, then one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE
  ... WHERE t.raw IS DISTINCT FROM excluded.raw`` (measured faster than batched ``execute_values``).

A row whose ``raw`` JSON is unchanged is not written at all (its ``synced_at`` keeps the time its content was
last written), so a re-sync writes nothing new. Rows are the tuples of :mod:`.rows`.

Findings, the large table, are not even sent to the database when unchanged. Each one's ``digest``
(:func:`.rows.content_digest` of its ``raw``) is stored with it; an upsert first reads the stored digests of the
page's keys (one indexed query per issue type) and writes only the findings that are new (a plain ``INSERT``) or
whose digest differs (the upsert, ``WHERE t.digest IS DISTINCT FROM excluded.digest``); an unchanged page costs
that lookup only. A finding stored before the digest existed (``digest`` NULL) counts as changed once: it is written
with its digest, keeping its ``synced_at`` when its ``raw`` is unchanged. On SQLite the write lock is taken before
the lookup; on PostgreSQL a concurrent upsert of the same finding may write between the lookup and the write
(either one's reading of the service is then kept, as when two upserts cross without the lookup).

On PostgreSQL a lost connection (the server restarted, or the session was terminated) does not fail an operation
whose repetition is harmless: upserts, and the warehouse's pipeline state, reads and triage outcome updates
(:mod:`.store`), run again on a new connection after a short wait, up to ``len(RECONNECT_DELAYS)`` times (about
15 s in all; a longer outage fails the task, whose own retries take over). The transaction that was cut is rolled
back by the server, so a page upsert is repeated whole.
"""

from __future__ import annotations

import heapq
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
    finding_digests,
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
_ISSUE_TYPE, _ID = FINDING_COLUMNS.index("issue_type"), FINDING_COLUMNS.index("id")


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

    def upsert_findings(self, rows: Sequence[Row], *, digests: Sequence[int] | None = None) -> int:
        """Insert or update findings (``FINDING_COLUMNS`` tuples) in one transaction; return rows written (new ones,
        changed ones, and stored ones without a digest yet).

        Only the findings whose ``digest`` differs from the stored one are sent to the database (see the module's
        docstring). In the same transaction, every change of a stored finding's ``HISTORY_FIELDS`` is recorded in
        ``finding_events`` as observed now by ``self.run_id`` (see :mod:`.history`). ``digests``: the rows'
        :func:`.rows.finding_digests`, when the caller has them already (the extraction computes them beside
        the rows, in its worker process).
        """
        if digests is None:
            digests = finding_digests(rows)
        at = _unique_at(findings, FINDING_COLUMNS, rows)
        if not at:
            return 0
        unique = [rows[i] for i in at]
        digests = [digests[i] for i in at]
        now = utc_now_text()

        def write() -> int:
            with self.engine.begin() as conn:
                cursor = conn.connection.cursor()
                try:
                    if conn.dialect.name == "postgresql":
                        return self._postgresql_findings(conn, cursor, unique, digests, now)
                    return self._sqlite_findings(conn, cursor, unique, digests, now)
                finally:
                    cursor.close()

        return self._reconnecting(f"upsert of {len(unique)} findings rows", write)

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

    def _upsert(self, table: Table, columns: tuple[str, ...], rows: Sequence[Row]) -> int:
        """Upsert rows keyed by the table's primary key (see :func:`_unique`); return the rows written."""
        unique = _unique(table, columns, rows)
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
                        cursor.execute(merge, (now,))
                    else:
                        (upsert,) = self._sql(conn, table, columns)
                        cursor.executemany(upsert, [(*row, now) for row in unique])
                    # A lost connection raises here as the driver's error; the rollback on the way out then fails
                    # as a SQLAlchemy error marked as a disconnect (and the pool is invalidated).
                    return int(cursor.rowcount)
                finally:
                    cursor.close()

        return self._reconnecting(f"upsert of {len(unique)} {table.name} rows", write)

    def _sqlite_findings(
        self, conn: Connection, cursor: Any, unique: list[Row], digests: list[int], now: str
    ) -> int:
        """SQLite: new findings by a plain ``INSERT``, changed ones by the upsert (its history trigger records
        their changes), unchanged ones not at all.

        With the history trigger on the table, SQLite's ``INSERT ... ON CONFLICT DO UPDATE`` costs about twice the
        CPU of a plain ``INSERT`` even for rows that do not conflict (the first load's figures before and after are
        in ``CHANGELOG.md``), so the new rows skip it. The write lock is taken before the lookup of the stored
        digests (``BEGIN IMMEDIATE``): no other writer can store or change one of the page's findings in between.
        """
        lookup, insert, upsert = self._sql(conn, findings, FINDING_COLUMNS)
        driver = conn.connection.driver_connection
        if driver is None or not driver.in_transaction:
            cursor.execute("BEGIN IMMEDIATE")
        stored = _stored_digests(cursor, lookup, unique, lambda ids: orjson.dumps(ids).decode())
        new, changed = _to_write(unique, digests, stored, now)
        written = 0
        if new:
            cursor.executemany(insert, new)
            written += int(cursor.rowcount)
        if changed:
            for statement in SQLITE_HISTORY_SETUP:
                cursor.execute(statement)
            cursor.execute(SQLITE_SET, (self.run_id, now))
            cursor.executemany(upsert, changed)
            written += int(cursor.rowcount)
            cursor.execute(SQLITE_CLEAR)
        return written

    def _postgresql_findings(
        self, conn: Connection, cursor: Any, unique: list[Row], digests: list[int], now: str
    ) -> int:
        """PostgreSQL: the new and changed findings copied into the staging table, their history recorded, then
        merged; nothing more when every finding is unchanged."""
        lookup, create_stage, copy, merge = self._sql(conn, findings, FINDING_COLUMNS)
        stored = _stored_digests(cursor, lookup, unique, list)
        new, changed = _to_write(unique, digests, stored, None)
        if not new and not changed:
            return 0
        cursor.execute(create_stage)
        in_key_order = heapq.merge(new, changed, key=itemgetter(_ISSUE_TYPE, _ID))
        cursor.copy_expert(copy, io.StringIO(_copy_text(in_key_order)))
        # every staged finding, the new ones too: a concurrent upsert may have stored one since the lookup
        cursor.execute(postgresql_events(_stage(findings), _target(conn, findings)), (now, self.run_id))
        cursor.execute(merge, (now,))
        return int(cursor.rowcount)

    def _sql(self, conn: Connection, table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
        """Build (once per table) the dialect's upsert statements of ``table`` (see :func:`_upsert_sql`)."""
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


def _unique(table: Table, columns: tuple[str, ...], rows: Sequence[Row]) -> list[Row]:
    """``rows`` without duplicate keys (the table's primary key; of duplicates the last one wins), in key order, so
    that concurrent upserts of overlapping pages cannot deadlock."""
    return [rows[i] for i in _unique_at(table, columns, rows)]


def _unique_at(table: Table, columns: tuple[str, ...], rows: Sequence[Row]) -> list[int]:
    """The positions in ``rows`` of :func:`_unique`'s rows, in its order."""
    key = itemgetter(*(columns.index(column.name) for column in table.primary_key.columns))
    last = {key(row): at for at, row in enumerate(rows)}
    return [last[k] for k in sorted(last)]


def _stored_digests(
    cursor: Any, lookup: str, unique: list[Row], ids_param: Callable[[list[Any]], Any]
) -> dict[tuple[str, int], int | None]:
    """The stored digests of the findings ``unique`` (sorted by key) holds, by key: one ``lookup`` per issue type,
    its parameters the issue type and ``ids_param`` of the ids."""
    stored: dict[tuple[str, int], int | None] = {}
    for issue_type, group in groupby(unique, key=itemgetter(_ISSUE_TYPE)):
        cursor.execute(lookup, (issue_type, ids_param([row[_ID] for row in group])))
        stored.update(((issue_type, ident), digest) for ident, digest in cursor.fetchall())
    return stored


def _to_write(
    unique: list[Row], digests: list[int], stored: dict[tuple[str, int], int | None], now: str | None
) -> tuple[list[Row], list[Row]]:
    """The findings to write, new and changed (a digest differs, or none is stored), each extended by its digest
    (and ``now``, the ``synced_at`` of the SQLite statements, unless None)."""
    tail: tuple[Any, ...] = () if now is None else (now,)
    new: list[Row] = []
    changed: list[Row] = []
    missing = object()
    for row, digest in zip(unique, digests, strict=True):
        before = stored.get((row[_ISSUE_TYPE], row[_ID]), missing)
        if before is missing:
            new.append((*row, digest, *tail))
        elif before != digest:
            changed.append((*row, digest, *tail))
    return new, changed


def _upsert_sql(conn: Connection, table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
    """The upsert statements of ``table`` for ``conn``'s dialect; they write ``columns`` plus ``synced_at``.

    A table without a ``digest`` column: SQLite (the upsert,); PostgreSQL (create the stage, copy into it, merge),
    each rewriting a row only when its ``raw`` differs. ``findings`` (``columns`` then ``digest``, compared
    instead of ``raw``; a ``raw`` unchanged keeps its ``synced_at``): SQLite (lookup, insert, upsert); PostgreSQL
    (lookup, create the stage, copy into it, merge). The lookup's parameters: an issue type and its ids (SQLite:
    as a JSON array).
    """
    quote = conn.dialect.identifier_preparer.quote
    target = _target(conn, table)
    postgres = conn.dialect.name == "postgresql"
    distinct = "IS DISTINCT FROM" if postgres else "IS NOT"
    # findings, and only findings, carry a digest (compared instead of raw) and a counted mark set on insert
    is_findings = table is findings
    written = (*columns, "digest") if is_findings else columns
    names = ", ".join(quote(column) for column in written)
    keys = [column.name for column in table.primary_key.columns]
    updates = [f"{quote(c)} = excluded.{quote(c)}" for c in written if c not in keys]
    if is_findings:
        updates.append(f"synced_at = CASE WHEN {target}.raw {distinct} excluded.raw THEN excluded.synced_at "
                       f"ELSE {target}.synced_at END")
        changed = f"{target}.digest {distinct} excluded.digest"
    else:
        updates.append("synced_at = excluded.synced_at")
        changed = f"{target}.raw {distinct} excluded.raw"
    # ``counted`` is not in the SET: an update keeps the stored row's mark
    on_conflict = (f"ON CONFLICT ({', '.join(quote(k) for k in keys)}) DO UPDATE SET {', '.join(updates)} "
                   f"WHERE {changed}")
    fingerprint_columns = ("issue_type", "repository_name", "match_based_id")
    mark_columns = (*fingerprint_columns, "ref", "relevant_since", "id")
    lookup: tuple[str, ...] = ()
    if is_findings:
        first, second = (quote(k) for k in keys)
        ids = "= ANY(CAST(%s AS bigint[]))" if postgres else "IN (SELECT value FROM json_each(?))"
        param = "%s" if postgres else "?"
        lookup = (f"SELECT {second}, digest FROM {target} WHERE {first} = {param} AND {second} {ids}",)
    if postgres:
        stage = _stage(table)
        source, mark = f"{stage} AS s", ""
        if is_findings:  # a new row's counted mark (branches.counted_on_insert), from the copies in the page
            # counted over the key columns only (a window over whole rows sorts them)
            fingerprint = ", ".join(quote(c) for c in fingerprint_columns)
            key = " AND ".join(f"c.{quote(k)} = s.{quote(k)}" for k in keys)
            source += (f" JOIN (SELECT {', '.join(quote(k) for k in keys)}, count(*) OVER (PARTITION BY {fingerprint})"
                       f" AS copies FROM {stage}) AS c ON {key}")
            mark = ", " + counted_on_insert("postgresql", target, *(f"s.{quote(c)}" for c in mark_columns),
                                            copies_in_batch="c.copies")
        return (
            *lookup,
            f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {names} FROM {target} WITH NO DATA",
            f"COPY {stage} ({names}) FROM STDIN",
            f"INSERT INTO {target} ({names}, synced_at{', counted' if is_findings else ''}) "
            f"SELECT {', '.join(f's.{quote(c)}' for c in written)}, CAST(%s AS timestamptz){mark} FROM {source} "
            f"{on_conflict}",
        )
    placeholders = ", ".join("?" * (len(written) + 1))
    upsert = f"INSERT INTO {target} ({names}, synced_at) VALUES ({placeholders}) {on_conflict}"
    if not is_findings:
        return (upsert,)
    # a new finding's mark reads the row's own parameters again by number (?N is the N-th column)
    mark = counted_on_insert("sqlite", target, *(f"?{columns.index(c) + 1}" for c in mark_columns))
    insert = f"INSERT INTO {target} ({names}, synced_at, counted) VALUES ({placeholders}, {mark})"
    return (*lookup, insert, upsert)


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
