"""``dag.test()`` runs of the pipeline DAGs in a long-lived subprocess with its own migrated AIRFLOW_HOME.

Used by the chaos, security and DAG suites. The subprocess reads one JSON command per line and runs
one DAG per command, so the test session's own Airflow settings stay untouched. Added here: per-run environment
changes (the API connection, with fast retry settings, or another token), task retries switched off (a failing
task fails the run at once: "fails loudly"; the test reruns), and everything printed kept for the token scan.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from findings_emulator.testing import EmulatorProcess

from chaos.harness import api_connection, tally, warehouse_uri

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"
PYTHON = sys.executable

RUNNER = textwrap.dedent(
    """
    import json, os, sys, traceback
    from datetime import timedelta
    from airflow.dag_processing.dagbag import DagBag

    sys.path.insert(0, os.environ["FINDINGS_TESTS_PATH"])
    from airflow_version import share_the_in_process_execution_api
    share_the_in_process_execution_api()

    for line in sys.stdin:
        command = json.loads(line)
        os.environ.update(command.get("env") or {})
        try:
            bag = DagBag(dag_folder=command["path"])
            if command["dag_id"] not in bag.dags:
                raise RuntimeError(f"DAG not loaded: {bag.import_errors}")
            dag = bag.dags[command["dag_id"]]
            if command.get("retries") is not None:
                for task in dag.tasks:
                    task.retries = command["retries"]
                    task.retry_delay = timedelta(seconds=0)
            approver = None
            if command.get("answer"):
                from hitl import Approver
                approver = Approver(dag.dag_id, command["answer"]["task_id"], command["answer"]["choice"])
                approver.start()
            try:
                run = dag.test(run_conf=command.get("conf") or {},
                               mark_success_pattern=command.get("mark_success"))
            finally:
                if approver is not None:
                    approver.done.set()
                    approver.join(timeout=5)
            from airflow.models.asset import AssetEvent, AssetModel
            from airflow.utils.session import create_session
            from sqlalchemy import select
            with create_session() as session:
                events = session.execute(
                    select(AssetModel.uri).join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
                    .where(AssetEvent.source_dag_id == run.dag_id, AssetEvent.source_run_id == run.run_id)
                ).scalars().all()
            result = {"state": str(run.state), "run_id": run.run_id, "asset_events": sorted(events),
                      "tis": {f"{ti.task_id}" + (f"[{ti.map_index}]" if ti.map_index >= 0 else ""): str(ti.state)
                              for ti in run.get_task_instances()}}
        except Exception as exc:
            result = {"error": type(exc).__name__, "message": str(exc), "trace": traceback.format_exc()[-3000:]}
        print("RESULT " + json.dumps(result), flush=True)
    """
)


#: How long one ``dag.test()`` run may take before it counts as hung. A guard against a hang, not a speed target:
#: beside the main suite, ``make test`` runs the lowest-Airflow suite at a lower CPU priority, where a run that
#: takes 30 s on an idle machine can take minutes while the Airflow stacks hold both cores.
RUN_TIMEOUT = 900.0


@dataclass
class RunResult:
    state: str | None
    tis: dict[str, str]
    output: str
    error: str | None = None
    message: str = ""
    run_id: str | None = None
    #: URIs of the Asset events the run emitted.
    asset_events: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state == "success"

    def failed_tasks(self) -> list[str]:
        return sorted(t for t, s in self.tis.items() if s in ("failed", "upstream_failed"))


@dataclass
class Stack:
    """An emulator, a migrated AIRFLOW_HOME, a warehouse file, a test copy of pipeline.yaml and the runner."""

    emulator: EmulatorProcess
    work: Path
    home: Path
    warehouse: Path
    reports: Path
    process: subprocess.Popen
    stderr_path: Path
    suite: str = "chaos"
    outputs: list[str] = field(default_factory=list)

    def run(self, dag_id: str, conf: dict[str, Any] | None = None, *, env: dict[str, str] | None = None,
            retries: int | None = 0, mark_success: str | None = None, answer: tuple[str, str] | None = None,
            timeout: float = RUN_TIMEOUT) -> RunResult:
        """One ``dag.test()`` run; ``env`` (e.g. another API connection) applies to this and later runs.

        ``answer``: (task id, choice) of an approval task to answer as a person would (``tests/hitl.py``).
        """
        tally(f"dag_runs.{self.suite}.{dag_id}")
        command = {"dag_id": dag_id, "path": str(DAGS / f"{dag_id}.py"), "conf": conf, "env": env or {},
                   "retries": retries, "mark_success": mark_success,
                   "answer": {"task_id": answer[0], "choice": answer[1]} if answer else None}
        assert self.process.stdin
        assert self.process.stdout
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the dag.test runner exited:\n" + "".join(lines[-80:]) + self.stderr_tail())
            if line.startswith("RESULT "):
                output = "".join(lines)
                self.outputs.append(output)
                data = json.loads(line[7:])
                return RunResult(data.get("state"), data.get("tis") or {}, output, data.get("error"),
                                 data.get("message", "") + data.get("trace", ""), data.get("run_id"),
                                 data.get("asset_events") or [])
            lines.append(line)
        raise TimeoutError(f"{dag_id} did not finish in {timeout} s")

    def connect(self, token: str | None = None, **extra: Any) -> dict[str, str]:
        """The environment of an API connection to this stack's emulator (fast retries by default)."""
        kwargs: dict[str, Any] = {"timeout": 1.0, "max_retries": 3, **extra}
        if token is not None:
            kwargs["token"] = token
        return {"AIRFLOW_CONN_FINDINGS_API_DEFAULT": api_connection(self.emulator, **kwargs)}

    def stderr_tail(self, chars: int = 4000) -> str:
        try:
            return "\n--- runner stderr ---\n" + self.stderr_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@contextmanager
def dag_stack(work: Path, emulator: EmulatorProcess, *, config: dict[str, Any] | None = None,
              suite: str = "chaos", api_extra: dict[str, Any] | None = None) -> Iterator[Stack]:
    """Start the runner against ``emulator``; ``config`` is merged into a copy of include/pipeline.yaml.

    ``api_extra`` overrides the API connection's extras (default: fast retries, ``timeout`` 1 s, for fault runs).
    """
    home = work / "airflow_home"
    home.mkdir(parents=True, exist_ok=True)
    pipeline = yaml.safe_load((ROOT / "include" / "pipeline.yaml").read_text())
    pipeline["scan_monitoring"].update(sensor_poke_interval=0.3, sensor_timeout=60)
    for section, values in (config or {}).items():
        pipeline.setdefault(section, {}).update(values)
    config_path = work / "pipeline.yaml"
    config_path.write_text(yaml.safe_dump(pipeline))
    (work / "projects.yaml").write_text((ROOT / "include" / "projects.yaml").read_text())
    warehouse = work / "warehouse.db"
    reports = work / "reports"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_FINDINGS_API_DEFAULT": api_connection(
            emulator, **{"token": emulator.token, "timeout": 1.0, "max_retries": 3, **(api_extra or {})}
        ),
        "AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT": warehouse_uri(warehouse),
        "FINDINGS_PIPELINE_CONFIG": str(config_path),
        "FINDINGS_REPORT_DIR": str(reports),
        "PYTHONUNBUFFERED": "1",
        "FINDINGS_TESTS_PATH": str(ROOT / "tests"),
    }
    subprocess.run([str(Path(PYTHON).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    script = work / "runner.py"
    script.write_text(RUNNER)
    stderr_path = work / "runner.stderr"
    with open(stderr_path, "w") as errors:
        process = subprocess.Popen([PYTHON, str(script)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=errors, text=True, bufsize=1)
        stack = Stack(emulator, work, home, warehouse, reports, process, stderr_path, suite)
        try:
            yield stack
        finally:
            if process.stdin:
                process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
