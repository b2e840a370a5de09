"""Fixtures of the chaos suites: emulators with few findings, and the tally of what was tried.

The emulator is the shared one (``emulator`` and ``fresh`` of ``tests/fixtures.py``) with the chaos options
(``harness.emulator_settings``): the faults are injected per test through its admin routes, so no starter of its
own is needed. What the chaos suites add is :func:`_settle`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from parallel import send_summary

from chaos.harness import emulator_settings, settle, tally_snapshot, write_tally


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """One emulator per module: 300 findings (210 code, 90 supply chain), several pages of 100."""
    return emulator_settings(findings=300)


@pytest.fixture(autouse=True)
def _settle(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test of the module's ``fresh`` emulator, the requests it is still delaying are waited for (so they
    cannot land in the next test's request log)."""
    yield
    if "fresh" in request.fixturenames:  # fresh is torn down by now; the module's emulator it reset is not
        settle(request.getfixturevalue("emulator"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_tally()
    send_summary(session.config, "reliability tally (docs/reliability.md)", tally_snapshot())
