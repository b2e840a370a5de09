"""Fixtures of the warehouse tests: a real SQLite file per test and a scratch schema in a real PostgreSQL
(``postgres_schema_url``, in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from findings_provider.warehouse import Warehouse, make_engine
from fixtures import sqlite_url
from sqlalchemy.engine import Engine

from devtools.warehouse import drop_every_table


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
