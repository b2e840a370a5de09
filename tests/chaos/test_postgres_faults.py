"""A PostgreSQL warehouse under faults: a terminated session mid-page, a lost commit acknowledgement, and server
restarts during extraction and during triage recording.

The run itself must come out exact: every finding once and equal to a fault-free pull, every triage request
logged once. The terminated session and the lost acknowledgement use the machine's PostgreSQL (a throwaway
database); restarts use a private cluster (``initdb`` in a temporary directory, on a free port, run as the
``postgres`` OS user when the tests run as root), restarted and stopped through its own ``pg_ctl``: the shared
server is never restarted.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extensions
import pytest
from findings_emulator.testing import EmulatorProcess, free_port
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.pipeline import extraction
from findings_provider.warehouse import Warehouse, make_engine, upsert
from findings_provider.warehouse.schema import findings, metadata, triage_actions
from findings_provider.warehouse.versioning import VERSION_TABLE
from present import present
from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine

from chaos.harness import PAGE_SIZE, TOKEN, ground_truth, tally
from devtools.services import find_postgres, skip_or_fail

pytestmark = pytest.mark.chaos


# --- PostgreSQL servers ---------------------------------------------------------------------------------------------


@pytest.fixture
def shared_postgres_url() -> Iterator[str]:
    """A throwaway database on the machine's PostgreSQL."""
    server, reason = find_postgres()
    if server is None:
        skip_or_fail(reason)
    with server.temporary_database("findings_pg_faults") as name:
        yield server.url(name)


@dataclass
class PrivateCluster:
    """A PostgreSQL cluster of this test module alone, driven by its own ``pg_ctl``."""

    bin_dir: Path
    data: Path
    port: int
    as_owner: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str, wait: bool = True) -> subprocess.Popen[bytes]:
        command = [*self.as_owner, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if wait:
            _, error = process.communicate(timeout=60)
            if process.returncode != 0:
                raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {error.decode(errors='replace')}")
        return process

    def answers(self) -> bool:
        try:
            psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             connect_timeout=2).close()
        except psycopg2.OperationalError:
            return False
        return True

    def restart(self) -> subprocess.Popen[bytes]:
        """Start a fast restart (sessions are terminated), return once the server stopped answering."""
        process = self.pg_ctl("restart", "-m", "fast", "-w", "-t", "60", wait=False)
        deadline = time.monotonic() + 30
        while self.answers():
            if time.monotonic() > deadline:
                raise TimeoutError("the private PostgreSQL did not go down for its restart")
            time.sleep(0.02)
        tally("postgres_restart")
        return process


def _postgres_bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivateCluster]:
    bin_dir = _postgres_bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        skip_or_fail("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    as_owner: list[str] = []
    owner = None
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            skip_or_fail("running as root and there is no 'postgres' OS user to run initdb as")
        as_owner = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="findings-pg-cluster-"))
    cluster = PrivateCluster(bin_dir, root / "data", free_port(), as_owner)
    try:
        if owner is not None:
            os.chown(root, owner.pw_uid, owner.pw_gid)
        subprocess.run([*as_owner, str(bin_dir / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U",
                        "postgres", "--no-sync"], check=True, capture_output=True)
        options = f"-p {cluster.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        cluster.pg_ctl("start", "-w", "-t", "60", "-l", str(root / "server.log"), "-o", options)
        yield cluster
    finally:
        if (cluster.data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                cluster.pg_ctl("stop", "-m", "immediate", "-w")
        shutil.rmtree(root, ignore_errors=True)


# --- helpers ------------------------------------------------------------------------------------------------------


def client_of(emu: EmulatorProcess) -> FindingsClient:
    return FindingsClient(emu.base_url, TOKEN, deployment_id=emu.deployment_id, deployment_slug=emu.deployment_slug,
                          retry_policy=RetryPolicy(max_retries=0, rng=random.Random(0)))


def snapshot(engine: Engine) -> dict[tuple[str, int], tuple[Any, ...]]:
    """Every findings row but its ``synced_at``, by key."""
    columns = [c for c in findings.c if c.name != "synced_at"]
    with engine.connect() as conn:
        return {(r.issue_type, r.id): tuple(r) for r in conn.execute(select(*columns))}


def pull(emu: EmulatorProcess, warehouse: Warehouse) -> dict[str, Any]:
    with client_of(emu) as client:
        return extraction.run_extraction(client, warehouse, ["sast", "sca"], page_size=PAGE_SIZE)


def fault_free_pull(emu: EmulatorProcess, url: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    """What a pull without faults stores (then the tables are dropped again)."""
    engine = make_engine(url)
    try:
        warehouse = Warehouse(engine)
        warehouse.create_all()
        pull(emu, warehouse)
        rows = snapshot(engine)
        metadata.drop_all(engine)
        with engine.begin() as conn:  # and the version, so that the next create_all starts from nothing
            conn.exec_driver_sql(f"DROP TABLE {VERSION_TABLE}")
    finally:
        engine.dispose()
    return rows


@contextlib.contextmanager
def on_second_page_write(monkeypatch: pytest.MonkeyPatch, fault: Callable[[], None]) -> Iterator[list[int]]:
    """Inject ``fault`` into the second page's upsert, inside its transaction (after the lookup, before its COPY;
    only once: not into the repeated attempt); yields the list of pages it fired on."""
    fired: list[int] = []
    calls = {"n": 0}
    real = upsert._CopyStream

    def copy_stream(rows: Any, *text: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            fault()
            fired.append(calls["n"])
        return real(rows, *text)

    monkeypatch.setattr(upsert, "_CopyStream", copy_stream)
    yield fired


def assert_exact(emu: EmulatorProcess, engine: Engine, expected: dict[tuple[str, int], tuple[Any, ...]]) -> None:
    stored = snapshot(engine)
    assert set(stored) == set(ground_truth(emu))  # every finding, once (the primary key forbids twice)
    assert stored == expected  # and each equal to what a pull without faults stores


# --- a terminated session and a lost acknowledgement (the machine's PostgreSQL) ---------------------------------


def terminate_other_sessions(url: str) -> Callable[[], None]:
    """A fault: ``pg_terminate_backend`` of every other session of ``url``'s database, from a second connection."""

    def fault() -> None:
        with contextlib.closing(psycopg2.connect(url)) as admin:
            admin.autocommit = True
            with admin.cursor() as cur:
                cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                assert present(cur.fetchone())[0] >= 1
        tally("postgres_session_terminated")

    return fault


@pytest.mark.parametrize("when", ["during_copy", "at_commit"])
def test_a_session_terminated_mid_page_is_repeated_and_the_pull_is_exact(
    fresh: EmulatorProcess, shared_postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog, when: str
) -> None:
    expected = fault_free_pull(fresh, shared_postgres_url)
    engine = make_engine(shared_postgres_url)
    warehouse = Warehouse(engine)
    warehouse.create_all()
    fault = terminate_other_sessions(shared_postgres_url)
    at_commit: list[bool] = []
    fired: list[str] = []

    @event.listens_for(engine, "commit")
    def before_commit(conn: Any) -> None:
        if at_commit and at_commit.pop():
            fault()
            fired.append("at_commit")

    try:
        inject = fault if when == "during_copy" else lambda: at_commit.append(True)  # the page's commit, then
        with on_second_page_write(monkeypatch, inject) as copied:
            result = pull(fresh, warehouse)
        assert copied, "the second page was not written"
        assert fired or when == "during_copy", "the fault was not injected at the commit"
        assert "the warehouse connection was lost" in caplog.text
        assert result["findings"] == len(expected)
        assert_exact(fresh, engine, expected)
    finally:
        engine.dispose()


class _CommitAcknowledgementLost(psycopg2.extensions.connection):
    """A connection whose next commit succeeds in the server but whose answer is lost (the connection drops)."""

    armed = False

    def commit(self) -> None:
        super().commit()
        if _CommitAcknowledgementLost.armed:
            _CommitAcknowledgementLost.armed = False
            self.close()
            raise psycopg2.OperationalError("server closed the connection unexpectedly")


def test_a_triage_request_whose_commit_answer_is_lost_is_logged_once(shared_postgres_url: str) -> None:
    engine = create_engine(shared_postgres_url.replace("postgresql://", "postgresql+psycopg2://"),
                           pool_pre_ping=True, connect_args={"connection_factory": _CommitAcknowledgementLost})
    warehouse = Warehouse(engine)
    warehouse.create_all()
    try:
        _CommitAcknowledgementLost.armed = True
        action_id = warehouse.record_triage_action(
            run_id="r1", dag_id="d", issue_type="sast", dry_run=False, issue_ids=[1, 2], request={"n": 1}
        )
        assert not _CommitAcknowledgementLost.armed, "the fault was not injected"
        with engine.connect() as conn:
            rows = conn.execute(select(triage_actions.c.id, triage_actions.c.issue_ids)).all()
        assert [tuple(r) for r in rows] == [(action_id, [1, 2])]
    finally:
        _CommitAcknowledgementLost.armed = False
        engine.dispose()


# --- server restarts (a private cluster) --------------------------------------------------------------------------


@pytest.fixture
def private_database(private_postgres: PrivateCluster) -> Iterator[str]:
    """A fresh database in the private cluster."""
    name = f"faults_{random.randrange(16**8):08x}"
    with contextlib.closing(psycopg2.connect(private_postgres.url)) as admin:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
    yield private_postgres.url.rsplit("/", 1)[0] + f"/{name}"
    with contextlib.closing(psycopg2.connect(private_postgres.url)) as admin:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_server_restart_during_extraction_leaves_the_pull_exact(
    fresh: EmulatorProcess, private_postgres: PrivateCluster, private_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = fault_free_pull(fresh, private_database)
    engine = make_engine(private_database)
    warehouse = Warehouse(engine)
    warehouse.create_all()
    restarts: list[subprocess.Popen[bytes]] = []
    try:
        with on_second_page_write(monkeypatch, lambda: restarts.append(private_postgres.restart())) as fired:
            result = pull(fresh, warehouse)
        assert fired, "the server was not restarted"
        assert restarts[0].wait(timeout=60) == 0
        assert result["findings"] == len(expected)
        assert_exact(fresh, engine, expected)
        assert warehouse.get_state(extraction.watermark_key("sast")) is not None
    finally:
        engine.dispose()


def test_triage_requests_are_logged_exactly_once_across_server_restarts(
    private_postgres: PrivateCluster, private_database: str
) -> None:
    engine = make_engine(private_database)
    warehouse = Warehouse(engine)
    warehouse.create_all()

    def record(n: int) -> int:
        return warehouse.record_triage_action(
            run_id="run", dag_id="autotriage_triage", issue_type="sast", dry_run=False, issue_ids=[n, n + 1],
            request={"issue_ids": [n, n + 1], "new_triage_state": "ignored"},
        )

    try:
        ids = [record(1)]
        restarts = [private_postgres.restart()]  # the server is down: the next request waits for it
        ids.append(record(3))

        # a restart while the insert is in flight, inside its transaction
        armed = {"on": True}

        @event.listens_for(engine, "before_cursor_execute")
        def restart_mid_insert(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if armed["on"] and statement.startswith("INSERT INTO triage_actions"):
                armed["on"] = False
                restarts.append(private_postgres.restart())

        ids.append(record(5))
        assert not armed["on"], "the server was not restarted mid-insert"
        event.remove(engine, "before_cursor_execute", restart_mid_insert)

        restarts.append(private_postgres.restart())
        for action_id in ids:  # outcome updates while the server comes back
            warehouse.update_triage_action(action_id, status="succeeded", response={"ok": action_id},
                                           num_triaged=2)
        assert [p.wait(timeout=60) for p in restarts] == [0, 0, 0]

        with engine.connect() as conn:
            rows = conn.execute(select(triage_actions).order_by(triage_actions.c.id)).all()
        assert [r.id for r in rows] == ids == sorted(set(ids))
        assert [(r.issue_ids, r.status, r.response) for r in rows] == [
            ([n, n + 1], "succeeded", {"ok": i}) for n, i in zip((1, 3, 5), ids, strict=True)
        ]
    finally:
        engine.dispose()
