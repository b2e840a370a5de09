"""Local PostgreSQL and Redis for the CeleryExecutor stack and the benchmark: find them, and make throwaway
databases.

Defaults match the CI machine (PostgreSQL on 127.0.0.1:5432 with trust authentication, Redis on 127.0.0.1:6379);
``FINDINGS_PG_HOST``, ``FINDINGS_PG_PORT``, ``FINDINGS_PG_USER`` and ``FINDINGS_REDIS_URL`` override them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import quote, unquote, urlsplit


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str
    password: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str) -> tuple[Postgres, str]:
        """The server and the database of ``postgresql[+driver]://user[:password]@host[:port]/database`` (the
        defaults of :func:`configured_postgres` where a part is missing)."""
        parts, default = urlsplit(url), configured_postgres()
        password = unquote(parts.password) if parts.password is not None else None
        server = cls(parts.hostname or default.host, parts.port or default.port,
                     unquote(parts.username) if parts.username else default.user, password)
        return server, parts.path.lstrip("/") or "postgres"

    def url(self, database: str, driver: str = "postgresql") -> str:
        login = quote(self.user, safe="") + (f":{quote(self.password, safe='')}" if self.password else "")
        return f"{driver}://{login}@{self.host}:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        import psycopg2

        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                dbname=database, connect_timeout=5)
        conn.autocommit = True
        return conn

    def _run(self, database: str, *statements: str) -> list[tuple]:
        """Run ``statements`` on ``database`` (autocommit); return the rows of the last one that has any."""
        conn = self.connect(database)
        try:
            rows: list[tuple] = []
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
                    if cur.description is not None:
                        rows = cur.fetchall()
            return rows
        finally:
            conn.close()

    def version(self) -> str:
        """The server's version string (``SHOW server_version``)."""
        ((version,),) = self._run("postgres", "SHOW server_version")
        return str(version)

    def empty_database(self, database: str) -> None:
        """Drop every table of ``database``: a fresh ``public`` schema."""
        self._run(database, "DROP SCHEMA public CASCADE", "CREATE SCHEMA public")

    def checkpoint(self, database: str = "postgres") -> None:
        """Flush the server's dirty pages (``CHECKPOINT``), so that a timed run does not pay for the previous one."""
        self._run(database, "CHECKPOINT")

    def create_database(self, prefix: str) -> str:
        name = f"{prefix}_{secrets.token_hex(4)}"
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return name

    def drop_database(self, name: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
                cur.execute(f'DROP DATABASE IF EXISTS "{name}"')
        finally:
            conn.close()

    @contextlib.contextmanager
    def temporary_database(self, prefix: str) -> Iterator[str]:
        name = self.create_database(prefix)
        try:
            yield name
        finally:
            self.drop_database(name)


def services_required() -> bool:
    """True when a missing service must fail the run instead of skipping it (``.ci/run`` sets REQUIRE_SERVICES=1)."""
    return os.environ.get("REQUIRE_SERVICES", "") not in ("", "0", "false", "False")


def skip_or_fail(reason: str) -> NoReturn:
    """In a test: skip with a clear reason, or fail when services are required."""
    import pytest

    if services_required():
        pytest.fail(f"required service unavailable (REQUIRE_SERVICES=1): {reason}", pytrace=False)
    pytest.skip(reason)


def configured_postgres() -> Postgres:
    """The server and user the environment names: ``FINDINGS_PG_HOST`` (127.0.0.1), ``FINDINGS_PG_PORT`` (5432),
    ``FINDINGS_PG_USER`` (postgres)."""
    return Postgres(os.environ.get("FINDINGS_PG_HOST", "127.0.0.1"), int(os.environ.get("FINDINGS_PG_PORT", "5432")),
                    os.environ.get("FINDINGS_PG_USER", "postgres"))


def find_postgres() -> tuple[Postgres | None, str]:
    """The first user that can log in and create databases, or ``(None, reason)``."""
    try:
        import psycopg2
    except ImportError:
        return None, "psycopg2 is not installed (pip install psycopg2-binary)"
    configured = configured_postgres()
    host, port = configured.host, configured.port
    users = [os.environ["FINDINGS_PG_USER"]] if os.environ.get("FINDINGS_PG_USER") else ["postgres", "root"]
    errors = []
    for user in users:
        for dbname in ("postgres", "test", user):
            try:
                conn = psycopg2.connect(host=host, port=port, user=user, dbname=dbname, connect_timeout=3)
            except psycopg2.Error as exc:
                first = str(exc).strip().splitlines()[0]
                if "refused" in first or "translate host" in first or "timeout" in first:
                    return None, f"PostgreSQL at {host}:{port} is not reachable ({first})"
                errors.append(f"{user}@{dbname}: {first}")
                continue
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user")
                    row = cur.fetchone()
            finally:
                conn.close()
            if row and row[0]:
                return Postgres(host, port, user), ""
            errors.append(f"{user}: may not create databases")
            break
    return None, f"PostgreSQL at {host}:{port} unusable ({'; '.join(errors)})"


def find_redis(db: int | None = None) -> tuple[str | None, str]:
    """A Redis URL that answers PING (database ``db``, default ``FINDINGS_REDIS_DB`` or 5), or ``(None, reason)``."""
    try:
        import redis
    except ImportError:
        return None, "redis (Python client) is not installed"
    base = os.environ.get("FINDINGS_REDIS_URL", "redis://127.0.0.1:6379").rstrip("/")
    db = int(os.environ.get("FINDINGS_REDIS_DB", "5")) if db is None else db
    url = f"{base}/{db}"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:
        return None, f"Redis at {url} unreachable ({exc})"
    return url, ""
