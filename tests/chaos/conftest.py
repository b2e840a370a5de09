"""Fixtures of the chaos suites: emulators with few findings, and the tally of what was tried."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from findings_emulator.testing import EmulatorProcess
from parallel import send_summary

from chaos.harness import settle, start_emulator, tally_snapshot, write_tally


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    """One emulator per module: 300 findings (210 code, 90 supply chain), several pages of 100."""
    with start_emulator(findings=300) as emu:
        yield emu


@pytest.fixture
def fresh(emulator: EmulatorProcess) -> Iterator[EmulatorProcess]:
    """The module's emulator with its data regenerated, request log and faults cleared; afterwards, requests
    it is still delaying are waited for (so they cannot land in the next test's request log)."""
    emulator.reset()
    yield emulator
    settle(emulator)


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_tally()
    send_summary(session.config, "reliability tally (docs/reliability.md)", tally_snapshot())
