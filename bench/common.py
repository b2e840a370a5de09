"""Shared pieces of the benchmark scripts: child processes, warehouses, machine facts, statistics.

Every measurement of the product runs in a child process of its own (``run_child``), so that its peak RSS is the
extracting process's only. A child writes one JSON object to the path given by ``--out``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # the repository's root, for devtools
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from devtools.services import Postgres

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
NAIVE_PAGE_SIZE = 100


# --- inside a child ----------------------------------------------------------------------------------------------


def scratch_airflow_home() -> None:
    """Give this process an empty ``AIRFLOW_HOME`` of its own, removed when it exits, unless one is set."""
    if "AIRFLOW_HOME" not in os.environ:
        home = tempfile.mkdtemp(prefix="bench-airflow-home-")
        atexit.register(shutil.rmtree, home, True)
        os.environ["AIRFLOW_HOME"] = home


def emulator_arguments(parser: Any, *, deployment_id: bool = True) -> None:
    """The command-line arguments every benchmark child takes: where the emulator and the database are."""
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--slug", required=True)
    if deployment_id:
        parser.add_argument("--deployment-id", required=True)
    parser.add_argument("--database-url", required=True)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports ``ru_maxrss`` in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_peak_rss_mb() -> float:
    """Peak resident set size of the largest child process waited for so far (the extraction's worker process),
    in MB; its pages shared with this process (forked) count in both."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def children_cpu_seconds() -> float:
    """CPU seconds of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def current_rss_mb() -> float:
    """Current resident set size of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON."""
    Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")


def reset_sqlite(path: str | Path) -> None:
    """Delete a SQLite database file with its WAL and shared-memory files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def checkpoint(database_url: str) -> None:
    """Flush dirty pages before a timed run so it does not pay for the previous one (PostgreSQL: CHECKPOINT;
    SQLite: a truncating WAL checkpoint)."""
    if database_url.startswith("sqlite"):
        path = database_url.split(":///", 1)[1]
        if Path(path).exists():
            conn = sqlite3.connect(path)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
        return
    server, database = Postgres.parse(database_url)
    server.checkpoint(database)


def reset_database(database_url: str) -> None:
    """Empty the warehouse named by ``database_url`` (a SQLite file or a PostgreSQL database: a fresh ``public``
    schema, then a checkpoint)."""
    if database_url.startswith("sqlite"):
        reset_sqlite(database_url.split(":///", 1)[1])
    else:
        server, database = Postgres.parse(database_url)
        server.empty_database(database)
        server.checkpoint(database)


# --- in the orchestrator ------------------------------------------------------------------------------------------


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of a child: the project's packages importable, Airflow quiet and self-contained."""
    env = dict(os.environ)
    paths = [str(PROJECT_DIR / "plugins"), str(PROJECT_DIR / "include"), str(BENCH_DIR)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.update(extra or {})
    return env


def run_child(script: str, args: Sequence[str], out: Path, log: Path, *, env: dict[str, str] | None = None,
              timeout: float = 3600) -> dict[str, Any]:
    """Run ``bench/<script>`` in a fresh interpreter; return the JSON it wrote to ``out``.

    Its output goes to ``log``; a failure raises with the end of that log.
    """
    out.unlink(missing_ok=True)
    load_before = os.getloadavg()[0]
    command = [sys.executable, str(BENCH_DIR / script), *args, "--out", str(out)]
    with open(log, "ab") as handle:
        handle.write(f"\n$ {' '.join(command)}\n".encode())
        handle.flush()
        completed = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env or child_env(),
                                   timeout=timeout, check=False, cwd=PROJECT_DIR)
    if completed.returncode != 0 or not out.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{script} {' '.join(args)} failed with exit code {completed.returncode}:\n{tail}")
    result = dict(json.loads(out.read_text()))
    # the 1-minute load average around the run: other work on the machine slows wall-clock figures
    result["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def median(values: Iterable[float]) -> float:
    """Median of the values (NaN when there are none)."""
    values = list(values)
    return statistics.median(values) if values else float("nan")


def expected_requests(count: int, page_size: int) -> int:
    """The target number of list requests for ``count`` findings of one type: ceil(count/page_size) + 1."""
    return math.ceil(count / page_size) + 1


def minimal_requests(count: int, page_size: int) -> int:
    """Requests an offset pull needs at least: the full pages, plus one short or empty last page."""
    return count // page_size + 1


# --- machine facts ------------------------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def machine_facts(admin_url: str | None) -> dict[str, Any]:
    """CPU model, cores, RAM, OS, Python, library and database versions, date."""
    from importlib.metadata import PackageNotFoundError, version

    postgresql = None
    if admin_url:
        with contextlib.suppress(Exception):  # unreachable: no version
            postgresql = Postgres.parse(admin_url)[0].version()
    packages: dict[str, str | None] = {}
    for name in ("apache-airflow", "httpx", "msgspec", "orjson", "SQLAlchemy", "psycopg2-binary", "fastapi",
                 "uvicorn"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": postgresql,
        "packages": packages,
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


class Stopwatch:
    """``with Stopwatch() as s: ...``; then ``s.seconds``."""

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
