"""docker-compose.yaml started for real: every component healthy, the pipeline run through the REST API.

Official images cannot be pulled on the CI machines, so the stack runs on stand-ins of them built by
``docker/standin/build.sh`` on a local debootstrap Debian base (Debian's PostgreSQL and Redis; Python with Airflow
from the pinned requirements.txt and constraints.txt), given to the compose file through POSTGRES_IMAGE,
REDIS_IMAGE and docker/Dockerfile's build argument AIRFLOW_BASE_IMAGE. The project image is built by
docker-compose itself (``docker-compose build``), then ``docker-compose --profile emulator up -d`` starts the
stack as its users start it. The test waits for every health check, logs in as the compose file's admin user,
runs ``findings_extraction`` (a full refresh, beside the scheduled run that unpausing makes) and checks that the
runs succeed, that their tasks ran on the two Celery workers, that the warehouse holds every finding the runs
pulled and that the report reached the reports volume. ``down -v`` at the end; a Docker daemon the test started
is stopped by its PID. Images stay in Docker's cache (/var/lib/docker): the base is keyed on its inputs, the rest
rebuilt by Docker's layer cache when an input (a Dockerfile, requirements.txt, constraints.txt, the sources)
changes. The stack's logs and the phase timings are kept in ``test-artifacts/compose/``.

Needs root, Debian's docker.io, docker-compose and debootstrap (``make compose-deps``): skipped without them,
failed with REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.airflow_api import AirflowApi, ApiError, RunWatch
from devtools.services import skip_or_fail

pytestmark = [pytest.mark.compose, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
ARTIFACTS = REPO / "test-artifacts" / "compose"
PROJECT = "findings_compose_test"
PROJECT_IMAGE = "findings-airflow:compose-test"
DAG_ID = "findings_extraction"
LONG_RUNNING = ("postgres", "redis", "findings-emulator", "airflow-apiserver", "airflow-scheduler",
                "airflow-dag-processor", "airflow-triggerer", "airflow-worker")
WORKERS = 2
HEALTHY_WITHIN = 480.0
RUN_WITHIN = 420.0
_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}")


def _default(value: Any) -> str:
    """The compose file's value with each ``${VAR:-default}`` at its default."""
    return _DEFAULT.sub(lambda m: m.group(1), str(value))


@dataclass
class Timings:
    phases: list[tuple[str, float]] = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.phases.append((name, time.monotonic() - start))
            self.write()

    def write(self) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        lines = [f"{name}: {seconds:.1f} s" for name, seconds in self.phases]
        lines.append(f"total: {sum(s for _, s in self.phases):.1f} s")
        (ARTIFACTS / "timings.txt").write_text("\n".join(lines) + "\n")


def _tail(output: bytes | str | None) -> str:
    """The end of a timed-out command's output (``TimeoutExpired`` holds bytes, even with ``text=True``)."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output or ""
    return text[-3000:]


def _run(cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, check: bool = True,
         what: str = "") -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what or cmd[0]} did not finish within {timeout:.0f} s: {' '.join(cmd)}\n"
                    f"{_tail(exc.stdout)}{_tail(exc.stderr)}", pytrace=False)
    if check and result.returncode != 0:
        pytest.fail(f"{what or cmd[0]} failed ({result.returncode}): {' '.join(cmd)}\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}", pytrace=False)
    return result


def _docker_cli() -> str | None:
    # the client of the installed engine first (another docker on PATH may be a newer, unrelated client)
    for candidate in ("/usr/bin/docker", shutil.which("docker")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _daemon_answers(docker: str) -> bool:
    try:
        return subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@contextlib.contextmanager
def _docker_daemon(docker: str) -> Iterator[None]:
    """The running Docker daemon, or one started here (and stopped by its PID at the end)."""
    if _daemon_answers(docker):
        yield
        return
    dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if os.access("/usr/sbin/dockerd", os.X_OK) else None)
    if dockerd is None:
        skip_or_fail("no Docker daemon runs and dockerd is not installed (make compose-deps)")
    if os.geteuid() != 0:
        skip_or_fail("no Docker daemon runs, and starting dockerd needs root")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / "dockerd.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([dockerd], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not _daemon_answers(docker):
            if proc.poll() is not None:
                pytest.fail(f"dockerd exited ({proc.returncode}):\n{log_path.read_text()[-4000:]}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"dockerd did not answer within 90 s:\n{log_path.read_text()[-4000:]}", pytrace=False)
            time.sleep(0.5)
        yield
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ComposeStack:
    docker: str
    env: dict[str, str]
    base_url: str
    username: str
    password: str
    warehouse_user: str
    timings: Timings
    containers: list[dict[str, Any]] = field(default_factory=list)

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = ["docker-compose", "-f", str(COMPOSE_FILE), "-p", PROJECT, "--profile", "emulator", *args]
        return _run(cmd, timeout=timeout, env=self.env, check=check, what="docker-compose " + args[0])

    def inspect(self) -> list[dict[str, Any]]:
        ids = _run([self.docker, "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"],
                   timeout=60, env=self.env).stdout.split()
        if not ids:
            return []
        return json.loads(_run([self.docker, "inspect", *ids], timeout=60, env=self.env).stdout)

    def by_service(self) -> dict[str, list[dict[str, Any]]]:
        services: dict[str, list[dict[str, Any]]] = {}
        for c in self.inspect():
            services.setdefault(c["Config"]["Labels"]["com.docker.compose.service"], []).append(c)
        return services

    def logs(self, *services: str, tail: int | None = None) -> str:
        args = ["logs", "--no-color"] + ([f"--tail={tail}"] if tail else []) + list(services)
        return self.compose(*args, timeout=120, check=False).stdout

    def status(self) -> str:
        return self.compose("ps", timeout=60, check=False).stdout

    def exec(self, service: str, *cmd: str, index: int = 1) -> str:
        return self.compose("exec", "-T", f"--index={index}", service, *cmd, timeout=120).stdout

    def worker_hostnames(self) -> set[str]:
        return {c["Config"]["Hostname"] for c in self.by_service().get("airflow-worker", [])}


def _state(container: dict[str, Any]) -> str:
    state = container["State"]
    health = (state.get("Health") or {}).get("Status")
    return f"{state['Status']}" + (f"/{health}" if health else "") + (
        f" exit {state['ExitCode']}" if state["Status"] == "exited" else "")


def _wait_healthy(stack: ComposeStack) -> None:
    """Until the init job exited 0 and every long-running container (two workers) is healthy; fail fast."""
    deadline = time.monotonic() + HEALTHY_WITHIN
    while True:
        services = stack.by_service()
        problems, waiting = [], []
        init = services.get("airflow-init", [])
        if not init or init[0]["State"]["Status"] != "exited":
            waiting.append("airflow-init: " + (_state(init[0]) if init else "missing"))
        elif init[0]["State"]["ExitCode"] != 0:
            problems.append(f"airflow-init: {_state(init[0])}")
        for name in LONG_RUNNING:
            containers = services.get(name, [])
            expected = WORKERS if name == "airflow-worker" else 1
            if len(containers) != expected:
                problems.append(f"{name}: {len(containers)} containers, expected {expected}")
            for c in containers:
                state = c["State"]
                health = (state.get("Health") or {}).get("Status")
                if state["Status"] != "running" or c.get("RestartCount", 0) or health == "unhealthy":
                    problems.append(f"{c['Name']}: {_state(c)}, restarts {c.get('RestartCount', 0)}")
                elif health != "healthy":
                    waiting.append(f"{c['Name']}: {_state(c)}")
        stack.containers = [c for cs in services.values() for c in cs]
        if problems or (waiting and time.monotonic() > deadline):
            pytest.fail("the stack did not become healthy"
                        + (f" within {HEALTHY_WITHIN:.0f} s" if not problems else "") + ":\n  "
                        + "\n  ".join(problems + waiting) + f"\n{stack.status()}\n"
                        + stack.logs(tail=40)[-12000:], pytrace=False)
        if not waiting:
            return
        time.sleep(3)


@pytest.fixture(scope="module")
def stack() -> Iterator[ComposeStack]:
    docker = _docker_cli()
    if docker is None:
        skip_or_fail("the docker client is not installed (make compose-deps)")
    if shutil.which("docker-compose") is None:
        skip_or_fail("docker-compose is not installed (make compose-deps)")
    if shutil.which("debootstrap") is None and not os.access("/usr/sbin/debootstrap", os.X_OK):
        skip_or_fail("debootstrap is not installed (make compose-deps)")
    if os.geteuid() != 0:
        skip_or_fail("debootstrap (the stand-in images' base) needs root")

    config = yaml.safe_load(COMPOSE_FILE.read_text())
    init_env = config["services"]["airflow-init"]["environment"]
    port = _free_port()
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
            "DOCKER_TLS_VERIFY")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    env |= {"DOCKER": docker, "DOCKER_BUILDKIT": "0", "COMPOSE_DOCKER_CLI_BUILD": "0",
            "AIRFLOW_IMAGE_NAME": PROJECT_IMAGE, "AIRFLOW_UI_PORT": str(port)}
    timings = Timings()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with _docker_daemon(docker):
        with timings.phase("stand-in images (docker/standin/build.sh)"):
            out = _run(["bash", str(REPO / "docker" / "standin" / "build.sh")], timeout=1200, env=env,
                       what="docker/standin/build.sh").stdout
        images = dict(line.split("=", 1) for line in out.split() if "=" in line)
        env |= {"POSTGRES_IMAGE": images["POSTGRES_IMAGE"], "REDIS_IMAGE": images["REDIS_IMAGE"]}
        stack = ComposeStack(
            docker=docker, env=env, base_url=f"http://127.0.0.1:{port}",
            username=_default(init_env["_AIRFLOW_WWW_USER_USERNAME"]),
            password=_default(init_env["_AIRFLOW_WWW_USER_PASSWORD"]),
            warehouse_user=str(config["services"]["postgres"]["environment"]["POSTGRES_USER"]),
            timings=timings,
        )
        stack.compose("down", "-v", "--remove-orphans", timeout=300, check=False)  # leftovers of a killed run
        # Two killed runs started at once can leave two networks of one name, which "down" cannot tell apart: by id.
        networks = _run([docker, "network", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}"],
                        timeout=60, env=env, check=False).stdout.split()
        if networks:
            _run([docker, "network", "rm", *networks], timeout=120, env=env, check=False)
        old = _run([docker, "image", "inspect", "--format", "{{.Id}}", PROJECT_IMAGE], timeout=60, env=env,
                   check=False).stdout.strip()
        with timings.phase("project image (docker-compose build)"):
            stack.compose("build", "--build-arg", f"AIRFLOW_BASE_IMAGE={images['AIRFLOW_BASE_IMAGE']}",
                          "airflow-init", timeout=900)
        new = _run([docker, "image", "inspect", "--format", "{{.Id}}", PROJECT_IMAGE], timeout=60, env=env).stdout
        if old and old != new.strip():
            _run([docker, "rmi", old], timeout=120, env=env, check=False)
        try:
            with timings.phase("docker-compose up -d (init job done)"):
                stack.compose("up", "-d", "--no-build", timeout=900)
            with timings.phase("every health check passing"):
                _wait_healthy(stack)
            yield stack
        finally:
            (ARTIFACTS / "stack.log").write_text(stack.status() + "\n" + stack.logs())
            with timings.phase("docker-compose down -v"):
                stack.compose("down", "-v", "--remove-orphans", timeout=300, check=False)
            print("\n".join(f"compose stack: {n}: {s:.1f} s" for n, s in timings.phases))


@dataclass
class PipelineRuns:
    manual: RunWatch
    runs: list[RunWatch]
    result: dict[str, Any]
    report: dict[str, Any]


@pytest.fixture(scope="module")
def pipeline(stack: ComposeStack) -> Iterator[PipelineRuns]:
    api = AirflowApi(stack.base_url, stack.username, stack.password)
    try:
        with stack.timings.phase(f"{DAG_ID} runs"):
            deadline = time.monotonic() + 180
            while True:
                try:
                    api.dag(DAG_ID)
                    break
                except ApiError as exc:
                    if exc.status_code != 404 or time.monotonic() > deadline:
                        raise
                    time.sleep(2)
            errors = api.import_errors()
            assert not errors, [(e["filename"], e["stack_trace"][-1500:]) for e in errors]
            # a full refresh, queued first; unpausing also makes the scheduled run of the last interval
            manual_id = api.trigger(DAG_ID, conf={"full_refresh": True}, note="tests/compose")["dag_run_id"]
            api.set_paused(DAG_ID, False)
            manual = api.wait_for_run(DAG_ID, manual_id, timeout=RUN_WITHIN, poll=2)
            runs = [manual]
            for run in api.runs(DAG_ID):
                if run["dag_run_id"] != manual_id:
                    runs.append(api.wait_for_run(DAG_ID, run["dag_run_id"], timeout=RUN_WITHIN, poll=2))
            result = api.xcom(DAG_ID, manual_id, "extract_findings") if manual.state == "success" else {}
            report = api.xcom(DAG_ID, manual_id, "summarize_findings") if manual.state == "success" else {}
        yield PipelineRuns(manual, runs, result or {}, report or {})
    finally:
        api.close()


def test_every_component_is_healthy(stack: ComposeStack) -> None:
    services = {c["Config"]["Labels"]["com.docker.compose.service"] for c in stack.containers}
    assert {*LONG_RUNNING, "airflow-init"} <= services
    assert len(stack.worker_hostnames()) == WORKERS
    api = AirflowApi(stack.base_url)
    try:
        health = api.health()
    finally:
        api.close()
    for component in ("metadatabase", "scheduler", "triggerer", "dag_processor"):
        assert health[component]["status"] == "healthy", health


def test_findings_extraction_runs_succeed_on_the_celery_workers(stack: ComposeStack, pipeline: PipelineRuns) -> None:
    assert all(w.state == "success" for w in pipeline.runs), "\n".join(w.summary() for w in pipeline.runs)
    workers = stack.worker_hostnames()
    ran_on = {ti.get("hostname") for w in pipeline.runs for ti in w.task_instances}
    assert ran_on, pipeline.manual.summary()
    assert ran_on <= workers, f"tasks ran on {ran_on}, the Celery workers are {workers}"
    assert {ti["task_id"] for ti in pipeline.manual.task_instances} >= {
        "extract_findings", "publish_findings", "summarize_findings"}


def test_warehouse_holds_the_findings(stack: ComposeStack, pipeline: PipelineRuns) -> None:
    pulled = {t: r["unique"] for t, r in pipeline.result["issue_types"].items()}
    assert set(pulled) == {"sast", "sca"}, pipeline.result
    assert all(pulled.values()), pipeline.result
    out = stack.exec("postgres", "psql", "-U", stack.warehouse_user, "-d", "findings_warehouse", "-Atc",
                     "SELECT issue_type, count(*) FROM findings GROUP BY issue_type ORDER BY 1")
    stored = {t: int(n) for t, n in (line.split("|") for line in out.split())}
    assert stored == pulled, f"warehouse {stored}, the full refresh pulled {pulled}"


def test_report_reaches_the_reports_volume(stack: ComposeStack, pipeline: PipelineRuns) -> None:
    html = pipeline.report["report"]["html"]
    assert html.startswith("/opt/airflow/reports/"), pipeline.report
    owner = stack.exec("airflow-worker", "stat", "-c", "%u", "/opt/airflow/reports").strip()
    assert owner == "50000"
    for index in range(1, WORKERS + 1):  # one volume for both workers, whichever wrote it
        assert stack.exec("airflow-worker", "stat", "-c", "%s", html, index=index).strip() != "0"
