"""Fixtures of the governance tests: a real SQLite warehouse per test, a real emulator subprocess per module (reset
before each test).

Operators run with their connections given as ``AIRFLOW_CONN_*`` environment variables, like in production.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from findings_provider.warehouse import Warehouse
from fixtures import connect


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: seed 42, 200 findings (12 projects, 2 policies, 300
    dependencies)."""
    return {"findings": 200}


@pytest.fixture(autouse=True)
def _fresh_emulator(request: pytest.FixtureRequest) -> None:
    """A governance test that uses the emulator gets it with freshly generated data, no faults, and an empty
    request log."""
    if "emulator" in request.fixturenames:
        request.getfixturevalue("emulator").reset(retired_policies=False)  # overrides of a reset stay until changed


@pytest.fixture
def connections(emulator: Any, warehouse: Warehouse, warehouse_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default API and warehouse connections, as ``AIRFLOW_CONN_*`` variables naming the emulator and
    the test's warehouse file."""
    connect(monkeypatch, emulator=emulator, warehouse=warehouse_path)

