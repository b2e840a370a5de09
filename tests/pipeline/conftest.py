"""Fixtures of the pipeline tests: a real SQLite warehouse, a fake API behind ``httpx.MockTransport``, and a
real emulator subprocess for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.warehouse import Warehouse
from fixtures import client_of, make_warehouse, running_emulator

from .fakes import FakeApi


@pytest.fixture
def warehouse(tmp_path: Path) -> Warehouse:
    """An empty warehouse in a temporary SQLite file."""
    return make_warehouse(tmp_path / "warehouse.db")


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


# --- a real emulator (integration tests) --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    """An emulator subprocess with 600 findings, 60 of them AI-detected, so that it serves every issue type
    (module-scoped; tests that change data reset it)."""
    with running_emulator(findings=600, extra_args=("--ai-findings", "60")) as emu:
        yield emu


@pytest.fixture
def fresh_emulator(emulator: EmulatorProcess) -> EmulatorProcess:
    """The module's emulator with regenerated data, an empty request log and no faults."""
    emulator.reset()
    return emulator


@pytest.fixture
def emulator_client(fresh_emulator: EmulatorProcess) -> Iterator[FindingsClient]:
    with client_of(fresh_emulator, retry_policy=RetryPolicy(max_retries=1, backoff_base=0.05)) as client:
        yield client
