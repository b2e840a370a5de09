"""Warehouse URLs rebuilt from real Airflow connections, and the engines made from them."""

from __future__ import annotations

import sqlite3

import pytest
from airflow.models.connection import Connection
from findings_provider.warehouse import make_engine, url_from_connection
from sqlalchemy.engine import URL


def url_of(conn: Connection) -> URL:
    return url_from_connection(conn.conn_type, conn.host, conn.schema, conn.login, conn.password, conn.port, conn.extra)


def test_sqlite_uri_absolute_path():
    conn = Connection(conn_id="w", uri="sqlite:////srv/airflow/warehouse.db")
    assert (conn.conn_type, conn.schema) == ("sqlite", "/srv/airflow/warehouse.db")  # where Airflow puts it
    url = url_of(conn)
    assert url.drivername == "sqlite"
    assert url.database == "/srv/airflow/warehouse.db"
    assert url.render_as_string() == "sqlite:////srv/airflow/warehouse.db"


def test_sqlite_uri_query_becomes_driver_options():
    url = url_of(Connection(conn_id="w", uri="sqlite:////srv/w.db?timeout=5"))
    assert url.database == "/srv/w.db"
    assert dict(url.query) == {"timeout": "5"}


def test_sqlite_path_in_host_of_a_json_connection():
    conn = Connection(conn_id="w", conn_type="sqlite", host="/data/warehouse.db")
    assert url_of(conn).database == "/data/warehouse.db"


def test_sqlite_relative_path_split_by_airflow_is_joined_again():
    conn = Connection(conn_id="w", uri="sqlite://data/warehouse.db")
    assert url_of(conn).database == "data/warehouse.db"


def test_postgres_uri():
    conn = Connection(conn_id="w", uri="postgresql://airflow@db.internal:5432/findings")
    assert conn.conn_type == "postgres"
    url = url_of(conn)
    assert (url.drivername, url.username, url.password, url.host, url.port, url.database) == (
        "postgresql+psycopg2",
        "airflow",
        None,
        "db.internal",
        5432,
        "findings",
    )


def test_postgres_password_and_options_survive():
    conn = Connection(conn_id="w", uri="postgresql://u:p%40ss%2Fw@h/db?sslmode=require")
    url = url_of(conn)
    assert url.password == "p@ss/w"
    assert dict(url.query) == {"sslmode": "require"}
    assert url.render_as_string(hide_password=False) == "postgresql+psycopg2://u:p%40ss%2Fw@h/db?sslmode=require"


def test_explicit_driver_is_kept():
    url = url_of(Connection(conn_id="w", uri="postgresql+psycopg2://u@h:6432/db"))
    assert (url.drivername, url.port) == ("postgresql+psycopg2", 6432)


def test_extras_as_mapping_keep_scalars_only():
    url = url_from_connection(
        "postgres",
        "h",
        "db",
        extra={"sslmode": "verify-full", "keepalives": 1, "nested": {"x": 1}, "flag": True},
    )
    assert dict(url.query) == {"sslmode": "verify-full", "keepalives": "1", "flag": "true"}


@pytest.mark.parametrize(
    ("conn_type", "message"),
    [
        ("sqlite", "needs a file path"),
        ("mysql", "unsupported warehouse connection type 'mysql'"),
        (None, "unsupported"),
    ],
)
def test_unusable_connections_are_explained(conn_type, message):
    with pytest.raises(ValueError, match=message):
        url_from_connection(conn_type)


def _sqlite_settings(path) -> dict[str, object]:
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return {
                p: conn.exec_driver_sql(f"PRAGMA {p}").scalar()
                for p in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys", "wal_autocheckpoint",
                          "page_size")
            }
    finally:
        engine.dispose()


def test_sqlite_engine_settings(tmp_path):
    """A new file gets 16 KB pages and a WAL checkpointed at 64 MB (in its pages); a file made earlier with another
    page size keeps it, its checkpoint at the same 64 MB."""
    assert _sqlite_settings(tmp_path / "w.db") == {
        "journal_mode": "wal", "synchronous": 1, "busy_timeout": 30000, "foreign_keys": 1, "wal_autocheckpoint": 4096,
        "page_size": 16384}
    old = sqlite3.connect(tmp_path / "old.db")
    old.execute("CREATE TABLE t (x)")
    old.commit()
    old.close()
    settings = _sqlite_settings(tmp_path / "old.db")
    assert (settings["page_size"], settings["wal_autocheckpoint"], settings["journal_mode"]) == (4096, 16384, "wal")


def test_postgres_engine_uses_psycopg2_and_pre_ping():
    engine = make_engine("postgresql://u@127.0.0.1:1/db")  # no connection is opened
    assert engine.dialect.driver == "psycopg2"
    assert engine.pool._pre_ping is True


def test_other_databases_are_refused():
    with pytest.raises(ValueError, match="unsupported warehouse database 'mssql'"):
        make_engine(URL.create("mssql+pymssql", host="h"))


def test_opening_a_new_file_waits_for_another_writer_before_switching_to_wal(tmp_path):
    """Switching a file to WAL needs it to itself, and SQLite refuses at once (no busy timeout) while another
    connection holds the write lock: two workers opening a new warehouse together saw "database is locked"."""
    import sqlite3
    import threading

    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("SELECT x FROM t").scalar() == 1  # it waited for the other's commit
    finally:
        release.join()
        engine.dispose()
        other.close()


def test_postgres_sessions_compress_large_values_with_lz4_where_the_server_offers_it(postgresql_engine):
    from findings_provider.warehouse import Warehouse, finding_row_from_dict
    from findings_provider.warehouse.schema import findings
    from sqlalchemy import func, select

    with postgresql_engine.connect() as conn:
        offered = "lz4" in conn.exec_driver_sql(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'").scalar_one()
        setting = conn.exec_driver_sql("SHOW default_toast_compression").scalar_one()
    assert setting == ("lz4" if offered else "pglz")
    warehouse = Warehouse(postgresql_engine)
    warehouse.create_all()
    warehouse.upsert_findings([finding_row_from_dict("sast", {"id": 1, "description": "x" * 5000})])
    with postgresql_engine.connect() as conn:
        method = conn.execute(select(func.pg_column_compression(findings.c.raw))).scalar_one()
    assert method == setting  # the 5 KB text is stored compressed, by the session's method
