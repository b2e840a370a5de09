"""Fixtures of the end-to-end suites: real Airflow stacks started ONCE per session by ``devtools/stack.py``.

* ``e2e_stack``: LocalExecutor on SQLite (metadata and warehouse) with the emulator; shared by the e2e tests and
  the browser test (which lives here, marked ``browser``, so that it reuses this stack: pytest only honours
  ``pytest_plugins`` in the root conftest, and a fixture imported into two conftest files would start two stacks).
* ``celery_stack`` (in ``test_celery.py``): CeleryExecutor, PostgreSQL, Redis, two workers.

When a test fails, the logs of every stack that is up (component logs and task logs) are copied to
``test-artifacts/<test>/``; a stack that fails to start leaves its logs in ``test-artifacts/<stack>-startup/``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from parallel import send_summary  # noqa: E402
from smtp_inbox import Mailbox  # noqa: E402

from devtools.environment import EmulatorOptions  # noqa: E402
from devtools.stack import Stack  # noqa: E402

from .browser import logged_in_page  # noqa: E402
from .helpers import (  # noqa: E402
    ACTIVE_STACKS,
    ALERTS_TO,
    E2E_EMULATOR_ARGS,
    SCAN_MONITORING_DEADLINE_MINUTES,
    TIMINGS,
    PipelineResult,
    artifact_dir,
    run_pipeline,
    start_stack,
    stop_stack,
    write_test_pipeline_config,
)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and report.when in ("setup", "call") and ACTIVE_STACKS:
        dest = artifact_dir(item.nodeid)
        for name, stack in ACTIVE_STACKS:
            stack.collect_artifacts(dest / name)
        report.sections.append(("e2e artifacts", f"logs of {len(ACTIVE_STACKS)} stack(s) copied to {dest}"))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    send_summary(session.config, "e2e stack timings", TIMINGS)


@pytest.fixture(scope="session")
def e2e_home() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="findings-e2e-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="session")
def inbox() -> Iterator[Mailbox]:
    """A real SMTP server the SQLite stack's alerts go to (``AIRFLOW_CONN_SMTP_DEFAULT``)."""
    with Mailbox() as box:
        yield box


@pytest.fixture(scope="session")
def e2e_stack(e2e_home: Path, inbox: Mailbox) -> Iterator[Stack]:
    """LocalExecutor + SQLite + emulator, on free ports, in a temporary AIRFLOW_HOME; stopped at session end.
    Alerts are mailed to ``inbox``."""
    home = e2e_home / "airflow"
    stack = Stack(
        home,
        pipeline_config=write_test_pipeline_config(
            e2e_home, alerts={"channels": [{"type": "smtp", "conn_id": "smtp_default", "to": [ALERTS_TO]}],
                              "deadlines": {"scan_monitoring": SCAN_MONITORING_DEADLINE_MINUTES}}),
        extra_env={"AIRFLOW_CONN_SMTP_DEFAULT": inbox.connection_json()},
        emulator=EmulatorOptions(token="e2e-token", findings=5000, extra_args=E2E_EMULATOR_ARGS),
        fast=True,
        progress=lambda msg: print(f"[e2e stack] {msg}", flush=True),
    )
    start_stack("sqlite", stack)
    try:
        yield stack
    finally:
        stop_stack("sqlite", stack)


@pytest.fixture(scope="session")
def pipeline(e2e_stack: Stack) -> PipelineResult:
    """The seven DAGs triggered through the REST API, once per session; every test asserts on the outcome."""
    result = run_pipeline(e2e_stack)
    TIMINGS["sqlite pipeline (all seven DAGs + Asset chain)"] = result.seconds
    print(result.summary(), flush=True)
    return result


@pytest.fixture(scope="module")
def browser_page(e2e_stack: Stack) -> Iterator[Any]:
    """Headless Chromium logged in to the e2e stack's UI (``browser.py``), one per browser test module."""
    with logged_in_page(e2e_stack) as page:
        yield page
