"""Fixtures of the sensor tests: an emulator subprocess reached through an ``AIRFLOW_CONN_*`` connection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from task_context import FakeTaskInstance, make_context


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(findings=100) as emu, pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_FINDINGS_API_DEFAULT", emu.connection_json())
        yield emu


@pytest.fixture
def context() -> dict[str, Any]:
    return make_context(FakeTaskInstance(task_id="wait"))
