"""Fixtures of the operator tests: an emulator and a warehouse reached through ``AIRFLOW_CONN_*`` connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from findings_provider.warehouse import Warehouse
from fixtures import connect, make_warehouse
from task_context import make_context


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: one per module with 400 findings, named by the default
    API connection."""
    return {"findings": 400, "default_connection": True}


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """A warehouse file named by the default warehouse connection."""
    path = tmp_path / "wh.db"
    connect(monkeypatch, warehouse=path)
    monkeypatch.setenv("FINDINGS_REPORT_DIR", str(tmp_path / "reports"))
    return make_warehouse(path)


@pytest.fixture
def context() -> dict[str, Any]:
    return make_context()

