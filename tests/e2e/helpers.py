"""Helpers of the end-to-end suites: the test pipeline configuration, the pipeline run, warehouse queries.

The run of the pipeline is done ONCE per stack (see ``run_pipeline``) and every test asserts on its result.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml
from findings_provider.names import PIPELINE_DAGS
from present import present

from devtools.airflow_api import TERMINAL_RUN_STATES, AirflowApi, RunWatch
from devtools.environment import REPO
from devtools.services import skip_or_fail  # noqa: F401 (used by the e2e tests through this module)
from devtools.stack import Stack, StackError

ARTIFACTS = REPO / "test-artifacts"

#: Seconds a RUNNING scan created through the emulator's admin route takes to finish: long enough that the
#: sensor must defer (it checks once before deferring) and stays deferred for a while, short enough for the suite
#: (scan_monitoring runs beside the extraction -> triage -> tickets chain, which takes longer anyway).
#: A deferral of only a few seconds also makes Airflow 3.3's stale-executor-event race likely (apache/airflow#71580:
#: the resumed attempt is marked up_for_retry and succeeds in a second try).
SCAN_FINISH_AFTER = 45.0
#: Sensor poll interval in the triggerer for the tests (include/pipeline.yaml says 30 s).
TEST_POKE_INTERVAL = 2
#: The scan that ends in SCAN_STATUS_ERROR: still running when the second scan_monitoring run searches.
FAILING_SCAN_AFTER = 25.0
SENSOR_TASK = "wait_for_scan"
#: The e2e stack's Deadline alert on scan_monitoring: its runs wait for scans far longer, so each misses it.
SCAN_MONITORING_DEADLINE_MINUTES = 0.1
SCAN_TRIGGER_CLASSPATH = "findings_provider.triggers.scan.ScanStatusTrigger"


def write_test_pipeline_config(dest_dir: Path, alerts: dict[str, Any] | None = None) -> Path:
    """A copy of ``include/pipeline.yaml`` for the tests: no schedules (no scheduled runs besides the ones the
    tests trigger and the Asset chain), a short sensor poll interval, the repository's ``projects.yaml``;
    ``alerts``: the alerts section (default: the shipped one, no channel)."""
    source = REPO / "include" / "pipeline.yaml"
    config = yaml.safe_load(source.read_text())
    if alerts is not None:
        config["alerts"] = alerts
    for section in config.values():
        if isinstance(section, dict) and "schedule" in section:
            section["schedule"] = None
    config.setdefault("scan_monitoring", {})["sensor_poke_interval"] = TEST_POKE_INTERVAL
    projects = (source.parent / config.get("project_settings", {}).get("file", "projects.yaml")).resolve()
    config.setdefault("project_settings", {})["file"] = str(projects)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / "pipeline.yaml"
    dest.write_text("# Written by tests/e2e/helpers.py from include/pipeline.yaml\n" + yaml.safe_dump(config))
    return dest


# --- services ---------------------------------------------------------------------------------------------------




# --- warehouse ------------------------------------------------------------------------------------------------


def warehouse_engine(stack: Stack) -> sa.Engine:
    url = stack.warehouse_url
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg2://" + url[len("postgresql://") :]
    return sa.create_engine(url)


def scalar(engine: sa.Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def rows(engine: sa.Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]


def table_names(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


# --- the pipeline run ------------------------------------------------------------------------------------------


@dataclass
class PipelineResult:
    """Every run the suite triggered (``manual``: dag_id -> watch), plus all runs seen at the end."""

    manual: dict[str, RunWatch] = field(default_factory=dict)
    extra: dict[str, RunWatch] = field(default_factory=dict)  # e.g. the failing-scan run of scan_monitoring
    all_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    created_scan: dict[str, Any] = field(default_factory=dict)
    failing_scan: dict[str, Any] = field(default_factory=dict)
    request_seq_before: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def runs_of(self, dag_id: str, run_type: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.all_runs.get(dag_id, []) if run_type is None or r.get("run_type") == run_type]

    def summary(self) -> str:
        lines = [f"pipeline finished in {self.seconds:.0f}s"]
        for name, w in {**self.manual, **{f"{k} (extra)": v for k, v in self.extra.items()}}.items():
            lines.append(f"- {name}: {w.state} in {w.seconds:.0f}s ({w.run_id})")
        for dag_id, runs in sorted(self.all_runs.items()):
            lines.append(f"  {dag_id}: " + ", ".join(f"{r['run_type']}={r['state']}" for r in runs))
        lines += [f"! {e}" for e in self.errors]
        return "\n".join(lines)


class _Runner:
    """Triggers runs and polls every unfinished one each second (recording task instance states)."""

    def __init__(self, stack: Stack, poll: float = 1.0) -> None:
        self.stack = stack
        self.api: AirflowApi = stack.api
        self.poll = poll
        self.watches: list[RunWatch] = []
        self.actions: list[tuple[Callable[[], bool], Callable[[], None]]] = []
        self.start = time.monotonic()

    def when(self, condition: Callable[[], bool], action: Callable[[], None]) -> None:
        """Run ``action`` once, at the first poll where ``condition()`` holds."""
        self.actions.append((condition, action))

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, tag: str = "") -> RunWatch:
        run_id = f"e2e_{tag or 'run'}__{dag_id}__{int(time.time() * 1000)}"
        run = self.api.trigger(dag_id, conf=conf, run_id=run_id, note=f"triggered by the e2e suite ({tag})")
        watch = RunWatch(dag_id, run["dag_run_id"])
        self.watches.append(watch)
        return watch

    def refresh(self) -> None:
        self.stack.check_alive()
        for w in self.watches:
            if w.state in TERMINAL_RUN_STATES:
                continue
            w.run = self.api.run(w.dag_id, w.run_id)
            w.task_instances = self.api.task_instances(w.dag_id, w.run_id)
            w.observe(w.task_instances)
            w.seconds = time.monotonic() - self.start
        for item in list(self.actions):
            if item[0]():
                self.actions.remove(item)
                item[1]()

    def until(self, done: list[RunWatch], timeout: float) -> bool:
        """Poll until every watch in ``done`` finished; False on timeout (the caller records it)."""
        deadline = time.monotonic() + timeout
        while True:
            self.refresh()
            if all(w.state in TERMINAL_RUN_STATES for w in done) and (done is not self.watches or not self.actions):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(self.poll)

    def quiesce(self, timeout: float, settle: float = 6.0) -> bool:
        """Wait until no run of the pipeline DAGs is queued or running and none appeared for ``settle``
        seconds (the Asset chain schedules runs after others finish)."""
        deadline = time.monotonic() + timeout
        last_key: tuple | None = None
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            self.refresh()
            runs = self.api.get("/api/v2/dags/~/dagRuns", limit=500).get("dag_runs", [])
            runs = [r for r in runs if r["dag_id"] in PIPELINE_DAGS]
            key = tuple(sorted((r["dag_id"], r["dag_run_id"], r["state"]) for r in runs))
            busy = any(r["state"] not in TERMINAL_RUN_STATES for r in runs)
            if key != last_key or busy:
                last_key, stable_since = key, time.monotonic()
            elif time.monotonic() - stable_since >= settle:
                return True
            time.sleep(self.poll)
        return False


def run_pipeline(stack: Stack, dags: tuple[str, ...] = PIPELINE_DAGS, timeout: float = 360.0) -> PipelineResult:
    """Trigger ``dags`` through the REST API the way a user would, and wait until everything has settled.

    Order: phase 1 (in parallel) scan_monitoring (after adding a RUNNING scan to the emulator that finishes in
    ``SCAN_FINISH_AFTER`` s), findings_extraction, project_settings, dependency_inventory; phase 2, once the
    warehouse holds findings: autotriage_triage, policy_tuning (dry run); phase 3: ticket_creation. When the
    first scan_monitoring run is over, a second one with a scan that fails. Then wait until the Asset chain has
    no more runs to start. A DAG run that fails or times out is recorded, never raised: the tests assert on each.
    ``timeout`` bounds the whole of it (seconds).
    """
    result = PipelineResult()
    runner = _Runner(stack)
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    def trigger(dag_id: str) -> RunWatch | None:
        if dag_id not in dags:
            return None
        watch = runner.trigger(dag_id, tag="manual")
        result.manual[dag_id] = watch
        return watch

    with stack.emulator_admin() as admin:
        result.request_seq_before = max((r["seq"] for r in admin.requests()), default=0)
        for dag_id in dags:
            stack.api.set_paused(dag_id, False)
        if "scan_monitoring" in dags:
            result.created_scan = admin.create_scan(status="SCAN_STATUS_RUNNING", finish_after=SCAN_FINISH_AFTER)
            first_scan_run = trigger("scan_monitoring")

            # Once the first scan_monitoring run is over: a second run, with a RUNNING scan that ends in
            # SCAN_STATUS_ERROR while the run waits for it; alert_failed_scans must mail an alert naming the scan.
            def failing_scan_run() -> None:
                result.failing_scan = admin.create_scan(status="SCAN_STATUS_RUNNING", finish_after=FAILING_SCAN_AFTER,
                                                        final_status="SCAN_STATUS_ERROR")
                result.extra["scan_monitoring"] = runner.trigger("scan_monitoring", tag="failing_scan")

            runner.when(lambda: present(first_scan_run).state in TERMINAL_RUN_STATES, failing_scan_run)
        extraction = trigger("findings_extraction")
        trigger("project_settings")
        trigger("dependency_inventory")
        if extraction is not None and not runner.until([extraction], left()):
            result.errors.append(f"findings_extraction did not finish within {timeout:.0f}s")

        triage = trigger("autotriage_triage")
        trigger("policy_tuning")
        if triage is not None and not runner.until([triage], left()):
            result.errors.append(f"autotriage_triage did not finish within {timeout:.0f}s")

        trigger("ticket_creation")
        if not runner.until(runner.watches, left()):
            result.errors.append("some triggered runs did not finish: "
                                 + ", ".join(f"{w.dag_id}={w.state}" for w in runner.watches
                                             if w.state not in TERMINAL_RUN_STATES))
        if not runner.quiesce(timeout=min(180.0, left())):
            result.errors.append("the Asset chain was still scheduling or running runs at the deadline")
    for dag_id in dags:
        result.all_runs[dag_id] = stack.api.runs(dag_id)
    result.seconds = time.monotonic() - runner.start
    return result


# --- stacks of the session -----------------------------------------------------------------------------------

#: Every stack currently up in this session (their logs are collected when a test fails).
ACTIVE_STACKS: list[tuple[str, Stack]] = []
#: Start-up and pipeline timings, printed at the end of the session.
TIMINGS: dict[str, float] = {}

# The emulator data of the e2e stacks: 5000 findings (two pages of 3000 code findings), and no generated scans
# (the generated ones include failed and never-finished scans, whose alerts would blur the ones the tests check);
# the suite adds the scans it needs through the admin route (POST /_emulator/scans).
E2E_EMULATOR_ARGS = ("--scans", "0", "--sbom-polls", "2")
#: Where the SQLite stack mails its alerts (to the session's SMTP server, ``inbox``).
ALERTS_TO = "appsec@example.test"


def start_stack(name: str, stack: Stack) -> Stack:
    """Start ``stack``; on failure keep its logs under test-artifacts/ and re-raise."""
    try:
        stack.start()
    except BaseException as exc:
        stack.stop()
        dest = stack.collect_artifacts(artifact_dir(f"{name}-startup"))
        if isinstance(exc, StackError):
            raise StackError(f"{exc}\n(logs kept in {dest})") from None
        raise
    ACTIVE_STACKS.append((name, stack))
    TIMINGS[f"{name} start (command -> healthy, DAGs parsed)"] = stack.ready_after or 0.0
    return stack


def stop_stack(name: str, stack: Stack) -> None:
    t = time.monotonic()
    stack.stop(grace=5.0)  # throwaway data: no need to wait long for running tasks
    TIMINGS[f"{name} stop"] = time.monotonic() - t
    if (name, stack) in ACTIVE_STACKS:
        ACTIVE_STACKS.remove((name, stack))


# --- artifacts --------------------------------------------------------------------------------------------------


def artifact_dir(name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:150]
    path = ARTIFACTS / safe
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path
