"""A small client of Airflow 3's public REST API (v2), for the demo and the e2e tests.

Authentication follows the simple auth manager: ``POST /auth/token`` with the user and password returns a JWT
(``GET /auth/token`` without credentials when ``simple_auth_manager_all_admins`` is on); every call sends it as a
Bearer token and logs in again once on a 401.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

#: Times a call that does no harm twice is sent when its answer is lost (``AirflowApi.request``), and the seconds
#: between them.
ATTEMPTS = 3
REPEAT_DELAY = 2.0
#: The methods a call is sent again with by default.
IDEMPOTENT_METHODS = frozenset({"GET", "PATCH", "PUT"})

TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


class ApiError(RuntimeError):
    """A REST call failed: carries the method, path, status code and the response body (shortened)."""

    def __init__(self, method: str, path: str, status_code: int, body: str) -> None:
        super().__init__(f"{method} {path} -> {status_code}: {body[:1000]}")
        self.method = method
        self.path = path
        self.status_code = status_code
        self.body = body


@dataclass
class RunWatch:
    """What :meth:`AirflowApi.wait_for_run` saw while polling one DAG run.

    ``states``: per task instance key ``(task_id, map_index)``, the distinct states observed in order.
    ``deferrals``: per key, the trigger (``classpath``, ``kwargs`` shortened) and triggerer job (``hostname``) that
    the API reported while the task instance was ``deferred``; a task instance only has a trigger while it is
    deferred, and only a running triggerer job picks it up.
    """

    dag_id: str
    run_id: str
    run: dict[str, Any] = field(default_factory=dict)
    states: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    deferrals: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    task_instances: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def state(self) -> str | None:
        return self.run.get("state")

    def observe(self, tis: list[dict[str, Any]]) -> None:
        for ti in tis:
            key = (ti["task_id"], ti.get("map_index", -1))
            seen = self.states.setdefault(key, [])
            state = ti.get("state") or "none"
            if not seen or seen[-1] != state:
                seen.append(state)
            if state == "deferred" and (ti.get("trigger") or ti.get("triggerer_job")):
                info = self.deferrals.setdefault(key, {})
                if ti.get("trigger"):
                    info["classpath"] = ti["trigger"].get("classpath")
                    info["trigger_id"] = ti["trigger"].get("id")
                    info["created_date"] = ti["trigger"].get("created_date")
                if ti.get("triggerer_job"):
                    info["triggerer_job_id"] = ti["triggerer_job"].get("id")
                    info["triggerer_hostname"] = ti["triggerer_job"].get("hostname")

    def ti(self, task_id: str, map_index: int = -1) -> dict[str, Any]:
        for ti in self.task_instances:
            if ti["task_id"] == task_id and ti.get("map_index", -1) == map_index:
                return ti
        raise KeyError((task_id, map_index))

    def tis_of(self, task_id: str) -> list[dict[str, Any]]:
        return [ti for ti in self.task_instances if ti["task_id"] == task_id]

    def summary(self) -> str:
        lines = [f"{self.dag_id} {self.run_id}: {self.state} after {self.seconds:.0f}s"]
        for ti in sorted(self.task_instances, key=lambda t: (t["task_id"], t.get("map_index", -1))):
            mi = ti.get("map_index", -1)
            lines.append(f"  {ti['task_id']}{f'[{mi}]' if mi >= 0 else ''}: {ti.get('state')} "
                         f"(seen: {' -> '.join(self.states.get((ti['task_id'], mi), []))})")
        return "\n".join(lines)


class AirflowApi:
    """Airflow 3 REST API (``/api/v2``) over httpx, authenticated with the simple auth manager's JWT."""

    def __init__(self, base_url: str, username: str | None = None, password: str | None = None,
                 timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    # --- plumbing -------------------------------------------------------------------------------------------------

    def token(self, refresh: bool = False) -> str:
        """A JWT for the API: ``POST /auth/token`` (user/password) or ``GET /auth/token`` (all-admins mode)."""
        if self._token and not refresh:
            return self._token
        if self.username is None:
            r = self._http.get("/auth/token")
        else:
            r = self._http.post("/auth/token", json={"username": self.username, "password": self.password})
        if r.status_code not in (200, 201):
            raise ApiError("POST" if self.username else "GET", "/auth/token", r.status_code, r.text)
        self._token = r.json()["access_token"]
        return self._token

    def request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), repeat: bool | None = None,
                expect_on_repeat: tuple[int, ...] = (), **kwargs: Any) -> httpx.Response:
        """One call; a call whose answer is lost (no answer in time, or a 5xx: Airflow's API server answers 500 when
        it cannot take a SQLite metadata database's write lock in time, ``devtools.stack``) is sent again, up to
        ``ATTEMPTS`` times in all, ``REPEAT_DELAY`` seconds apart, when sending it twice does no harm: ``GET``,
        ``PATCH`` and ``PUT`` by default, a ``POST`` whose caller says so (``repeat=True``) and accepts what a
        repeat of a lost one gets (``expect_on_repeat``, such as the 409 of a creation that was made)."""
        attempts = ATTEMPTS if (method in IDEMPOTENT_METHODS if repeat is None else repeat) else 1
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                r = self._send(method, path, **kwargs)
            except httpx.TimeoutException:
                if last:
                    raise
            else:
                if r.status_code < 500 or last:
                    if r.status_code not in expect and not (attempt > 1 and r.status_code in expect_on_repeat):
                        raise ApiError(method, path, r.status_code, r.text)
                    return r
            time.sleep(REPEAT_DELAY)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request with the JWT (logged in again once on a 401)."""
        headers = {"Authorization": f"Bearer {self.token()}", **kwargs.pop("headers", {})}
        r = self._http.request(method, path, headers=headers, **kwargs)
        if r.status_code == 401:
            headers["Authorization"] = f"Bearer {self.token(refresh=True)}"
            r = self._http.request(method, path, headers=headers, **kwargs)
        return r

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def _paged(self, path: str, key: str, page: int = 100, **params: Any) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            body = self.get(path, limit=page, offset=offset, **params)
            items = body.get(key) or []
            yield from items
            offset += len(items)
            if not items or offset >= (body.get("total_entries") or 0):
                return

    # --- reads ----------------------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``/api/v2/monitor/health`` (no authentication needed)."""
        r = self._http.get("/api/v2/monitor/health")
        if r.status_code != 200:
            raise ApiError("GET", "/api/v2/monitor/health", r.status_code, r.text)
        return r.json()

    def version(self) -> dict[str, Any]:
        return self.get("/api/v2/version")

    def dags(self) -> list[dict[str, Any]]:
        return list(self._paged("/api/v2/dags", "dags"))

    def dag_ids(self) -> list[str]:
        return [d["dag_id"] for d in self.dags()]

    def dag(self, dag_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{quote(dag_id)}")

    def import_errors(self) -> list[dict[str, Any]]:
        return list(self._paged("/api/v2/importErrors", "import_errors"))

    def pool(self, name: str) -> dict[str, Any]:
        return self.get(f"/api/v2/pools/{quote(name)}")

    def connection(self, conn_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/connections/{quote(conn_id)}")

    def runs(self, dag_id: str, **params: Any) -> list[dict[str, Any]]:
        return list(self._paged(f"/api/v2/dags/{quote(dag_id)}/dagRuns", "dag_runs", **params))

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, mapped ones included (one per ``map_index``)."""
        return list(self._paged(
            f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}/taskInstances", "task_instances"
        ))

    def ti_tries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[dict[str, Any]]:
        base = f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}/taskInstances/{quote(task_id)}"
        path = f"{base}/{map_index}/tries" if map_index >= 0 else f"{base}/tries"
        return self.get(path)["task_instances"]

    def ti_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1) -> str:
        """The task instance's log as text (the API merges the worker's and the triggerer's parts)."""
        path = (f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}/taskInstances/{quote(task_id)}"
                f"/logs/{try_number}")
        r = self.request("GET", path, params={"map_index": map_index, "full_content": "true"},
                         headers={"Accept": "application/json"})
        content = r.json().get("content")
        if isinstance(content, str):
            return content
        lines = []
        for item in content or []:
            if isinstance(item, dict):
                extra = {k: v for k, v in item.items() if k not in ("event", "timestamp", "level")}
                lines.append(f"{item.get('timestamp', '')} {item.get('level', '')} {item.get('event', '')} "
                             f"{extra if extra else ''}".rstrip())
            else:
                lines.append(str(item))
        return "\n".join(lines)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        path = (f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id, safe='')}/taskInstances/{quote(task_id)}"
                f"/xcomEntries/{quote(key)}")
        return self.get(path, map_index=map_index, deserialize="true").get("value")

    def asset_events(self, **params: Any) -> list[dict[str, Any]]:
        return list(self._paged("/api/v2/assets/events", "asset_events", **params))

    # --- writes ---------------------------------------------------------------------------------------------------

    def set_paused(self, dag_id: str, paused: bool) -> dict[str, Any]:
        return self.request("PATCH", f"/api/v2/dags/{quote(dag_id)}", json={"is_paused": paused}).json()

    def ensure_pool(self, name: str, slots: int, include_deferred: bool = True, description: str = "") -> dict:
        body = {"name": name, "slots": slots, "include_deferred": include_deferred, "description": description}
        r = self.request("POST", "/api/v2/pools", json=body, expect=(201, 409), repeat=True)
        if r.status_code == 409:
            r = self.request("PATCH", f"/api/v2/pools/{quote(name)}", json=body)
        return r.json()

    def ensure_connection(self, conn_id: str, conn_type: str, **fields: Any) -> dict[str, Any]:
        """Create or update a connection in the metadata database (``extra`` as a dict or a JSON string)."""
        body: dict[str, Any] = {"connection_id": conn_id, "conn_type": conn_type, **fields}
        if isinstance(body.get("extra"), dict):
            body["extra"] = json.dumps(body["extra"])
        r = self.request("POST", "/api/v2/connections", json=body, expect=(201, 409), repeat=True)
        if r.status_code == 409:
            r = self.request("PATCH", f"/api/v2/connections/{quote(conn_id)}", json=body)
        return r.json()

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, run_id: str | None = None,
                note: str | None = None) -> dict[str, Any]:
        """``POST /api/v2/dags/{dag_id}/dagRuns`` with ``logical_date: null`` (a manual run, "now").

        A trigger whose answer is lost may have created the run or not: it is sent again with the same run id (one
        is made when none is given; :meth:`request`), and a 409 to a repeat means the lost one created it: that run
        is returned. So a trigger creates at most one run; a 409 to the first attempt is raised."""
        run_id = run_id or f"manual__{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}_{uuid.uuid4().hex[:8]}"
        body: dict[str, Any] = {"logical_date": None, "conf": conf or {}, "dag_run_id": run_id}
        if note:
            body["note"] = note
        r = self.request("POST", f"/api/v2/dags/{quote(dag_id)}/dagRuns", json=body, repeat=True,
                         expect_on_repeat=(409,))
        return self.run(dag_id, run_id) if r.status_code == 409 else r.json()

    # --- waiting --------------------------------------------------------------------------------------------------

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300.0, poll: float = 1.0,
                     watch: RunWatch | None = None, alive: Callable[[], None] | None = None) -> RunWatch:
        """Poll the run (and its task instances, recording every state seen) until it succeeds or fails.

        ``alive`` is called on every poll (the stack's ``check_alive``: fail fast when a component died).
        Raises ``TimeoutError`` with the last states when the run is still going after ``timeout`` seconds.
        """
        watch = watch or RunWatch(dag_id, run_id)
        start = time.monotonic()
        while True:
            if alive is not None:
                alive()
            watch.run = self.run(dag_id, run_id)
            watch.task_instances = self.task_instances(dag_id, run_id)
            watch.observe(watch.task_instances)
            watch.seconds = time.monotonic() - start
            if watch.state in TERMINAL_RUN_STATES:
                return watch
            if watch.seconds > timeout:
                raise TimeoutError(f"run did not finish within {timeout:.0f}s:\n{watch.summary()}")
            time.sleep(poll)

    def wait_for_runs(self, runs: list[tuple[str, str]], timeout: float = 300.0, poll: float = 1.0,
                      alive: Callable[[], None] | None = None) -> dict[tuple[str, str], RunWatch]:
        """Like :meth:`wait_for_run` for several runs at once (polled round-robin)."""
        watches = {key: RunWatch(*key) for key in runs}
        start = time.monotonic()
        pending = set(runs)
        while pending:
            if alive is not None:
                alive()
            for key in list(pending):
                w = watches[key]
                w.run = self.run(*key)
                w.task_instances = self.task_instances(*key)
                w.observe(w.task_instances)
                w.seconds = time.monotonic() - start
                if w.state in TERMINAL_RUN_STATES:
                    pending.discard(key)
            if pending and time.monotonic() - start > timeout:
                raise TimeoutError(f"runs did not finish within {timeout:.0f}s:\n"
                                   + "\n".join(watches[k].summary() for k in sorted(pending)))
            if pending:
                time.sleep(poll)
        return watches

    def wait_for_new_run(self, dag_id: str, after: set[str], timeout: float = 120.0, poll: float = 1.0,
                         alive: Callable[[], None] | None = None, run_type: str | None = None) -> dict[str, Any]:
        """Wait until ``dag_id`` has a run whose id is not in ``after`` (e.g. one scheduled by an Asset event)."""
        start = time.monotonic()
        while True:
            if alive is not None:
                alive()
            for run in self.runs(dag_id):
                if run["dag_run_id"] not in after and (run_type is None or run.get("run_type") == run_type):
                    return run
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"no new run of {dag_id} within {timeout:.0f}s")
            time.sleep(poll)
