"""The stack's processes: free ports, one subprocess per component in its own process group, and stopping them
(the group by its id, then any descendant that escaped it). Nothing here is specific to Airflow."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``port`` can be bound on ``host`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def venv_bin() -> Path:
    """The ``bin`` directory of the running interpreter (the project's virtualenv)."""
    return Path(sys.executable).parent


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` of a log file (``(no log)`` when it cannot be read)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


@dataclass
class Component:
    """One subprocess of the stack, in its own process group."""

    name: str
    cmd: list[str]
    log_path: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM if the launcher dies without cleaning up (kill -9, crash)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to the process group ``pgid`` (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def descendants(pids: list[int]) -> list[int]:
    """Every descendant of ``pids`` (empty without psutil)."""
    try:
        import psutil
    except ImportError:  # psutil is a test dependency; the process groups cover the normal case
        return []
    found: list[int] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found += [p.pid for p in psutil.Process(pid).children(recursive=True)]
    return found


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` that still exists."""
    try:
        import psutil
    except ImportError:
        return
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            proc.kill()


def raise_keyboard_interrupt(*_: object) -> None:
    """Signal handler: SIGTERM/SIGHUP stop the stack the same way as Ctrl-C."""
    raise KeyboardInterrupt
