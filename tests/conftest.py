"""Test-session settings shared by every suite.

Airflow reads ``AIRFLOW_HOME`` when it is first imported, so the session's private home is set here, before any
test module imports Airflow: tests never touch the user's ``~/airflow``. Under pytest-xdist every worker is a
session of its own, with its own home.

Run in parallel (``make test`` passes ``-n``), the tests are handed to the workers a module at a time by
:class:`ModuleScheduling`, the long modules first (:func:`pytest_collection_modifyitems`), so that a module-scoped
fixture (an emulator, a DAG runner, a stack) is set up once and no worker starts a long module when the others are
done. The modules that start Airflow stacks share one worker: run side by side, they starve each other of the
machine's two cores.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

#: Modules that run on one worker, one after the other: the tests that start real Airflow stacks (the e2e stack is a
#: session fixture shared by two of them).
SHARED_WORKER = {
    "tests/compose/test_compose_stack.py": "airflow-stacks",
    "tests/e2e/test_pipeline.py": "airflow-stacks",
    "tests/e2e/test_browser_ui.py": "airflow-stacks",
    "tests/e2e/test_celery.py": "airflow-stacks",
}
#: The markers of the long modules, longest first: their tests are handed out before the rest.
LONG_FIRST = ("compose", "e2e", "chaos", "bench", "install", "integration")

_HOME = Path(os.environ.get("FINDINGS_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="findings-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags"))
os.environ.setdefault("FINDINGS_REPORT_DIR", str(_HOME / "reports"))




@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The session's private AIRFLOW_HOME."""
    return _HOME


def group_of(nodeid: str) -> str:
    """The unit of work that the test ``nodeid`` belongs to: its module, or the group :data:`SHARED_WORKER` names."""
    module = nodeid.split("::", 1)[0]
    return SHARED_WORKER.get(module, module)


def _rank(item: pytest.Item) -> int:
    for rank, marker in enumerate(LONG_FIRST):
        if item.get_closest_marker(marker) is not None:
            return rank
    return len(LONG_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the order in which the modules are handed out
        items.sort(key=_rank)  # stable, so the same on every worker, as xdist requires


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with :func:`group_of` as the scope, in collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return ModuleScheduling(config, log)


#: The e2e stacks' timings the workers reported (``tests/e2e/conftest.py``), printed at the end.
WORKER_E2E_TIMINGS: dict[str, float] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    WORKER_E2E_TIMINGS.update(getattr(node, "workeroutput", {}).get("e2e_timings", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if WORKER_E2E_TIMINGS:
        terminalreporter.write_sep("-", "e2e stack timings")
        for key, seconds in WORKER_E2E_TIMINGS.items():
            terminalreporter.write_line(f"{seconds:7.1f}s  {key}")
