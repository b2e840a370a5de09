"""Fixtures of the sensor tests: an emulator subprocess reached through an ``AIRFLOW_CONN_*`` connection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from fixtures import running_emulator
from task_context import FakeTaskInstance, make_context


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    """One emulator per module with 100 findings, named by the default API connection."""
    with running_emulator(findings=100, default_connection=True) as emu:
        yield emu


@pytest.fixture
def context() -> dict[str, Any]:
    return make_context(FakeTaskInstance(task_id="wait"))
