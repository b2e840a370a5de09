"""The helpers behind every suite's fixtures: a warehouse, an emulator, a client of it, the default connections.

Each suite's ``conftest.py`` only chooses sizes and scopes; how a warehouse or an emulator is made is written here
once (``tests/test_one_source.py`` fails when a test module builds a warehouse itself). The emulator subprocess
itself is ``findings_emulator.testing.EmulatorProcess``; the fake task context is ``task_context.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import FindingsClient
from findings_provider.warehouse import Warehouse, make_engine

#: The environment variables of the default connections (``findings_api_default``, ``findings_warehouse_default``).
API_CONNECTION = "AIRFLOW_CONN_FINDINGS_API_DEFAULT"
WAREHOUSE_CONNECTION = "AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT"


def sqlite_url(path: Path | str) -> str:
    """The URL of the SQLite file ``path`` (made absolute)."""
    return f"sqlite:///{Path(path).resolve()}"


def make_warehouse(where: Path | str) -> Warehouse:
    """A warehouse with its tables created: in the SQLite file ``where`` (a path) or at the URL ``where`` (a str)."""
    warehouse = Warehouse(make_engine(sqlite_url(where) if isinstance(where, Path) else where))
    warehouse.create_all()
    return warehouse


def connection_env(*, emulator: EmulatorProcess | None = None, warehouse: Path | None = None,
                   **api_extra: Any) -> dict[str, str]:
    """The ``AIRFLOW_CONN_*`` variables of the default connections: the API one naming ``emulator`` (``api_extra``
    as in ``EmulatorProcess.connection_json``), the warehouse one naming the SQLite file ``warehouse``."""
    env = {}
    if emulator is not None:
        env[API_CONNECTION] = emulator.connection_json(**api_extra)
    if warehouse is not None:
        env[WAREHOUSE_CONNECTION] = sqlite_url(warehouse)
    return env


def connect(monkeypatch: pytest.MonkeyPatch, *, emulator: EmulatorProcess | None = None,
            warehouse: Path | None = None, **api_extra: Any) -> None:
    """Set the default connections of :func:`connection_env` until ``monkeypatch`` is undone."""
    for name, value in connection_env(emulator=emulator, warehouse=warehouse, **api_extra).items():
        monkeypatch.setenv(name, value)


@contextmanager
def running_emulator(*, default_connection: bool = False, **options: Any) -> Iterator[EmulatorProcess]:
    """An emulator subprocess (``options`` as ``EmulatorProcess``'s: ``findings``, ``dialect``, ``extra_args``...),
    stopped afterwards; with ``default_connection`` the default API connection names it while it runs."""
    with EmulatorProcess(**options) as emu, pytest.MonkeyPatch.context() as mp:
        if default_connection:
            connect(mp, emulator=emu)
        yield emu


def client_of(emulator: EmulatorProcess, **options: Any) -> FindingsClient:
    """A client of the running ``emulator`` (its URL, token and deployment); ``options`` as ``FindingsClient``'s
    (``retry_policy``, ``timeout``...). The caller closes it."""
    return FindingsClient(emulator.base_url, emulator.token, deployment_id=emulator.deployment_id,
                          deployment_slug=emulator.deployment_slug, **options)


# --- the emulator's request log -----------------------------------------------------------------------------------

def ops(emulator: EmulatorProcess, seq: int, operation: str) -> list[dict[str, Any]]:
    """The emulator's logged requests of ``operation`` after sequence number ``seq``."""
    return [r for r in emulator.requests(seq) if r["operation"] == operation]


def seq_of(emulator: EmulatorProcess) -> int:
    """The sequence number of the emulator's last logged request (0 when none)."""
    log = emulator.requests()
    return log[-1]["seq"] if log else 0


def writes(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The logged API requests that could change something."""
    return [r for r in requests if r["method"] in ("PUT", "PATCH", "DELETE") or r["operation"] in ("triage", "tickets")]
