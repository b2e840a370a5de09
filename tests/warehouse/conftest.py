"""Fixtures of the warehouse tests: a real SQLite file per test and a scratch schema in a real PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from findings_provider.warehouse import Warehouse, make_engine
from fixtures import sqlite_url
from sqlalchemy import exc
from sqlalchemy.engine import Engine, make_url

from devtools.services import skip_or_fail
from devtools.warehouse import drop_every_table

#: The PostgreSQL database the tests use; a uniquely named schema is created in it and dropped afterwards.
POSTGRES_URL = os.environ.get("WAREHOUSE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")



@pytest.fixture(scope="session")
def postgres_schema_url() -> Iterator[str]:
    """URL of a scratch schema (first on the search path) in the test PostgreSQL, dropped afterwards."""
    url = make_url(POSTGRES_URL)
    admin = make_engine(url.update_query_dict({"connect_timeout": "3"}))
    schema = f"warehouse_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except exc.OperationalError as error:
        admin.dispose()
        skip_or_fail(f"PostgreSQL at {POSTGRES_URL} is unreachable: {error.orig}")
    try:
        yield url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def sqlite_engine(tmp_path) -> Iterator[Engine]:
    """An engine on a fresh SQLite file."""
    engine = make_engine(sqlite_url(tmp_path / "warehouse.db"))
    yield engine
    engine.dispose()


@pytest.fixture
def postgresql_engine(postgres_schema_url: str) -> Iterator[Engine]:
    """An engine on the scratch PostgreSQL schema, emptied of every table after the test (the warehouse's, its
    version table and any a test made)."""
    engine = make_engine(postgres_schema_url)
    yield engine
    drop_every_table(engine)
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request) -> Engine:
    """Each test using it runs once on SQLite and once on PostgreSQL, on an empty database."""
    return request.getfixturevalue(f"{request.param}_engine")


@pytest.fixture
def warehouse(engine: Engine) -> Warehouse:
    """A Warehouse with its tables created."""
    store = Warehouse(engine)
    store.create_all()
    return store
