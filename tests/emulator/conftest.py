"""Fixtures of the emulator's contract tests: one emulator subprocess per test module, reached over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import DIALECTS, FINDINGS, NO_WEB_API_TOKEN


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: 3000 findings and a token lacking Web API access."""
    return {"findings": FINDINGS, "extra_args": ("--no-web-api-token", NO_WEB_API_TOKEN)}


@pytest.fixture(scope="module")
def api(emulator: EmulatorProcess) -> Iterator[httpx.Client]:
    """An httpx client for the API, token set."""
    with emulator.client(timeout=30.0) as client:
        yield client


@pytest.fixture(params=DIALECTS)
def each_dialect(request: pytest.FixtureRequest, emulator: EmulatorProcess) -> Iterator[EmulatorProcess]:
    """The module's emulator regenerated in each dialect in turn (the same data), back in the reference
    dialect afterwards."""
    emulator.reset(dialect=request.param)
    emulator.dialect = request.param
    try:
        yield emulator
    finally:
        emulator.reset(dialect="reference")
        emulator.dialect = "reference"
