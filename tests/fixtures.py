"""The helpers behind every suite's fixtures: a warehouse, an emulator, a client of it, the default connections;
and the shared fixtures themselves (``emulator``, ``fresh``), which ``tests/conftest.py`` re-exports to every suite.

Each suite's ``conftest.py`` only chooses sizes and scopes (by overriding ``emulator_options``); how a warehouse or
an emulator is made is written here once (``tests/test_one_source.py`` fails when a test module builds a warehouse
itself or defines a shared fixture a second time). The emulator subprocess itself is
``findings_emulator.testing.EmulatorProcess``; the fake task context is ``task_context.py``.
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


# --- the shared fixtures (re-exported by tests/conftest.py) ------------------------------------------------------


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """Which emulator a module's ``emulator`` is: :func:`running_emulator`'s options (``findings``, ``dialect``,
    ``extra_args``, ``default_connection``...). The one fixture a suite's ``conftest.py`` (or a module) overrides to
    choose its emulator; this default is a small one."""
    return {"findings": 300}


@pytest.fixture(scope="module")
def emulator(request: pytest.FixtureRequest, emulator_options: dict[str, Any]) -> Iterator[EmulatorProcess]:
    """One emulator subprocess per module, started with ``emulator_options``, stopped after the module.

    A test parametrizes it indirectly for variants: ``@pytest.mark.parametrize("emulator", [{"dialect": "real"}],
    indirect=True)`` adds those options (with ``scope="function"``, a new emulator for each test)."""
    with running_emulator(**{**emulator_options, **getattr(request, "param", {})}) as emu:
        yield emu


@pytest.fixture
def fresh(emulator: EmulatorProcess) -> EmulatorProcess:
    """The module's emulator with its data regenerated, its request log and faults cleared (for tests that change
    the service's data or count its requests)."""
    emulator.reset()
    return emulator


@pytest.fixture
def client(emulator: EmulatorProcess) -> Iterator[FindingsClient]:
    """A client of the module's emulator: how a test reads the service, or acts in it as a person would."""
    with client_of(emulator) as api:
        yield api


@pytest.fixture
def warehouse_path(tmp_path: Path) -> Path:
    """Where a test's SQLite warehouse is: a fresh file of its own."""
    return tmp_path / "warehouse.db"


@pytest.fixture
def warehouse(warehouse_path: Path) -> Iterator[Warehouse]:
    """An empty warehouse in the SQLite file ``warehouse_path``, its tables created. Suites whose tests need another
    kind override it in their ``conftest.py`` (``SHARED_VARIANTS`` of ``tests/test_one_source.py`` says which and
    why)."""
    store = make_warehouse(warehouse_path)
    yield store
    store.engine.dispose()


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


# --- the service against the warehouse ----------------------------------------------------------------------------

#: The columns of a finding a person changes in the service's UI.
WATCHED = ("status", "triage_state", "triage_reason", "external_ticket_id")


def service_state(client: FindingsClient, issue_type: str) -> dict[int, tuple[Any, ...]]:
    """The service's :data:`WATCHED` columns of every finding of ``issue_type``, as the warehouse holds them."""
    from findings_provider.pipeline.ticket_outcomes import ticket_of

    out = {}
    if issue_type == "secrets":
        findings = client.items(client.list_secrets)
    else:
        findings = client.items(client.list_findings, issue_type, page_size=3000)
    for f in findings:
        ticket = ticket_of(f)
        out[f.id] = (f.status, f.triage_state, f.triage_reason, None if ticket is None else int(ticket["id"]))
    return out


def warehouse_state(warehouse: Warehouse, issue_type: str, ids: set[int] | None = None) -> dict[int, tuple[Any, ...]]:
    """The warehouse's :data:`WATCHED` columns of the findings ``ids`` of ``issue_type`` (None: all of them)."""
    from findings_provider.warehouse.schema import findings
    from sqlalchemy import select

    stmt = select(findings.c.id, *(findings.c[c] for c in WATCHED)).where(findings.c.issue_type == issue_type)
    if ids is not None:
        stmt = stmt.where(findings.c.id.in_(sorted(ids)))
    with warehouse.engine.connect() as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(stmt)}


def acting_in_the_window(monkeypatch: pytest.MonkeyPatch, client: FindingsClient, method: str,
                         emulator: EmulatorProcess, acts: list[dict[str, Any]]) -> list[int]:
    """Make ``client.<method>`` (``bulk_triage``, ``create_tickets``) first let a person act on findings of the
    request, through the emulator's admin route (one act each, in order, until ``acts`` are used up), then send it:
    the person acts after our re-read, before our request reaches the service. Returns the ids acted on (a list
    that grows as requests go out)."""
    real = getattr(client, method)
    acted: list[int] = []

    def write(request: Any = None, /, **fields: Any) -> Any:
        ids = [int(i) for i in (request.issue_ids if request is not None else fields["issue_ids"])]
        for finding_id, act in zip([i for i in ids if i not in acted], acts[len(acted):], strict=False):
            emulator.person_acts(finding_id, **act)
            acted.append(finding_id)
        return real(request, **fields) if request is not None else real(**fields)

    monkeypatch.setattr(client, method, write)
    return acted
