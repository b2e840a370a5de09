"""Fixtures of the sensor tests: an emulator subprocess reached through an ``AIRFLOW_CONN_*`` connection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess


class FakeTaskInstance:
    """Just enough of a task instance for ``execute``: records XCom pushes."""

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}
        self.task_id = "wait"
        self.dag_id = "test"
        self.run_id = "manual__1"
        self.map_index = -1

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(findings=100) as emu, pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_FINDINGS_API_DEFAULT", emu.connection_json())
        yield emu


@pytest.fixture
def context() -> dict[str, Any]:
    ti = FakeTaskInstance()
    return {"ti": ti, "task_instance": ti, "run_id": ti.run_id}
