"""Test-session settings shared by every suite.

Airflow reads ``AIRFLOW_HOME`` when it is first imported, so the session's private home is set here, before any
test module imports Airflow: tests never touch the user's ``~/airflow``. Under pytest-xdist every worker is a
session of its own, with its own home.

Run in parallel (``make test`` passes ``-n``), the tests are placed on the workers as ``parallel.py`` says; the
hooks below wire it in and print the summary sections the suites send (from the workers, or in-process).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import parallel
import pytest

_HOME = Path(os.environ.get("FINDINGS_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="findings-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags"))
os.environ.setdefault("FINDINGS_REPORT_DIR", str(_HOME / "reports"))

# imported once AIRFLOW_HOME is set (they import the provider)
from fixtures import client, emulator, emulator_options, fresh, warehouse, warehouse_path  # noqa: E402

#: The fixtures every suite shares, defined once in ``fixtures.py`` (a suite chooses its emulator by overriding
#: ``emulator_options``; ``tests/test_one_source.py`` fails on a second definition of the others).
SHARED_FIXTURES = (client, emulator, emulator_options, fresh, warehouse, warehouse_path)


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The session's private AIRFLOW_HOME."""
    return _HOME


#: The PostgreSQL database the tests use; a uniquely named schema is created in it and dropped afterwards.
POSTGRES_URL = os.environ.get("WAREHOUSE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def postgres_schema_url() -> Iterator[str]:
    """URL of a scratch schema (first on the search path) in the test PostgreSQL, dropped afterwards."""
    from findings_provider.warehouse import make_engine
    from sqlalchemy import exc
    from sqlalchemy.engine import make_url

    from devtools.services import skip_or_fail

    url = make_url(POSTGRES_URL)
    admin = make_engine(url.update_query_dict({"connect_timeout": "3"}))
    schema = f"warehouse_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except exc.OperationalError as error:
        admin.dispose()
        skip_or_fail(f"PostgreSQL at {POSTGRES_URL} is unreachable: {error.orig}")
    try:
        yield url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the order in which the modules are handed out
        items.sort(key=parallel.rank)  # stable, so the same on every worker, as xdist requires


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return parallel.make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    parallel.add_summaries(parallel.SUMMARIES, getattr(node, "workeroutput", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The summary sections the suites sent (``parallel.send_summary``: the e2e timings, the reliability tally)."""
    for title, values in parallel.SUMMARIES.items():
        terminalreporter.write_sep("-", title)
        for line in parallel.summary_lines(values):
            terminalreporter.write_line(line)
