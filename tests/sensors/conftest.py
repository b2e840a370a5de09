"""Fixtures of the sensor tests: an emulator subprocess reached through an ``AIRFLOW_CONN_*`` connection."""

from __future__ import annotations

from typing import Any

import pytest
from task_context import FakeTaskInstance, make_context


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: one per module with 100 findings, named by the default
    API connection."""
    return {"findings": 100, "default_connection": True}


@pytest.fixture
def context() -> dict[str, Any]:
    return make_context(FakeTaskInstance(task_id="wait"))
