"""Bulk upserts of API objects over one engine, in each dialect's fastest path, one transaction per call.

Bulk upserts (findings and the other API tables) bypass SQLAlchemy's per-row work:

- SQLite: DBAPI ``executemany`` of ``INSERT ... ON CONFLICT DO UPDATE ... WHERE t.raw IS NOT excluded.raw``;
- PostgreSQL: ``COPY`` into a temporary staging table, then one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE
  ... WHERE t.raw IS DISTINCT FROM excluded.raw`` (measured faster than batched ``execute_values``).

A row whose ``raw`` JSON is unchanged is not written at all (its ``synced_at`` keeps the time its content was
last written), so a re-sync writes nothing new. Rows are the tuples of :mod:`.rows`.

Findings, the large table, are not even sent to the database when unchanged. Each one's ``digest``
(:func:`.rows.content_digest` of its ``raw``) is stored with it; an upsert first compares the page's digests with
the stored ones (one indexed query per issue type: on SQLite in the database, which answers the positions of the new
and changed findings; on PostgreSQL by reading the stored digests of the page's keys) and writes only the findings
that are new (a plain ``INSERT``) or whose digest differs (the upsert, ``WHERE t.digest IS DISTINCT FROM
excluded.digest``); an unchanged page costs that lookup only. A finding stored before the digest existed (``digest``
NULL) counts as changed once: it is written with its digest, keeping its ``synced_at`` when its ``raw`` is
unchanged. ``findings_to_write`` answers the same lookup without writing, for a caller that has not built its rows
yet (the extraction's re-sync builds rows only for the findings it names). On SQLite the write lock is taken
before the lookup; on PostgreSQL a concurrent upsert of the same finding may write between the lookup and the
write (either one's reading of the service is then kept, as when two upserts cross without the lookup).

On PostgreSQL a lost connection (the server restarted, or the session was terminated) does not fail an operation
whose repetition is harmless: upserts, and the warehouse's pipeline state, reads and triage outcome updates
(:mod:`.store`), run again on a new connection after a short wait, up to ``len(RECONNECT_DELAYS)`` times (about
15 s in all; a longer outage fails the task, whose own retries take over). The transaction that was cut is rolled
back by the server, so a page upsert is repeated whole.
"""

from __future__ import annotations

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

from .branches import (
    SQLITE_LEFT_BEHIND,
    Fingerprint,
    left_behind,
    lock_findings,
    mark_on_update,
    marked_insert,
    marks_on_insert,
    stored_copies,
)
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
_REF, _RELEVANT_SINCE = FINDING_COLUMNS.index("ref"), FINDING_COLUMNS.index("relevant_since")
#: A ``FINDING_COLUMNS`` row's fingerprint (``branches.Fingerprint``).
_FINGERPRINT: Callable[[Row], Fingerprint] = itemgetter(*(FINDING_COLUMNS.index(c) for c in (
    "issue_type", "repository_name", "match_based_id")))


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

    def upsert_findings(self, rows: Sequence[Row], *, digests: Sequence[int] | None = None,
                        lines: Sequence[str] | None = None) -> int:
        """Insert or update findings (``FINDING_COLUMNS`` tuples) in one transaction; return rows written (new ones,
        changed ones, and stored ones without a digest yet).

        Only the findings whose ``digest`` differs from the stored one are sent to the database (see the module's
        docstring). In the same transaction, every change of a stored finding's ``HISTORY_FIELDS`` is recorded in
        ``finding_events`` as observed now by ``self.run_id`` (see :mod:`.history`). ``digests``: the rows'
        :func:`.rows.finding_digests`, when the caller has them already (the extraction computes them beside
        the rows, in its worker process); ``lines``: with them, the rows' :func:`finding_copy_lines`, for a
        PostgreSQL warehouse only: every row written is copied as its line (not formatted here), and the rows may
        leave out their last column, ``raw``, which the lines carry.
        """
        postgres = self.engine.dialect.name == "postgresql"
        if lines is not None and (not postgres or digests is None):
            raise ValueError(
                f"upsert_findings: lines are COPY text for a PostgreSQL warehouse, given with the digests; got them "
                f"for a {self.engine.dialect.name} warehouse, digests {'None' if digests is None else 'given'}")
        if digests is None:
            digests = finding_digests(rows)
        at = _unique_at(findings, FINDING_COLUMNS, rows)
        if not at:
            return 0
        unique = [rows[i] for i in at]
        digests = [digests[i] for i in at]
        now = utc_now_text()
        texts = None if lines is None else [lines[i] for i in at]

        def write() -> int:
            with self.engine.begin() as conn:
                cursor = conn.connection.cursor()
                try:
                    if postgres:
                        return self._postgresql_findings(conn, cursor, unique, digests, now, texts)
                    return self._sqlite_findings(conn, cursor, unique, digests, now)
                finally:
                    cursor.close()

        return self._reconnecting(f"upsert of {len(unique)} findings rows", write)

    def findings_to_write(self, issue_type: str, ids: Sequence[int], digests: Sequence[int]) -> list[int]:
        """The positions in ``ids`` of the findings ``upsert_findings`` would write: those not stored, and those
        stored with another digest (or none), each id once (its last position, as the upsert keeps the last of
        duplicates), ascending. One read (the upsert's lookup), no lock: a caller that has not built its rows yet
        builds only these, and the upsert decides again under its lock."""
        order = _last_positions(ids)
        keys = [(issue_type, ids[at]) for at in order]
        ordered = [digests[at] for at in order]

        def read() -> list[int]:
            with self.engine.connect() as conn:
                cursor = conn.connection.cursor()
                try:
                    new, changed = _lookup(cursor, self._sql(conn, findings, FINDING_COLUMNS)[0],
                                           conn.dialect.name == "postgresql", keys, ordered)
                finally:
                    cursor.close()
            return sorted(order[k] for k in (*new, *changed))

        return self._reconnecting(f"lookup of {len(keys)} findings' digests", read)

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
                        cursor.copy_expert(copy, _CopyStream(unique))
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
        digests (``branches.lock_findings``: ``BEGIN IMMEDIATE``): no other writer can store or change one of the
        page's findings in between.
        """
        lookup, insert, upsert = self._sql(conn, findings, FINDING_COLUMNS)
        lock_findings(conn)
        new_at, changed_at = _lookup(cursor, lookup, False, _keys(unique), digests)
        new = [(*unique[at], digests[at], now) for at in new_at]
        changed = [(*unique[at], digests[at], now) for at in changed_at]
        written = 0
        if new:
            cursor.executemany(insert, new)
            written += int(cursor.rowcount)
        if changed:
            for statement in (*SQLITE_HISTORY_SETUP, SQLITE_LEFT_BEHIND):
                cursor.execute(statement)
            cursor.execute(SQLITE_SET, (self.run_id, now))
            cursor.executemany(upsert, changed)
            written += int(cursor.rowcount)
            cursor.execute(SQLITE_CLEAR)
        return written

    def _postgresql_findings(
        self, conn: Connection, cursor: Any, unique: list[Row], digests: list[int], now: str,
        texts: list[str] | None,
    ) -> int:
        """PostgreSQL: the new findings copied straight into ``findings`` with their ``counted`` marks; the changed
        ones copied into the staging table, their history recorded, then merged; nothing more when every finding
        is unchanged.

        Findings upserts take the findings write lock (``branches.lock_findings``) before the lookup of the
        stored digests, so they run one at a time (as SQLite's ``BEGIN IMMEDIATE``): no other upsert can store one
        of the page's new findings, or a copy of their fingerprints, between the lookup and the ``COPY``. A new row
        has no stored counterpart, hence no history and no conflict to resolve. ``texts``: the rows'
        :func:`finding_copy_lines`, if given; each row written is then copied as its line (a new one with the
        per-write fields, ``synced_at`` and ``counted``), not formatted here.
        """
        lookup, copy_new, create_stage, copy, merge = self._sql(conn, findings, FINDING_COLUMNS)
        lock_findings(conn)
        new_at, changed_at = _lookup(cursor, lookup, True, _keys(unique), digests)
        written = 0
        if new_at:
            new = [(*unique[at], digests[at]) for at in new_at]
            target = _target(conn, findings)
            marks = marks_on_insert([(_FINGERPRINT(row), row[_REF], row[_RELEVANT_SINCE], row[_ID]) for row in new],
                                    lambda fingerprints: stored_copies(cursor, target, fingerprints))
            if texts is None:
                rows = [(*row, now, mark) for row, mark in zip(new, marks, strict=True)]
                cursor.copy_expert(copy_new, _CopyStream(rows))
            else:
                ends = {mark: f"\t{now}\t{_COPY_MARKS[mark]}\n" for mark in (True, False, None)}
                cursor.copy_expert(copy_new, _CopyStream(
                    [(texts[at], mark) for at, mark in zip(new_at, marks, strict=True)],
                    lambda chunk: "".join([line + ends[mark] for line, mark in chunk])))
            written += len(new)
        if changed_at:
            cursor.execute(create_stage)
            cursor.copy_expert(copy, _CopyStream([(*unique[at], digests[at]) for at in changed_at])
                               if texts is None else _CopyStream(
                [texts[at] for at in changed_at], lambda chunk: "".join([line + "\n" for line in chunk])))
            cursor.execute(postgresql_events(_stage(findings), _target(conn, findings)), (now, self.run_id))
            left_behind(cursor, _stage(findings), _target(conn, findings))
            cursor.execute(merge, (now,))
            written += int(cursor.rowcount)
        return written

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
    return _last_positions([key(row) for row in rows])


def _last_positions(keys: Sequence[Any]) -> list[int]:
    """The position of each key's last occurrence in ``keys``, in key order (the last of duplicates wins)."""
    last = {k: at for at, k in enumerate(keys)}
    return [last[k] for k in sorted(last)]


_MISSING = object()


def _keys(unique: list[Row]) -> list[tuple[str, int]]:
    """The (issue type, id) keys of ``FINDING_COLUMNS`` rows."""
    return [(row[_ISSUE_TYPE], row[_ID]) for row in unique]


def _lookup(
    cursor: Any, lookup: str, postgres: bool, keys: list[tuple[str, int]], digests: Sequence[int]
) -> tuple[list[int], list[int]]:
    """The positions in ``keys`` (sorted, unique) of the findings not stored, and of those stored with another
    digest than ``digests`` gives (or none): one ``lookup`` (``_upsert_sql``'s) per issue type.

    SQLite answers the two lists of positions itself, in one row: given the page's ids and digests as JSON, the
    database compares them (not a row per stored finding: SQLite's driver takes the interpreter lock again for each
    row it steps through, which the fetch thread holds most of the time during a re-sync of unchanged findings).
    PostgreSQL answers the stored digests of the ids (the same comparison in the database measured slower at
    1,000,000 findings), compared here.
    """
    new: list[int] = []
    changed: list[int] = []
    for issue_type, group in groupby(range(len(keys)), key=lambda at: keys[at][0]):
        positions = list(group)
        if postgres:  # the ids as a bigint[] literal: psycopg2's adaptation of a list costs several times more
            ids = [keys[at][1] for at in positions]
            cursor.execute(lookup, ("{" + ",".join(map(str, ids)) + "}", issue_type))
            stored = dict(cursor.fetchall())
            if not stored:  # none stored (a first load's pages): all new
                new.extend(positions)
                continue
            for at, ident in zip(positions, ids, strict=True):
                before = stored.get(ident, _MISSING)
                if before is _MISSING:
                    new.append(at)
                elif before != digests[at]:
                    changed.append(at)
        else:
            pairs = orjson.dumps([[keys[at][1], digests[at]] for at in positions]).decode()
            cursor.execute(lookup, (issue_type, pairs))
            fresh, differing = cursor.fetchone()
            new.extend(positions[k] for k in sorted(orjson.loads(fresh)))
            changed.extend(positions[k] for k in sorted(orjson.loads(differing)))
    return new, changed


def _upsert_sql(conn: Connection, table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
    """The upsert statements of ``table`` for ``conn``'s dialect; they write ``columns`` plus ``synced_at``.

    A table without a ``digest`` column: SQLite (the upsert,); PostgreSQL (create the stage, copy into it, merge),
    each rewriting a row only when its ``raw`` differs. ``findings`` (``columns`` then ``digest``, compared
    instead of ``raw``; a ``raw`` unchanged keeps its ``synced_at``): SQLite (lookup, insert, upsert); PostgreSQL
    (lookup, copy new rows into the table, create the stage, copy into it, merge). The lookup's parameters: an
    issue type and its ids with their digests as a JSON array (SQLite); its ids as a ``bigint[]`` literal, then the
    issue type (PostgreSQL): see ``_lookup``.
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
        updates.append(f"counted = {mark_on_update(target, distinct)}")
        changed = f"{target}.digest {distinct} excluded.digest"
    else:
        updates.append("synced_at = excluded.synced_at")
        changed = f"{target}.raw {distinct} excluded.raw"
    # an update keeps the stored row's ``counted`` mark unless the copy's rank or fingerprint changes
    # (``branches.mark_on_update``)
    on_conflict = (f"ON CONFLICT ({', '.join(quote(k) for k in keys)}) DO UPDATE SET {', '.join(updates)} "
                   f"WHERE {changed}")
    if postgres:
        stage = _stage(table)
        direct: tuple[str, ...] = ()
        if is_findings:
            first, second = (quote(k) for k in keys)
            # one primary key probe per id, whatever the statistics: the LATERAL subquery's OFFSET 0 keeps it from
            # becoming a join. ``id = ANY(...)`` is planned from the statistics, which a first load leaves stale:
            # the planner then takes issue_type for selective and reads all of the type's stored rows per page.
            direct = (f"SELECT k.id, f.digest FROM unnest(CAST(%s AS bigint[])) AS k(id) CROSS JOIN LATERAL "
                      f"(SELECT digest FROM {target} AS f WHERE f.{first} = %s AND f.{second} = k.id OFFSET 0) AS f",
                      f"COPY {target} ({names}, synced_at, counted) FROM STDIN")
        # the merge writes only rows stored at the lookup (changed findings): no counted mark (a row gone since,
        # deleted by hand, is stored again unmarked, NULL, for the next recount)
        return (
            *direct,
            f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {names} FROM {target} WITH NO DATA",
            f"COPY {stage} ({names}) FROM STDIN",
            f"INSERT INTO {target} ({names}, synced_at) SELECT {names}, CAST(%s AS timestamptz) FROM {stage} "
            f"{on_conflict}",
        )
    placeholders = ", ".join("?" * (len(written) + 1))
    upsert = f"INSERT INTO {target} ({names}, synced_at) VALUES ({placeholders}) {on_conflict}"
    if not is_findings:
        return (upsert,)
    first, second = (quote(k) for k in keys)
    # the page's [id, digest] pairs as a JSON array; answers the positions of those not stored, and of those stored
    # with another digest (or none), as two JSON arrays: one row
    lookup = (f"SELECT json_group_array(k.key) FILTER (WHERE f.{second} IS NULL), "
              f"json_group_array(k.key) FILTER (WHERE f.{second} IS NOT NULL) "
              f"FROM json_each(?2) AS k LEFT JOIN {target} AS f "
              f"ON f.{first} = ?1 AND f.{second} = json_extract(k.value, '$[0]') "
              f"WHERE f.{second} IS NULL OR f.digest IS NOT json_extract(k.value, '$[1]')")
    return (lookup, marked_insert(target, (*written, "synced_at"), quote), upsert)


#: Rows formatted per read of a :class:`_CopyStream` (about 0.5 MB of findings' COPY text).
_COPY_CHUNK = 200


#: A ``counted`` mark in the COPY text format.
_COPY_MARKS = {True: "t", False: "f", None: "\\N"}


class _CopyStream:
    """The COPY text of ``rows`` as a file for ``copy_expert``, formatted by ``text`` (by default
    :func:`_copy_text`; or the ending of lines formatted already) ``_COPY_CHUNK`` rows per read as the driver reads
    it: the server parses and inserts the first rows while the next are formatted (the driver releases the GIL
    while it sends), and the page's text is never held whole."""

    def __init__(self, rows: Sequence[Any], text: Callable[[Sequence[Any]], str] | None = None) -> None:
        self._rows = rows
        self._text = _copy_text if text is None else text
        self._at = 0

    def read(self, size: int = -1) -> str:  # psycopg2 sends whatever one read returns
        start = self._at
        self._at = start + _COPY_CHUNK
        return self._text(self._rows[start : self._at]) if start < len(self._rows) else ""


def _copy_lines(rows: Iterable[Row]) -> list[str]:
    """Rows in PostgreSQL's COPY text format, one line each without its line break: NULL as ``\\N``, a text with a
    backslash, tab or line break escaped (most have none: no call), any other value as ``str`` gives it. One
    expression, no call per value (the call would cost more than the work of most values)."""
    return ["\t".join([
        (value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
         if "\\" in value or "\t" in value or "\n" in value or "\r" in value else value)
        if value.__class__ is str else "\\N" if value is None else str(value)
        for value in row]) for row in rows]


def _copy_text(rows: Iterable[Row]) -> str:
    """Rows in PostgreSQL's COPY text format (:func:`_copy_lines`, each line ended)."""
    lines = _copy_lines(rows)
    return "\n".join(lines) + "\n" if lines else ""


def finding_copy_lines(rows: Sequence[Row], digests: Sequence[int]) -> list[str]:
    """The COPY text line of each finding row (``FINDING_COLUMNS``) followed by its digest, without the fields a
    write adds (``synced_at``, ``counted``) or the line break: what a PostgreSQL upsert copies of a new finding
    (``upsert_findings``'s ``lines``; the extraction's worker process formats them beside the rows)."""
    return _copy_lines((*row, digest) for row, digest in zip(rows, digests, strict=True))
