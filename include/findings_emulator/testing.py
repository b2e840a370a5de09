"""Run the emulator as a subprocess for tests and benchmarks (needs only the standard library and httpx).

Example::

    with EmulatorProcess(findings=500) as emu, emu.client() as api:
        api.get(f"/api/v1/deployments/{emu.deployment_slug}/findings").raise_for_status()
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

STARTUP_TIMEOUT = 60.0
# The directory holding the findings_emulator package, so the subprocess imports this very copy.
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process`` and its process group (it leads one: ``start_new_session``), by its pid: SIGTERM, then
    SIGKILL after 10 s; wait for it."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


class EmulatorAdmin:
    """A client of a running emulator: its admin routes (``/_emulator/...``, loopback only; see ``README.md``) and,
    through :meth:`client`, its API. :class:`EmulatorProcess` is one; the stack launcher makes one for the
    emulator it started."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 120.0) -> None:
        self.base_url = base_url
        self.token = token
        # No kept-alive connection: the emulator (uvicorn) closes one idle for 5 s, and a call that reuses it at that
        # moment fails with "Server disconnected" (seen after a long DAG run). Admin calls are few; each connects anew.
        self._admin = httpx.Client(base_url=base_url, timeout=timeout,
                                   limits=httpx.Limits(max_keepalive_connections=0))

    def close(self) -> None:
        """Close the admin connection."""
        self._admin.close()

    def __enter__(self) -> EmulatorAdmin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client for the API with the token set (the caller closes it)."""
        return httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"}, **kwargs)

    def health(self) -> dict[str, Any]:
        """The emulator's health: status, deployment id and slug."""
        return dict(self._admin_call("GET", "health"))

    def _admin_call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._admin.request(method, f"/_emulator/{path}", **kwargs)
        response.raise_for_status()
        return response.json()

    def requests(self, since: int | None = None) -> list[dict[str, Any]]:
        """Logged API requests after sequence number ``since``."""
        params = {} if since is None else {"since": since}
        return list(self._admin_call("GET", "requests", params=params)["requests"])

    def clear_requests(self) -> None:
        """Empty the request log."""
        self._admin_call("DELETE", "requests")

    def add_fault(self, **spec: Any) -> int:
        """Add a fault rule (fields as the admin route); returns its id."""
        return int(self._admin_call("POST", "faults", json=spec)["id"])

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        self._admin_call("DELETE", "faults")

    def reset(self, **overrides: Any) -> dict[str, Any]:
        """Regenerate the data (with overrides such as ``seed`` or ``findings``); clears log and faults."""
        return dict(self._admin_call("POST", "reset", json=overrides))

    def retire_policies(self, retired: bool = True) -> None:
        """Retire the policy API now (410 Gone, ``DEPLOYMENT_MIGRATED``) or bring it back; the data stays as it is."""
        self._admin_call("POST", "policies", json={"retired": retired})

    def create_scan(self, **spec: Any) -> dict[str, Any]:
        """Add a scan (fields as the admin route); returns it as scan search lists it."""
        return dict(self._admin_call("POST", "scans", json=spec))

    def tickets(self) -> list[dict[str, Any]]:
        """Tickets created through the API since the last reset."""
        return list(self._admin_call("GET", "tickets")["tickets"])

    def stats(self) -> dict[str, Any]:
        """Row counts and the last load's timings."""
        return dict(self._admin_call("GET", "stats"))

    def sbom(self, **settings: Any) -> dict[str, Any]:
        """The SBOM export settings and jobs; with ``settings`` (``polls``, ``url_ttl``, ``fail_next``,
        ``fail_repositories``, ``error_message``) change them first."""
        if settings:
            self._admin_call("POST", "sbom", json=settings)
        return dict(self._admin_call("GET", "sbom"))

    def person_acts(self, finding_id: int, **action: Any) -> dict[str, Any]:
        """Change a finding as a person in the service's UI would: ``triage_state``, ``triage_reason``,
        ``status``, ``ticket`` ("create"/"remove") or ``reintroduce=True`` (as a scan would)."""
        return dict(self._admin_call("POST", f"findings/{finding_id}/person", json=action))


#: How many ports :class:`EmulatorProcess` tries when it chooses the port itself.
PORT_ATTEMPTS = 3


class _PortTaken(RuntimeError):
    """The emulator could not listen on its port: another process holds it."""


class EmulatorProcess(EmulatorAdmin):
    """A ``python -m findings_emulator`` subprocess in its own process group, with the admin helpers."""

    def __init__(
        self,
        *,
        port: int | None = None,
        token: str = "test-token",  # noqa: S107 - a fixed token for tests, not a secret
        seed: int = 42,
        findings: int = 500,
        dialect: str = "reference",
        extra_args: Sequence[str] = (),
        log_path: str | Path | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
    ) -> None:
        self.port = port or free_port()
        super().__init__(f"http://127.0.0.1:{self.port}", token)
        self._choose_port = port is None
        self.dialect = dialect
        self.deployment_id = ""
        self.deployment_slug = ""
        self.startup_seconds = 0.0
        self._own_log = log_path is None
        if log_path is None:
            handle, log_path = tempfile.mkstemp(prefix="emulator-", suffix=".log")
            os.close(handle)
        self.log_path = Path(log_path)
        arguments = ["--token", token, "--seed", str(seed), "--findings", str(findings), "--dialect", dialect,
                     *extra_args]
        started = time.monotonic()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._start(arguments)
            try:
                self._wait_healthy(startup_timeout)
                break
            except _PortTaken:
                # the port chosen was taken between the choice and the bind (another test session, in parallel)
                self.stop()
                if not self._choose_port or attempt == PORT_ATTEMPTS:
                    raise
                self.port = free_port()
                EmulatorAdmin.__init__(self, f"http://127.0.0.1:{self.port}", token)
            except BaseException:
                self.stop()
                raise
        self.startup_seconds = time.monotonic() - started

    def _start(self, arguments: list[str]) -> None:
        command = [sys.executable, "-m", "findings_emulator", "--host", "127.0.0.1", "--port", str(self.port),
                   *arguments]
        python_path = os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             env={**os.environ, "PYTHONPATH": python_path})

    @property
    def pid(self) -> int:
        """Process id of the emulator (also its process group id)."""
        return self._process.pid

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = self.log_tail()
                if "address already in use" in tail.lower():
                    raise _PortTaken(tail)
                raise RuntimeError(f"emulator exited with {self._process.returncode}:\n{tail}")
            try:
                health = self._admin.get("/_emulator/health", timeout=2.0)
                if health.status_code == 200:
                    answer = health.json()
                    if answer.get("pid") != self._process.pid:
                        raise _PortTaken(f"another process answers on port {self.port}")
                    self.deployment_id = answer["deployment_id"]
                    self.deployment_slug = answer["deployment_slug"]
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"emulator not healthy after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the emulator's output."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Terminate the emulator's process group (by its pid) and wait for it."""
        self.close()
        stop_process_group(self._process)
        if self._own_log:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def connection_json(self, *, token: str | None = None, **extra: Any) -> str:
        """An ``AIRFLOW_CONN_*`` value (JSON) of a ``findings_api`` connection to this emulator.

        ``token`` replaces the emulator's token; ``extra`` adds connection extras (``timeout``, ``max_retries``...).
        """
        return json.dumps({
            "conn_type": "findings_api",
            "host": self.base_url,
            "password": self.token if token is None else token,
            "extra": {"deployment_slug": self.deployment_slug, "deployment_id": self.deployment_id, **extra},
        })

