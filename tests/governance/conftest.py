"""Fixtures of the governance tests: a real SQLite warehouse per test, a real emulator subprocess per session.

Operators run with their connections given as ``AIRFLOW_CONN_*`` environment variables, like in production.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from findings_provider.client import FindingsClient
from findings_provider.warehouse import Warehouse
from fixtures import client_of, connect, make_warehouse, running_emulator


@pytest.fixture
def warehouse_path(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.db"


@pytest.fixture
def warehouse(warehouse_path: Path) -> Iterator[Warehouse]:
    """An empty warehouse in a SQLite file, tables created."""
    wh = make_warehouse(warehouse_path)
    yield wh
    wh.engine.dispose()


@pytest.fixture(scope="session")
def emulator_process() -> Iterator[Any]:
    """One emulator subprocess for the governance tests (seed 42: 12 projects, 2 policies, 300 dependencies)."""
    with running_emulator(findings=200) as emu:
        yield emu


@pytest.fixture
def emulator(emulator_process: Any) -> Any:
    """The emulator with freshly generated data, no faults, and an empty request log."""
    emulator_process.reset(retired_policies=False)  # overrides of a reset stay until changed
    return emulator_process


@pytest.fixture
def client(emulator: Any) -> Iterator[FindingsClient]:
    with client_of(emulator) as api:
        yield api


@pytest.fixture
def connections(emulator: Any, warehouse: Warehouse, warehouse_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default API and warehouse connections, as ``AIRFLOW_CONN_*`` variables naming the emulator and
    the test's warehouse file."""
    connect(monkeypatch, emulator=emulator, warehouse=warehouse_path)

