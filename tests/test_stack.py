"""The launcher of the demo's and the e2e tests' Airflow (``devtools/stack.py``), without starting it: how long
each component waits for a SQLite metadata database's write lock."""

from __future__ import annotations

from devtools import stack


def test_a_sqlite_stacks_api_server_waits_less_for_the_write_lock_than_the_other_components(tmp_path) -> None:
    sqlite_stack = stack.Stack(tmp_path / "sqlite")
    assert sqlite_stack.metadata_db_url.endswith(f"?timeout={stack.SQLITE_BUSY_TIMEOUT}")
    assert sqlite_stack.api_server_db_url == sqlite_stack.metadata_db_url.replace(
        f"?timeout={stack.SQLITE_BUSY_TIMEOUT}", f"?timeout={stack.API_SERVER_SQLITE_BUSY_TIMEOUT}")
    assert stack.API_SERVER_SQLITE_BUSY_TIMEOUT < stack.SQLITE_BUSY_TIMEOUT
    given = "postgresql+psycopg2://postgres@127.0.0.1:5432/airflow_meta"
    assert stack.Stack(tmp_path / "pg", metadata_db_url=given).api_server_db_url == given
