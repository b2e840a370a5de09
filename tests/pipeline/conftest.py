"""Fixtures of the pipeline tests: a real SQLite warehouse, a fake API behind ``httpx.MockTransport``, and a
real emulator subprocess for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import FindingsClient, RetryPolicy
from fixtures import client_of

from .fakes import FakeApi


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


# --- a real emulator (integration tests) --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: 600 findings, 60 of them AI-detected, so that it serves
    every issue type (module-scoped; tests that change data use ``fresh``)."""
    return {"findings": 600, "extra_args": ("--ai-findings", "60")}


@pytest.fixture
def emulator_client(fresh: EmulatorProcess) -> Iterator[FindingsClient]:
    with client_of(fresh, retry_policy=RetryPolicy(max_retries=1, backoff_base=0.05)) as client:
        yield client
