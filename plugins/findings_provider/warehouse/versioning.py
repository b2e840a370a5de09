"""Versioned warehouse schema: Alembic revisions shipped in ``migrations/``, applied under the schema lock.

The revision a warehouse is at is kept in its own table, ``VERSION_TABLE`` (never Alembic's default
``alembic_version``, so a database shared with another Alembic user is safe). There is no alembic.ini: the
configuration is built here, with the connection to use in ``config.attributes["connection"]`` (read by
``migrations/env.py``). :func:`ensure_current` is what ``Warehouse.create_all`` runs:

- the version table says head: return after that one query;
- otherwise, in one transaction holding the schema lock (``pg_advisory_xact_lock`` on PostgreSQL, ``BEGIN
  IMMEDIATE`` on SQLite), look again and: an empty database is upgraded to head; a warehouse made before
  versioning (its tables, no version) is brought to revision 0001 by the additive steps of :mod:`.migrate`,
  stamped 0001, then upgraded to head; a versioned one is upgraded to head.

A concurrent caller waits for the lock and then finds nothing to do.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Index, MetaData, Table, func, inspect, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from .migrate import add_columns, add_indexes, missing_columns, missing_indexes

if TYPE_CHECKING:  # Alembic is imported when a schema change is looked at, never by importing the operators
    from alembic.config import Config
    from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

#: The table holding the warehouse's revision (one row).
VERSION_TABLE = "warehouse_schema_version"
#: Alembic's script directory, shipped inside the package.
MIGRATIONS = Path(__file__).with_name("migrations")
#: The first revision: the schema of the first versioned release (what an unversioned warehouse is brought to).
BASELINE = "0001"
#: Serialises concurrent schema changes on PostgreSQL (an arbitrary constant advisory lock key).
SCHEMA_LOCK_KEY = 0x46_57_48_01


def alembic_config(connection: Connection | None = None, version_locations: Iterable[str | Path] = ()) -> Config:
    """The Alembic configuration of the warehouse, on ``connection``; ``version_locations`` are directories of
    further revisions (tests add one), searched besides the shipped ``migrations/versions``."""
    from alembic.config import Config

    config = Config()
    locations = [MIGRATIONS / "versions", *(Path(p) for p in version_locations)]
    options = {
        "script_location": str(MIGRATIONS),
        "version_locations": os.pathsep.join(str(p) for p in locations),
        "path_separator": "os",  # Alembic >= 1.16
        "version_path_separator": "os",  # Alembic < 1.16 (ignored when path_separator is set)
        "file_template": "%(rev)s_%(slug)s",
    }
    for key, value in options.items():
        config.set_main_option(key, value.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head_revisions(version_locations: tuple[str, ...] = ()) -> frozenset[str]:
    """The head revision(s) of the scripts (read once per process and set of locations)."""
    from alembic.script import ScriptDirectory

    return frozenset(ScriptDirectory.from_config(alembic_config(None, version_locations)).get_heads())


def stored_revisions(conn: Connection) -> frozenset[str] | None:
    """The revisions in ``VERSION_TABLE``, or None when that table does not exist (one query, no catalogue
    inspection; on PostgreSQL a missing table aborts the transaction, so run it in a transaction of its own)."""
    try:
        return frozenset(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
    except (OperationalError, ProgrammingError):  # no such table (SQLite: OperationalError; PostgreSQL: Programming)
        return None


def is_current(engine: Engine, version_locations: Sequence[str | Path] = ()) -> bool:
    """Whether the warehouse's version table says head (one query)."""
    heads = head_revisions(tuple(str(p) for p in version_locations))
    with engine.connect() as conn:
        return stored_revisions(conn) == heads


def ensure_current(engine: Engine, version_locations: Sequence[str | Path] = ()) -> None:
    """Bring the warehouse to head unless the version table already says head (see the module's docstring)."""
    if not is_current(engine, version_locations):
        upgrade(engine, version_locations=version_locations)


def upgrade(engine: Engine, target: str = "head", version_locations: Sequence[str | Path] = ()) -> str | None:
    """Under the schema lock, bring the warehouse to ``target`` (an unversioned one first to 0001, stamped);
    return the revision it is at afterwards."""
    with engine.begin() as conn:
        lock_schema(conn)
        config = alembic_config(conn, version_locations)
        from alembic import command
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(config)
        current = current_revision(conn)
        if current is None and _has_warehouse_tables(conn, script):
            log.warning("warehouse: the tables exist without a version (made before versioning): bringing them to "
                        "revision %s and stamping it", BASELINE)
            bring_to_baseline(conn, script)
            command.stamp(config, BASELINE)
        elif current is not None:
            _check_known(script, current)
        command.upgrade(config, target)
        reached = current_revision(conn)
    if reached != current:
        log.warning("warehouse: schema upgraded from revision %s to %s", current or "(none)", reached)
    return reached


def current_revision(conn: Connection) -> str | None:
    """The revision the warehouse is at, or None when it is not versioned (no version table, or an empty one)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def lock_schema(conn: Connection) -> None:
    """Take the schema lock for the length of ``conn``'s transaction (it must be in one)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # take SQLite's write lock before looking at what exists


def bring_to_baseline(conn: Connection, script: ScriptDirectory | None = None) -> None:
    """Bring an unversioned warehouse to the tables of revision 0001: create the missing tables, add the missing
    columns (finding columns filled from ``raw``) and indexes (the steps of :mod:`.migrate`)."""
    baseline = baseline_metadata(script)
    baseline.create_all(conn)
    add_columns(conn, missing_columns(conn, baseline))
    add_indexes(conn, missing_indexes(conn, baseline))


def baseline_metadata(script: ScriptDirectory | None = None) -> MetaData:
    """The tables and indexes revision 0001 creates, as a ``MetaData`` (its ``create_schema`` run on a recorder)."""
    if script is None:
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(alembic_config())
    revision = script.get_revision(BASELINE)
    if revision is None:  # pragma: no cover - the baseline ships with the package
        raise RuntimeError(f"revision {BASELINE} is missing from {MIGRATIONS}")
    recorder = _Recorder()
    revision.module.create_schema(recorder)
    return recorder.metadata


class _Recorder:
    """Stands in for Alembic's ``op`` in revision 0001's ``create_schema``: builds the tables on a MetaData."""

    def __init__(self) -> None:
        self.metadata = MetaData()

    def create_table(self, name: str, *items: Any, **kw: Any) -> Table:
        """Define the table ``name`` on the recorder's metadata."""
        return Table(name, self.metadata, *items, **kw)

    def create_index(self, name: str, table_name: str, columns: Sequence[str], **kw: Any) -> Index:
        """Define the index ``name`` on the recorded table ``table_name``."""
        recorded = self.metadata.tables[table_name]
        return Index(name, *(recorded.c[c] for c in columns), **kw)


def _has_warehouse_tables(conn: Connection, script: ScriptDirectory) -> bool:
    """Whether any table of revision 0001 exists (a warehouse made before versioning)."""
    existing = set(inspect(conn).get_table_names())
    return any(name in existing for name in baseline_metadata(script).tables)


def _check_known(script: ScriptDirectory, current: str) -> None:
    """Refuse a warehouse at a revision these scripts do not know (a newer provider migrated it)."""
    from alembic.script.revision import RevisionError
    from alembic.util.exc import CommandError

    try:
        script.get_revision(current)
    except (CommandError, RevisionError) as error:
        known = ", ".join(sorted(r.revision for r in script.walk_revisions()))
        raise RuntimeError(
            f"the warehouse is at schema revision {current!r}, which this version of the provider does not know "
            f"(it knows {known}): a newer version migrated it; upgrade the provider"
        ) from error
