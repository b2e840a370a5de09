"""SQLAlchemy URL and engine of the warehouse, from the fields of an Airflow-style connection."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url

#: Connection types (as Airflow parses them from a URI scheme) that name a PostgreSQL database.
_POSTGRES_TYPES = ("postgres", "postgresql")
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: The page size of a new SQLite warehouse file, in bytes (SQLite's default: 4096). A finding's row is 2-3 KB (its
#: ``raw`` JSON), so a 4 KB page holds one row and leaves the rest of it empty: the file is about 1.8 times the
#: rows' size, and a first load writes, checkpoints and (to build its indexes) reads all of it. 16 KB pages hold
#: six rows (bench/README.md has the figures). A file keeps the page size it was created with: SQLite sets it only
#: on a new, empty file, before WAL (docs/provider.md has how to convert an existing warehouse).
SQLITE_PAGE_SIZE = 16_384
#: Bytes the SQLite WAL may hold before a commit checkpoints it into the database file (SQLite's default: 1000
#: pages). A page of 3000 findings writes about 8 MB, so at the default every page's commit checkpoints; with 64 MB
#: the index pages that several pages touch are written back once every few pages (bench/README.md, "Where the
#: time goes"). A crash of the process loses no committed transaction (they are in the WAL); a power loss may lose
#: those committed since the last checkpoint (``synchronous = NORMAL`` syncs the WAL at checkpoints). Set in pages
#: of the file's own page size.
SQLITE_WAL_AUTOCHECKPOINT_BYTES = 64 * 1024 * 1024


def url_from_connection(
    conn_type: str | None,
    host: str | None = None,
    schema: str | None = None,
    login: str | None = None,
    password: str | None = None,
    port: int | None = None,
    extra: str | Mapping[str, Any] | None = None,
) -> URL:
    """Rebuild the SQLAlchemy URL of a database named by an Airflow connection's fields.

    Airflow parses ``sqlite:////abs/path/file.db`` into conn_type ``sqlite`` with the path in ``schema``; a
    connection written as JSON may carry the path in ``host`` instead; ``sqlite://dir/file.db`` splits into
    host ``dir`` and schema ``file.db``, joined again here. ``postgresql://user@host:5432/db`` becomes
    conn_type ``postgres`` and is driven by psycopg2; an explicit ``postgresql+driver`` type is kept. Scalar
    extras (the URI's query parameters, e.g. ``sslmode``) become URL query parameters, passed to the driver.
    """
    kind = (conn_type or "").strip().lower()
    query = _query(extra)
    if kind == "sqlite" or kind.startswith("sqlite+"):
        return URL.create(kind, database=_sqlite_path(host, schema), query=query)
    if kind in _POSTGRES_TYPES or kind.startswith("postgresql+"):
        return URL.create(
            "postgresql+psycopg2" if kind in _POSTGRES_TYPES else kind,
            username=login or None,
            password=password or None,
            host=host or None,
            port=port or None,
            database=schema or None,
            query=query,
        )
    raise ValueError(
        f"unsupported warehouse connection type {conn_type!r}: name a SQLite file "
        "(sqlite:////abs/path/file.db) or a PostgreSQL database (postgresql://user@host:5432/db)"
    )


def _sqlite_path(host: str | None, schema: str | None) -> str:
    host, schema = host or "", schema or ""
    if host and schema and not schema.startswith("/"):
        return f"{host.rstrip('/')}/{schema}"
    path = schema or host
    if not path:
        raise ValueError("a SQLite warehouse connection needs a file path, e.g. sqlite:////srv/airflow/warehouse.db")
    return path


def _query(extra: str | Mapping[str, Any] | None) -> dict[str, str]:
    options = json.loads(extra) if isinstance(extra, str) and extra.strip() else extra or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"connection extra must be a JSON object, got {type(options).__name__}")
    return {
        str(key): json.dumps(value) if isinstance(value, bool) else str(value)
        for key, value in options.items()
        if isinstance(value, (str, int, float))
    }


def make_engine(url: URL | str) -> Engine:
    """Create the warehouse engine: SQLite in WAL mode with a busy timeout, PostgreSQL with pre-ping.

    A bare ``postgresql://`` URL is driven by psycopg2 (the warehouse's COPY path needs it).
    """
    url = make_url(url)
    backend = url.get_backend_name()
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg2")
    if backend == "sqlite":
        engine = create_engine(url)
        event.listen(engine, "connect", apply_sqlite_settings)
        return engine
    if backend == "postgresql":
        engine = create_engine(url, pool_pre_ping=True)
        event.listen(engine, "connect", apply_postgresql_settings)
        return engine
    raise ValueError(f"unsupported warehouse database {backend!r}: use SQLite or PostgreSQL")


def apply_sqlite_settings(dbapi_connection: Any, _record: Any = None) -> None:
    """Per-connection SQLite settings: wait for locks, large pages for a new file, WAL for concurrent readers, fewer
    fsyncs and checkpoints, FKs on."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute(f"PRAGMA page_size = {SQLITE_PAGE_SIZE}")  # a new, empty file only; any other keeps its own
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        page_size = int(cursor.execute("PRAGMA page_size").fetchone()[0])
        cursor.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_BYTES // page_size}")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


#: Settings of each PostgreSQL session, when the server offers them (``pg_settings``): (parameter, value).
#: ``lz4`` compresses the 2-3 KB ``raw`` values (TOAST) several times faster than the default ``pglz``, which the
#: ``COPY`` of every page into its staging table pays (CHANGELOG.md has the figures). A value keeps the method it
#: was written with; reads decompress either.
POSTGRESQL_SETTINGS = (("default_toast_compression", "lz4"),)


def apply_postgresql_settings(dbapi_connection: Any, _record: Any = None) -> None:
    """Per-connection PostgreSQL settings (``POSTGRESQL_SETTINGS``), each only where the server accepts its value
    (lz4 needs PostgreSQL 14 built with it): otherwise the server's default stays."""
    cursor = dbapi_connection.cursor()
    try:
        for name, value in POSTGRESQL_SETTINGS:  # one statement each: set where the server offers the value
            cursor.execute("SELECT set_config(name, %s, false) FROM pg_settings WHERE name = %s AND %s = ANY(enumvals)",
                           (value, name, value))
        dbapi_connection.commit()
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the database file to WAL unless it is in WAL already (the mode is kept in the file). Switching needs
    the file to itself and SQLite answers "database is locked" at once, without waiting the busy timeout, when
    another connection holds a lock (two workers opening a new warehouse together): retry until the busy timeout."""
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
