"""The one launcher of a real local Airflow stack, used by the demo (``devtools/demo.py``) and the e2e tests.

A :class:`Stack` starts, as subprocesses each in its own process group with its output in
``$AIRFLOW_HOME/logs/stack/<component>.log``:

* the findings API emulator (``findings-emulator``), unless ``emulator=None``;
* ``airflow api-server``, ``airflow scheduler``, ``airflow dag-processor``, ``airflow triggerer``;
* with ``executor="CeleryExecutor"``: ``airflow celery worker`` processes (two by default), each with its own
  Celery hostname and log-server port.

Before that it writes the environment every component shares (``AIRFLOW_HOME``, the DAGs folder, the metadata
database, the simple auth manager's user and password, the connections ``findings_api_default`` and
``findings_warehouse_default`` as ``AIRFLOW_CONN_*`` variables, ``FINDINGS_REPORT_DIR``, ...) and migrates the
metadata database (skipped when this ``AIRFLOW_HOME`` was already migrated by the same Airflow version). It then
waits until the API server reports every component healthy, creates the ``findings_api`` pool (deferred tasks
count) through the REST API and waits until the expected DAGs are parsed.

Leaving the ``with`` block (normally, on an exception, on Ctrl-C) stops every process it started by process group:
SIGTERM, a grace period, then SIGKILL, then any descendant that escaped its group.

Its environment (paths, connection ids, the emulator's options) is in ``environment.py``, the process handling in
``processes.py``; run it by hand with ``python devtools/cli.py --home /tmp/af`` (``--help`` for the options); the
demo is ``make demo``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``devtools`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from findings_emulator.testing import EmulatorAdmin
from findings_provider.names import PIPELINE_DAGS

from devtools.airflow_api import AirflowApi
from devtools.environment import (
    API_CONN_ID,
    CELERY,
    DAGS_FOLDER,
    LOCAL,
    POOL_NAME,
    POOL_SLOTS,
    USERNAME,
    WAREHOUSE_CONN_ID,
    EmulatorOptions,
    fernet_key,
    warehouse_fields,
)
from devtools.processes import (
    Component,
    descendants,
    free_port,
    kill_pids,
    set_pdeathsig,
    signal_group,
    tail,
    venv_bin,
)

#: Seconds an Airflow component of a SQLite stack waits for the metadata database's write lock.
SQLITE_BUSY_TIMEOUT = 60
#: The same for the API server, shorter. Airflow 3.3's public API records each write action (``log_action``, an
#: async dependency of the endpoint) with a synchronous commit on the server's event loop: while another request's
#: thread holds SQLite's write lock and needs that loop to finish (its session's teardown commits), neither moves
#: until the wait ends, and the whole server, the tasks' execution API included, stalls that long before answering
#: that action 500. Shorter than the span of the tasks' execution API retries (about 30 s), so that they outlast
#: it; the demo's and the tests' client sends a call that got a 500 again where that does no harm
#: (``AirflowApi.request``).
API_SERVER_SQLITE_BUSY_TIMEOUT = 15


class StackError(RuntimeError):
    """A component did not start, died, or did not become healthy in time; the message names the log."""


class Stack:
    """A real Airflow (every component) plus the emulator, as subprocesses; a context manager.

    ``executor``: ``LocalExecutor`` (metadata on SQLite in ``airflow_home`` unless ``metadata_db_url``) or
    ``CeleryExecutor`` (needs ``metadata_db_url`` on PostgreSQL and ``broker_url``; ``celery_workers`` workers).
    ``warehouse_url``: the ``findings_warehouse_default`` URI; default the SQLite file
    ``airflow_home/findings_warehouse.db``. ``fast=True`` shortens the DAG processor's intervals (tests).
    The two connections are always given as ``AIRFLOW_CONN_*`` variables; ``connections_in_db=True`` also stores
    the same values in the metadata database through the REST API, so that the UI lists them (Admin >
    Connections) and its Test button works (the variables still take precedence; the values are identical).
    """

    def __init__(
        self,
        airflow_home: str | Path,
        *,
        dags_folder: str | Path = DAGS_FOLDER,
        plugins_folder: str | Path | None = None,
        executor: str = LOCAL,
        metadata_db_url: str | None = None,
        warehouse_url: str | None = None,
        broker_url: str | None = None,
        celery_workers: int = 2,
        celery_concurrency: int = 2,
        celery_queue: str | None = None,
        api_host: str = "127.0.0.1",
        api_port: int | None = None,
        api_workers: int = 1,
        emulator: EmulatorOptions | None = None,
        pipeline_config: str | Path | None = None,
        expected_dags: Iterable[str] = PIPELINE_DAGS,
        pool_slots: int = POOL_SLOTS,
        fast: bool = False,
        all_admins: bool = False,
        connections_in_db: bool = False,
        extra_env: dict[str, str] | None = None,
        progress: Callable[[str], None] | None = None,
        startup_timeout: float = 240.0,
    ) -> None:
        self.home = Path(airflow_home).resolve()
        self.dags_folder = Path(dags_folder).resolve()
        self.plugins_folder = Path(plugins_folder).resolve() if plugins_folder else None
        if executor not in (LOCAL, CELERY):
            raise ValueError(f"executor must be {LOCAL} or {CELERY}, got {executor!r}")
        if executor == CELERY and not (metadata_db_url and broker_url):
            raise ValueError("CeleryExecutor needs metadata_db_url (PostgreSQL) and broker_url (Redis)")
        self.executor = executor
        # SQLite metadata: wait up to SQLITE_BUSY_TIMEOUT s for a write lock (sqlite3's default, 5 s, runs out on a
        # loaded machine while the scheduler writes, and the API server answers 500 to a trigger)
        sqlite_db_url = f"sqlite:///{self.home / 'airflow.db'}?timeout="
        self.metadata_db_url = metadata_db_url or f"{sqlite_db_url}{SQLITE_BUSY_TIMEOUT}"
        #: the API server's (``API_SERVER_SQLITE_BUSY_TIMEOUT``); a given URL is every component's
        self.api_server_db_url = metadata_db_url or f"{sqlite_db_url}{API_SERVER_SQLITE_BUSY_TIMEOUT}"
        self.warehouse_url = warehouse_url or f"sqlite:///{self.home / 'findings_warehouse.db'}"
        self.broker_url = broker_url
        self.celery_workers = celery_workers if executor == CELERY else 0
        self.celery_concurrency = celery_concurrency
        self.celery_queue = celery_queue
        self.api_host = api_host
        self.api_port = api_port or free_port()
        self.api_workers = api_workers
        self.emulator = emulator
        if self.emulator is not None and self.emulator.port is None:
            self.emulator.port = free_port()
        self.pipeline_config = Path(pipeline_config).resolve() if pipeline_config else None
        self.expected_dags = tuple(expected_dags)
        self.pool_slots = pool_slots
        self.fast = fast
        self.all_admins = all_admins
        self.connections_in_db = connections_in_db
        self.extra_env = dict(extra_env or {})
        self.progress = progress or (lambda _msg: None)
        self.startup_timeout = startup_timeout

        # every process serves its task/trigger logs on its own port: stacks side by side do not collide
        self.worker_log_port = free_port()
        self.trigger_log_port = free_port()
        self.celery_log_ports = [free_port() for _ in range(self.celery_workers)]
        self.log_dir = self.home / "logs" / "stack"
        self.components: list[Component] = []
        self.started_at: float | None = None
        self.ready_after: float | None = None
        self._state = self._load_state()
        self._api: AirflowApi | None = None
        self._stopped = False

    # --- public properties ------------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """Where clients (the REST helper, the task workers' execution API calls) reach the API server."""
        host = "127.0.0.1" if self.api_host in ("0.0.0.0", "", "::") else self.api_host
        return f"http://{host}:{self.api_port}"

    @property
    def ui_url(self) -> str:
        host = "localhost" if self.api_host in ("127.0.0.1", "0.0.0.0") else self.api_host
        return f"http://{host}:{self.api_port}"

    @property
    def username(self) -> str:
        return USERNAME

    @property
    def password(self) -> str:
        return self._state["password"]

    @property
    def warehouse_sqlite_path(self) -> Path | None:
        if self.warehouse_url.startswith("sqlite:///"):
            return Path(self.warehouse_url[len("sqlite:///") :])
        return None

    @property
    def api(self) -> AirflowApi:
        """A REST client of this stack's API server, logged in as the admin user."""
        if self._api is None:
            self._api = AirflowApi(
                self.api_url, None if self.all_admins else self.username, None if self.all_admins else self.password
            )
        return self._api

    def component(self, name: str) -> Component:
        for comp in self.components:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def log_of(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    # --- environment --------------------------------------------------------------------------------------------

    def _load_state(self) -> dict[str, str]:
        """Secrets that must stay the same across restarts of one AIRFLOW_HOME (demo): kept in stack-state.json."""
        path = self.home / "stack-state.json"
        state: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            state = json.loads(path.read_text())
        changed = False
        for key, make in (
            ("password", lambda: secrets.token_urlsafe(12)),
            ("jwt_secret", lambda: secrets.token_urlsafe(32)),
            ("api_secret_key", lambda: secrets.token_urlsafe(32)),
            ("fernet_key", fernet_key),
        ):
            if not state.get(key):
                state[key] = make()
                changed = True
        if changed:
            self.home.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(state, indent=2) + "\n")
            path.chmod(0o600)
        return state

    def api_connection(self) -> dict[str, Any] | None:
        if self.emulator is None:
            return None
        return {
            "conn_type": "findings_api",
            "host": self.emulator.url,
            "password": self.emulator.token,
            "extra": {"deployment_slug": self.emulator.deployment_slug, "deployment_id": self.emulator.deployment_id},
        }

    def env(self) -> dict[str, str]:
        """The environment every component runs with (inherited Airflow settings are dropped, not merged)."""
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_"))
            and k not in ("AIRFLOW_HOME", "FINDINGS_PIPELINE_CONFIG", "FINDINGS_REPORT_DIR", "PYTEST_CURRENT_TEST")
        }
        plugins = self.plugins_folder or self._default_plugins_folder()
        env = {
            **base,
            "PATH": f"{venv_bin()}{os.pathsep}{base.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": self.executor,
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
            "AIRFLOW__CORE__FERNET_KEY": self._state["fernet_key"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_db_url,
            # the links Airflow builds (an approval's Required Actions page in an alert, a task's log) point here
            "AIRFLOW__API__BASE_URL": self.api_url,
            "AIRFLOW__API__HOST": self.api_host,
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__API__WORKERS": str(self.api_workers),
            "AIRFLOW__API__SECRET_KEY": self._state["api_secret_key"],
            "AIRFLOW__API_AUTH__JWT_SECRET": self._state["jwt_secret"],
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": str(self.all_admins),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.worker_log_port),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.trigger_log_port),
            "AIRFLOW_CONN_" + WAREHOUSE_CONN_ID.upper(): self.warehouse_url,
            "FINDINGS_REPORT_DIR": str(self.home / "reports"),
        }
        conn = self.api_connection()
        if conn is not None:
            env["AIRFLOW_CONN_" + API_CONN_ID.upper()] = json.dumps(conn)
        if self.pipeline_config is not None:
            env["FINDINGS_PIPELINE_CONFIG"] = str(self.pipeline_config)
        if self.fast:
            env.update(
                {
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_SEC": "5",
                    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                }
            )
        else:
            env["AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL"] = "30"
        if self.executor == CELERY:
            assert self.broker_url is not None
            env.update(
                {
                    "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
                    "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.metadata_db_url,
                    "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.celery_concurrency),
                    "AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER": "1",
                }
            )
            if self.celery_queue:
                env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"] = self.celery_queue
        env.update(self.extra_env)
        return env

    @property
    def passwords_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json"

    def _default_plugins_folder(self) -> Path:
        """An empty folder in AIRFLOW_HOME: the dashboard plugin comes from the installed provider's entry point.
        The repository's ``plugins/`` would need its ``.airflowignore`` (else the loader imports every module of
        the provider as a top-level plugin file), and the task SDK compiles that file's glob patterns with
        pathspec's deprecated ``GitWildMatchPattern``: every task log would start with its DeprecationWarning."""
        path = self.home / "plugins"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _airflow(self, *args: str) -> list[str]:
        exe = venv_bin() / "airflow"
        return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "airflow", *args]

    def _emulator_cmd(self) -> list[str]:
        assert self.emulator is not None
        opts = self.emulator
        exe = venv_bin() / "findings-emulator"
        head = [str(exe)] if exe.exists() else [sys.executable, "-m", "findings_emulator"]
        cmd = [*head, "--host", opts.host, "--port", str(opts.port), "--token", opts.token, "--seed", str(opts.seed)]
        if opts.findings is not None:
            cmd += ["--findings", str(opts.findings)]
        return [*cmd, *opts.extra_args]

    # --- start / stop --------------------------------------------------------------------------------------------

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Stack:
        self.started_at = time.monotonic()
        self._stopped = False
        atexit.register(self.stop)
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "reports").mkdir(exist_ok=True)
        self._write_passwords()
        env = self.env()
        shown = {k: ("***" if any(w in k for w in ("SECRET", "FERNET")) else v)
                 for k, v in env.items() if k.startswith(("AIRFLOW", "FINDINGS"))}
        (self.home / "stack-env.json").write_text(json.dumps(shown, indent=2) + "\n")  # for people and artifacts

        if self.emulator is not None:
            self.progress(f"starting the findings API emulator on {self.emulator.url}")
            self._spawn(Component("emulator", self._emulator_cmd(), self.log_of("emulator")), env)

        self._migrate(env)

        self.progress(f"starting Airflow ({self.executor}): api-server on {self.api_url}, scheduler, dag-processor, "
                      f"triggerer" + (f", {self.celery_workers} celery workers" if self.celery_workers else ""))
        self._spawn(
            Component(
                "api-server",
                self._airflow("api-server", "--host", self.api_host, "--port", str(self.api_port),
                              "--workers", str(self.api_workers)),
                self.log_of("api-server"),
                env_overrides={"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.api_server_db_url},
            ),
            env,
        )
        self._spawn(Component("scheduler", self._airflow("scheduler"), self.log_of("scheduler")), env)
        self._spawn(Component("dag-processor", self._airflow("dag-processor"), self.log_of("dag-processor")), env)
        self._spawn(Component("triggerer", self._airflow("triggerer"), self.log_of("triggerer")), env)
        for i in range(1, self.celery_workers + 1):
            name = f"celery-worker-{i}"
            cmd = self._airflow("celery", "worker", "--celery-hostname", f"{self.celery_hostname(i)}",
                                "--concurrency", str(self.celery_concurrency), "--without-gossip", "--without-mingle")
            if self.celery_queue:
                cmd += ["--queues", self.celery_queue]
            own_port = {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.celery_log_ports[i - 1])}
            self._spawn(Component(name, cmd, self.log_of(name), env_overrides=own_port), env)

        if self.emulator is not None:
            self._wait_emulator()
        self._wait_healthy()
        self.progress(f"API server healthy after {self.elapsed():.0f}s; creating pool {POOL_NAME!r}")
        self.api.ensure_pool(POOL_NAME, self.pool_slots, include_deferred=True,
                             description="Bounds concurrent calls to the findings API (deferred sensors count)")
        if self.connections_in_db:
            self._store_connections()
        if self.celery_workers:
            self._wait_celery_workers()
        if self.expected_dags:
            self._wait_dags()
        self.ready_after = self.elapsed()
        self.progress(f"stack ready after {self.ready_after:.0f}s")
        return self

    def _store_connections(self) -> None:
        conn = self.api_connection()
        if conn is not None:
            self.api.ensure_connection(API_CONN_ID, conn["conn_type"], host=conn["host"], password=conn["password"],
                                       extra=conn["extra"], description="The findings API (here: the emulator)")
        conn_type, fields = warehouse_fields(self.warehouse_url)
        self.api.ensure_connection(WAREHOUSE_CONN_ID, conn_type, description="The findings warehouse", **fields)
        self.progress(f"connections {API_CONN_ID} and {WAREHOUSE_CONN_ID} stored (Admin > Connections)")

    def celery_hostname(self, i: int, expand: bool = False) -> str:
        """Celery node name of worker ``i`` (``%h`` is the host name; ``expand`` fills it in)."""
        name = f"worker{i}-{self.api_port}@%h"
        return name.replace("%h", socket.gethostname()) if expand else name

    def elapsed(self) -> float:
        return time.monotonic() - (self.started_at or time.monotonic())

    def _write_passwords(self) -> None:
        self.passwords_file.write_text(json.dumps({USERNAME: self.password}) + "\n")
        self.passwords_file.chmod(0o600)

    def _migrate(self, env: dict[str, str]) -> None:
        from importlib.metadata import version

        stamp = self.home / ".stack-migrated"
        key = f"{version('apache-airflow')} {self.metadata_db_url}"
        if stamp.exists() and stamp.read_text().strip() == key:
            self.progress("metadata database already migrated (reusing it)")
            return
        self.progress(f"migrating the metadata database ({self.metadata_db_url.split('://')[0]})")
        log = self.log_of("db-migrate")
        with open(log, "ab") as out:
            rc = subprocess.call(self._airflow("db", "migrate"), env=env, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=self.home, timeout=600)
        if rc != 0:
            raise StackError(f"airflow db migrate failed (exit {rc}); see {log}:\n{tail(log)}")
        stamp.write_text(key + "\n")

    def _spawn(self, comp: Component, env: dict[str, str]) -> None:
        comp.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(comp.log_path, "ab")
        out.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(comp.cmd)}\n".encode())
        out.flush()
        in_main_thread = threading.current_thread() is threading.main_thread()
        comp.proc = subprocess.Popen(
            comp.cmd,
            env={**env, **comp.env_overrides},
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: stopped as a group, never hit by the terminal's Ctrl-C
            # PR_SET_PDEATHSIG follows the forking *thread*: only safe from the main thread.
            preexec_fn=set_pdeathsig if in_main_thread and sys.platform.startswith("linux") else None,
        )
        out.close()  # the child holds its own descriptor
        self.components.append(comp)

    def check_alive(self) -> None:
        """Raise StackError naming the first component that exited, with the tail of its log."""
        for comp in self.components:
            if comp.proc is not None and comp.proc.poll() is not None:
                raise StackError(
                    f"{comp.name} exited with {comp.proc.returncode}; log {comp.log_path}:\n{tail(comp.log_path)}"
                )

    def _wait(self, what: str, probe: Callable[[], Any], timeout: float | None = None, interval: float = 0.5) -> Any:
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        last: Any = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                result = probe()
            except Exception as exc:
                last = exc
            else:
                if result:
                    return result
                last = result
            time.sleep(interval)
        raise StackError(f"timed out after {timeout or self.startup_timeout:.0f}s waiting for {what} "
                         f"(last: {last!r}); logs in {self.log_dir}")

    def _wait_emulator(self) -> None:
        import httpx

        assert self.emulator is not None
        url = self.emulator.url

        def probe() -> bool:
            return httpx.get(f"{url}/_emulator/health", timeout=5).status_code == 200

        self._wait(f"the emulator at {url} (/_emulator/health)", probe, interval=0.25)
        self.progress(f"emulator ready after {self.elapsed():.0f}s")

    def emulator_admin(self) -> EmulatorAdmin:
        """A client of the emulator's admin routes (``/_emulator/...``); the caller closes it."""
        if self.emulator is None:
            raise StackError("this stack runs no emulator")
        return EmulatorAdmin(self.emulator.url, self.emulator.token)

    def _wait_healthy(self) -> None:
        wanted = {"metadatabase", "scheduler", "triggerer", "dag_processor"}

        def probe() -> bool | dict:
            health = self.api.health()
            states = {k: (v or {}).get("status") for k, v in health.items() if k in wanted}
            return health if all(states.get(k) == "healthy" for k in wanted) else False

        self._wait("every Airflow component to report healthy (/api/v2/monitor/health)", probe)

    def _wait_celery_workers(self) -> None:
        def probe() -> bool:
            return all("ready." in self.log_of(f"celery-worker-{i}").read_text(errors="replace")
                       for i in range(1, self.celery_workers + 1))

        self._wait(f"{self.celery_workers} celery workers to be ready", probe)
        self.progress(f"{self.celery_workers} celery workers ready after {self.elapsed():.0f}s")

    def _wait_dags(self) -> None:
        expected = set(self.expected_dags)

        def probe() -> bool:
            missing = expected - set(self.api.dag_ids())
            if missing:
                raise StackError(f"DAGs not parsed yet: {sorted(missing)}")
            return True

        try:
            self._wait(f"the DAGs {sorted(expected)} to be parsed", probe, interval=1.0)
        except StackError as exc:
            errors = []
            with contextlib.suppress(Exception):
                errors = self.api.import_errors()
            detail = "\n".join(f"{e.get('filename')}: {e.get('stack_trace', '')[-800:]}" for e in errors)
            raise StackError(f"{exc}\nimport errors:\n{detail or '(none reported)'}") from None
        self.progress(f"{len(expected)} DAGs parsed after {self.elapsed():.0f}s")

    def stop(self, grace: float = 10.0) -> None:
        """Stop every process this stack started: SIGTERM to each process group, then SIGKILL. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if self._api is not None:
            self._api.close()
        procs = [c for c in self.components if c.proc is not None]
        escaped = descendants([c.proc.pid for c in procs if c.alive()])  # type: ignore[union-attr]
        for comp in reversed(procs):
            signal_group(comp.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        # A second SIGTERM tells the scheduler's LocalExecutor and Celery's warm shutdown not to wait for
        # running tasks; then SIGKILL whatever is still there after the grace period.
        for round_grace, resend in ((min(5.0, grace), True), (grace, False)):
            deadline = time.monotonic() + round_grace
            for comp in procs:
                assert comp.proc is not None
                with contextlib.suppress(subprocess.TimeoutExpired):
                    comp.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            if resend:
                for comp in procs:
                    if comp.alive():
                        self.progress(f"{comp.name} still running after {round_grace:.0f}s: SIGTERM again")
                        signal_group(comp.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        for comp in procs:
            assert comp.proc is not None
            if comp.alive():
                self.progress(f"{comp.name} (pid {comp.proc.pid}) did not stop within {grace:.0f}s: killing it")
            signal_group(comp.proc.pid, signal.SIGKILL)  # stragglers left in the group, or the leader itself
            with contextlib.suppress(subprocess.TimeoutExpired):
                comp.proc.wait(timeout=5)
        kill_pids(escaped)
        self.progress("every process of the stack stopped")

    def collect_artifacts(self, dest: str | Path) -> Path:
        """Copy the logs (component and task logs) and the stack's env to ``dest``."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        logs = self.home / "logs"
        if logs.exists():
            shutil.copytree(logs, dest / "logs", dirs_exist_ok=True)
        for name in ("stack-env.json", "airflow.cfg"):
            if (self.home / name).exists():
                shutil.copy2(self.home / name, dest / name)
        return dest

    # --- convenience used by the demo and the tests -----------------------------------------------------------

    def unpause(self, dag_ids: Iterable[str] | None = None) -> None:
        for dag_id in dag_ids or self.expected_dags:
            self.api.set_paused(dag_id, False)
