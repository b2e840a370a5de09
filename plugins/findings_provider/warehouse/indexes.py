"""The secondary indexes of ``findings`` built after a first load instead of entry by entry during it.

A first load inserts every finding into the table and into each of its secondary indexes as the pages arrive;
an index built after the last page reads the table once and sorts its entries instead. :func:`deferred_on_first_load`
wraps the pulls of an extraction: when ``findings`` is empty at the start (decided once), it drops the indexes
the load does not use itself (every secondary index but ``LOAD_INDEXES``; the primary key stays), and builds
every missing one back when the pulls end, whatever way they end. A process killed in between leaves them
missing: :func:`build_missing` creates each index of :mod:`.schema`'s metadata that the table lacks (``CREATE
INDEX IF NOT EXISTS``, one query when none is missing); the next extraction and ``Warehouse.create_all`` run it.

Another writer or reader during the load (a second extraction, a triage run, the dashboard) stays correct: the
indexes only speed queries up, and no statement names one (the upserts' conflicts are on the primary key). It
may be slower while they are missing, and it may build them itself (``Warehouse.create_all``, or an extraction
starting on the non-empty table): the load then goes on with them, at the usual cost. Each index is built in a
transaction of its own under the schema lock (``versioning.lock_schema``), so concurrent builders do not race on
one name, and a SQLite writer waits for one index's build at a time, not for all of them (a concurrent writer
waits up to its busy timeout, ``url.SQLITE_BUSY_TIMEOUT_MS``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Index, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, DropIndex

from .schema import findings
from .versioning import lock_schema

log = logging.getLogger(__name__)

#: Indexes of ``findings`` that a load uses on every insert, kept through a first load: the counted mark's lookup
#: of each new row's fingerprint (``branches.counted_on_insert``, ``branches.stored_copies``).
LOAD_INDEXES = frozenset({"ix_findings_fingerprint"})
#: Dialects on which a first load builds the other indexes after the pulls: both (a PostgreSQL ``COPY`` into a table
#: without them is about a fifth faster, their build after it included: bench/README.md).
DEFERRED_ON = frozenset({"sqlite", "postgresql"})


def _by_name(index: Index) -> str:
    return str(index.name)


def deferrable_indexes() -> list[Index]:
    """The secondary indexes of ``findings`` a first load builds after its pulls (all but ``LOAD_INDEXES``)."""
    return sorted((i for i in findings.indexes if i.name not in LOAD_INDEXES), key=_by_name)


def existing_indexes(conn: Connection) -> set[str]:
    """Names of the indexes ``findings`` has, its primary key's included (one catalogue query)."""
    if conn.dialect.name == "sqlite":
        query = text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :table")
    else:
        query = text("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = :table")
    return set(conn.execute(query, {"table": findings.name}).scalars())


def missing_indexes(conn: Connection) -> list[Index]:
    """The indexes of ``findings`` in :mod:`.schema`'s metadata that the table lacks."""
    have = existing_indexes(conn)
    return sorted((i for i in findings.indexes if i.name not in have), key=_by_name)


def is_empty(engine: Engine, issue_type: str | None = None) -> bool:
    """Whether ``findings`` holds no row (of ``issue_type``, when given: one probe of the primary key)."""
    query = select(findings.c.id).limit(1)
    if issue_type is not None:
        query = query.where(findings.c.issue_type == issue_type)
    with engine.connect() as conn:
        return conn.execute(query).first() is None


def drop_deferrable(engine: Engine) -> list[str]:
    """Drop the indexes of :func:`deferrable_indexes` that exist (one transaction, under the schema lock); return
    their names."""
    with engine.begin() as conn:
        lock_schema(conn)
        have = existing_indexes(conn)
        dropped = [index for index in deferrable_indexes() if index.name in have]
        for index in dropped:
            conn.execute(DropIndex(index, if_exists=True))
    return [str(index.name) for index in dropped]


def build_missing(engine: Engine) -> list[str]:
    """Create every index of ``findings`` the table lacks (``CREATE INDEX IF NOT EXISTS`` from the metadata), each in
    a transaction of its own under the schema lock; return the names of those that were missing. One catalogue
    query when none is."""
    with engine.connect() as conn:
        missing = missing_indexes(conn)
        if not missing:
            return []
        conn.rollback()
        # no memory map of the file for the build: its mapped pages would count in the task's resident memory
        # (about the file's size)
        for index in missing:
            with conn.begin():
                lock_schema(conn)
                conn.execute(CreateIndex(index, if_not_exists=True))
    return [str(index.name) for index in missing]


@contextmanager
def deferred_on_first_load(engine: Engine) -> Iterator[bool]:
    """Around the pulls of an extraction: on a ``findings`` table that is empty now (a first load, on a dialect of
    ``DEFERRED_ON``), drop the indexes of :func:`deferrable_indexes` and build them back at the end, also when the
    body raises; otherwise build any index missing (left by a process killed during a first load) before the body.
    Yields whether the indexes are deferred."""
    first = engine.dialect.name in DEFERRED_ON and is_empty(engine)
    if not first:
        build_missing_logged(engine)
        yield False
        return
    dropped = drop_deferrable(engine)
    log.info("findings is empty: %d secondary indexes dropped for the first load, built after it (%s)",
             len(dropped), ", ".join(dropped) or "none existed")
    try:
        yield True
    finally:
        _build_logged(engine, "after the first load", logging.INFO)


def build_missing_logged(engine: Engine) -> list[str]:
    """:func:`build_missing`, logged (a warning: a missing index is left by a first load that did not finish)."""
    return _build_logged(engine, "missing from the warehouse (a first load that did not finish?)", logging.WARNING)


def _build_logged(engine: Engine, why: str, level: int) -> list[str]:
    started = time.perf_counter()
    built = build_missing(engine)
    if built:
        log.log(level, "findings: %d indexes built, %s, in %.1f s (%s)", len(built), why,
                time.perf_counter() - started, ", ".join(built))
    return built
