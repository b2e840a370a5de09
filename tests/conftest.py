"""Test-session settings shared by every suite.

Airflow reads ``AIRFLOW_HOME`` when it is first imported, so the session's private home is set here, before any
test module imports Airflow: tests never touch the user's ``~/airflow``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_HOME = Path(os.environ.get("FINDINGS_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="findings-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags"))
os.environ.setdefault("FINDINGS_REPORT_DIR", str(_HOME / "reports"))




@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The session's private AIRFLOW_HOME."""
    return _HOME
