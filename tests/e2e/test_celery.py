"""Scale-out: the pipeline on Airflow's CeleryExecutor, Redis as broker, PostgreSQL as metadata database and as
warehouse, two ``airflow celery worker`` processes (plus API server, scheduler, DAG processor, triggerer).

Started once for this module by the same launcher as the SQLite stack (``devtools/stack.py``), on fresh
PostgreSQL databases (dropped afterwards), a Redis database of its own (``FINDINGS_REDIS_DB``, default 5) and a
Celery queue of its own (concurrent test sessions on one Redis do not steal each other's tasks).

Its emulator speaks the real service's dialect (``--dialect real``: flat findings envelope, spaces in
reachability, digit-string ids, ...), so the e2e extraction runs against both dialects (the SQLite stack's speaks the
reference's).

Skips with the reason when PostgreSQL (127.0.0.1:5432, users postgres or root) or Redis (127.0.0.1:6379) is not
reachable; with REQUIRE_SERVICES=1 (``.ci/run``) that is a failure instead.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.environment import CELERY, EmulatorOptions
from devtools.services import Postgres, find_postgres, find_redis
from devtools.stack import Stack

from .helpers import (
    E2E_EMULATOR_ARGS,
    TIMINGS,
    PipelineResult,
    rows,
    run_pipeline,
    scalar,
    skip_or_fail,
    start_stack,
    stop_stack,
    warehouse_engine,
    write_test_pipeline_config,
)

pytestmark = [pytest.mark.e2e, pytest.mark.celery]

CELERY_DAGS = ("findings_extraction", "project_settings", "dependency_inventory", "autotriage_triage",
               "ticket_creation")
WORKERS = 2
_EXECUTED = re.compile(r"Executing workload in Celery: .*?ti=TaskInstanceDTO\(id=UUID\('([0-9a-f-]+)'\)")


def _preflight() -> tuple[Postgres, str]:
    pg, why = find_postgres()
    if pg is None:
        skip_or_fail(why)
    redis_url, why = find_redis()
    if redis_url is None:
        skip_or_fail(why)
    try:
        import asyncpg  # noqa: F401 - Airflow 3 opens an async engine on its PostgreSQL metadata database
    except ImportError:
        skip_or_fail("asyncpg is not installed: Airflow 3 needs it for a PostgreSQL metadata database "
                     "(add asyncpg to requirements.txt)")
    try:
        import airflow.providers.celery.executors.celery_executor_utils  # noqa: F401
    except ImportError as exc:
        skip_or_fail(f"the Celery provider does not import with this celery version: {exc}")
    assert pg is not None
    assert redis_url is not None
    return pg, redis_url


@pytest.fixture(scope="module")
def celery_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    pg, redis_url = _preflight()
    base = tmp_path_factory.mktemp("celery")
    queue = f"findings-e2e-{secrets.token_hex(4)}"
    meta = pg.create_database("findings_e2e_meta")
    warehouse = pg.create_database("findings_e2e_warehouse")
    try:
        stack = Stack(
            Path(base) / "airflow",
            executor=CELERY,
            metadata_db_url=pg.url(meta, driver="postgresql+psycopg2"),
            warehouse_url=pg.url(warehouse),  # the interface's form; the provider drives it with psycopg2
            broker_url=redis_url,
            celery_workers=WORKERS,
            celery_concurrency=2,
            celery_queue=queue,
            pipeline_config=write_test_pipeline_config(Path(base)),
            # the real service's dialect here (the SQLite stack's emulator serves the reference's)
            emulator=EmulatorOptions(token="e2e-token", findings=5000,
                                     extra_args=(*E2E_EMULATOR_ARGS, "--dialect", "real")),
            fast=True,
            progress=lambda msg: print(f"[celery stack] {msg}", flush=True),
        )
        start_stack("celery", stack)
        try:
            yield stack
        finally:
            stop_stack("celery", stack)
    finally:
        for name in (meta, warehouse):
            pg.drop_database(name)
        _forget_queue(redis_url, queue)


def _forget_queue(redis_url: str, queue: str) -> None:
    """Remove what Celery left in Redis for this run's queue (its bindings and any message left in it)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = [k for k in client.scan_iter(match=f"*{queue}*", count=500)]
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(scope="module")
def celery_pipeline(celery_stack: Stack) -> PipelineResult:
    result = run_pipeline(celery_stack, dags=CELERY_DAGS)
    TIMINGS["celery pipeline (extraction, settings, inventory, triage, tickets + Asset chain)"] = result.seconds
    print(result.summary(), flush=True)
    return result


def test_stack_runs_celery_on_postgres_and_redis(celery_stack: Stack) -> None:
    health = celery_stack.api.health()
    assert {k: v.get("status") for k, v in health.items()} == {
        "metadatabase": "healthy", "scheduler": "healthy", "triggerer": "healthy", "dag_processor": "healthy",
    }
    env = celery_stack.env()
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
    assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")
    assert env["AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT"].startswith("postgresql://")


def test_two_workers_answer_on_the_broker(celery_stack: Stack) -> None:
    from celery import Celery

    app = Celery(broker=celery_stack.broker_url)
    ours = [celery_stack.celery_hostname(i, expand=True) for i in range(1, WORKERS + 1)]
    try:
        replies = app.control.ping(destination=ours, timeout=10.0, limit=len(ours))
    finally:
        app.close()
    names = {name for reply in replies for name in reply}
    assert set(ours) <= names, replies


def test_dag_runs_succeeded_on_celery(celery_stack: Stack, celery_pipeline: PipelineResult) -> None:
    assert not celery_pipeline.errors, celery_pipeline.summary()
    for dag_id in CELERY_DAGS:
        watch = celery_pipeline.manual[dag_id]
        assert watch.state == "success", watch.summary()
        queues = {t.get("queue") for t in watch.task_instances if t.get("state") == "success"}
        assert queues == {celery_stack.celery_queue}, queues
    for dag_id in ("autotriage_triage", "ticket_creation"):
        chained = celery_pipeline.runs_of(dag_id, "asset_triggered")
        assert chained, celery_pipeline.summary()
        assert {r["state"] for r in chained} == {"success"}, celery_pipeline.summary()


#: The pipeline's tasks that wait in the triggerer (their DAGs defer them whatever Airflow's default).
DEFERRING_TASKS = {"wait_for_scan", "export_sboms"}


def test_tasks_were_spread_over_both_workers(celery_stack: Stack, celery_pipeline: PipelineResult) -> None:
    """Each worker's log names the task instances it executed (Airflow's "Executing workload in Celery" line)."""
    executed: dict[str, set[str]] = {}
    for i in range(1, WORKERS + 1):
        text = celery_stack.log_of(f"celery-worker-{i}").read_text(errors="replace")
        executed[f"worker{i}"] = set(_EXECUTED.findall(text))
    ran = {str(t["id"]) for w in celery_pipeline.manual.values() for t in w.task_instances
           if t.get("state") == "success"}
    everywhere = set().union(*executed.values())
    assert ran <= everywhere, f"task instances no worker log mentions: {ran - everywhere}"
    assert all(executed.values()), {k: len(v) for k, v in executed.items()}
    # a task that defers is executed twice (before its deferral, then to resume), on whichever worker is free
    resumed = {str(t["id"]) for w in celery_pipeline.manual.values() for t in w.task_instances
               if t.get("task_id") in DEFERRING_TASKS}
    both = executed["worker1"] & executed["worker2"]
    assert not (both - resumed), f"a task instance that never defers ran on both workers: {both - resumed}"


def test_postgres_warehouse_holds_the_results(celery_stack: Stack, celery_pipeline: PipelineResult) -> None:
    engine = warehouse_engine(celery_stack)
    assert engine.dialect.name == "postgresql"
    with celery_stack.emulator_admin() as admin:
        counts = admin.stats()["counts"]
    stored = {r["issue_type"]: r["n"] for r in rows(engine, "SELECT issue_type, COUNT(*) AS n FROM findings "
                                                               "GROUP BY issue_type")}
    assert stored == {"sast": counts["findings"]["sast"], "sca": counts["findings"]["sca"]}
    assert scalar(engine, "SELECT COUNT(*) FROM dependencies") == counts["dependencies"]
    # the real dialect in raw, the canonical spelling in the columns
    reach = rows(engine, "SELECT reachability, raw FROM findings WHERE issue_type = 'sca' AND reachability IS NOT NULL")
    assert {r["reachability"] for r in reach} <= {"reachable", "always_reachable", "conditionally_reachable",
                                                 "unreachable", "unknown"}
    always = [r for r in reach if r["reachability"] == "always_reachable"]
    assert always
    assert all('"always reachable"' in r["raw"] for r in always)
    actions = rows(engine, "SELECT status, num_triaged FROM triage_actions")
    assert actions
    assert {a["status"] for a in actions} == {"succeeded"}
    assert sum(a["num_triaged"] or 0 for a in actions) > 0
    assert scalar(engine, "SELECT COUNT(*) FROM ticket_actions WHERE outcome = 'succeeded'") > 0
