"""FindingsWarehouseHook: connection by AIRFLOW_CONN_* URI, or the SQLite file under $AIRFLOW_HOME."""

from __future__ import annotations

import os
import sqlite3

from findings_provider.hooks.warehouse import FindingsWarehouseHook
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import metadata
from sqlalchemy import exc, text
from sqlalchemy.engine import make_url

from devtools.services import skip_or_fail

ENV_CONN = "AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT"
POSTGRES_URL = os.environ.get("WAREHOUSE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def sqlite_tables(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_hook_identity():
    assert FindingsWarehouseHook.conn_name_attr == "warehouse_conn_id"
    assert FindingsWarehouseHook.default_conn_name == "findings_warehouse_default"
    assert FindingsWarehouseHook.hook_name == "Findings warehouse"
    assert FindingsWarehouseHook().warehouse_conn_id == "findings_warehouse_default"


def test_absent_connection_falls_back_to_a_file_in_airflow_home(tmp_path, monkeypatch):
    home = tmp_path / "airflow-home"
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.delenv(ENV_CONN, raising=False)
    hook = FindingsWarehouseHook()
    assert not home.exists()  # no I/O before first use
    engine = hook.get_engine()
    assert engine.url.database == str(home / "findings_warehouse.db")
    assert hook.get_engine() is engine
    warehouse = hook.get_warehouse()
    assert isinstance(warehouse, Warehouse)
    assert hook.get_warehouse() is warehouse
    assert sqlite_tables(home / "findings_warehouse.db") >= set(metadata.tables)
    engine.dispose()


def test_fallback_home_defaults_to_home_airflow(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(ENV_CONN, raising=False)
    assert FindingsWarehouseHook().get_url().database == str(tmp_path / "airflow" / "findings_warehouse.db")


def test_connection_from_environment_uri(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    database = tmp_path / "named.db"
    monkeypatch.setenv(ENV_CONN, f"sqlite:///{database}")
    hook = FindingsWarehouseHook()
    hook.get_warehouse().set_state("k", {"v": 1})
    hook.get_engine().dispose()
    assert sqlite_tables(database) >= set(metadata.tables)
    assert not (tmp_path / "home" / "findings_warehouse.db").exists()


def test_other_connection_id(tmp_path, monkeypatch):
    database = tmp_path / "other.db"
    monkeypatch.setenv("AIRFLOW_CONN_MY_WAREHOUSE", f"sqlite:///{database}")
    assert FindingsWarehouseHook(warehouse_conn_id="my_warehouse").get_url().database == str(database)


def test_postgres_connection_from_environment_uri(monkeypatch):
    url = make_url(POSTGRES_URL).update_query_dict({"connect_timeout": "3"})
    monkeypatch.setenv(ENV_CONN, url.render_as_string(hide_password=False))
    engine = FindingsWarehouseHook().get_engine()
    assert engine.dialect.name == "postgresql"
    assert engine.dialect.driver == "psycopg2"
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
    except exc.OperationalError as error:
        skip_or_fail(f"PostgreSQL at {POSTGRES_URL} is unreachable: {error.orig}")
    finally:
        engine.dispose()
