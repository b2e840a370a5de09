"""SBOM export logic without a service: the backoff, the polling loop (fake client and clock), the storage."""

from __future__ import annotations

from typing import Any, cast

import pytest
from findings_provider.client import FindingsApiError
from findings_provider.client.models import SbomDocument, SbomExportState, SbomExportTask
from findings_provider.governance import sbom
from findings_provider.governance.sbom import COMPLETED, FAILED, TIMEOUT, ExportJob
from findings_provider.warehouse import dependency_repository_rows
from findings_provider.warehouse.schema import sbom_components, sboms
from sqlalchemy import select

DONE = "SBOM_EXPORT_STATUS_COMPLETED"
RUNNING = "SBOM_EXPORT_STATUS_IN_PROGRESS"


class Clock:
    """A fake clock that ``sleep`` advances, recording each wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


class FakeClient:
    """Answers ``get_sbom_export`` from a script of states per token (the last one repeats)."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.polls: list[str] = []
        self.downloads: list[str] = []
        self.started: list[int] = []

    def start_sbom_export(self, repository_id: int, *, cyclonedx_version: str) -> SbomExportTask:
        self.started.append(repository_id)
        if repository_id == 666:
            raise FindingsApiError("repository not found")
        return SbomExportTask(taskToken=f"tok-{repository_id}")

    def get_sbom_export(self, token: str) -> SbomExportState:
        self.polls.append(token)
        answers = self.script[token]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return SbomExportState.model_validate(answer)

    def download_sbom(self, url: str, *, max_bytes: int | None = None) -> SbomDocument:
        self.downloads.append(url)
        return SbomDocument.model_validate(DOCUMENT)


DOCUMENT = {
    "bomFormat": "CycloneDX", "specVersion": "1.6", "serialNumber": "urn:uuid:1", "version": 1,
    "metadata": {"component": {"name": "acme/web"}},
    "components": [
        {"type": "library", "name": "lodash", "version": "4.17.21", "purl": "pkg:npm/lodash@4.17.21",
         "licenses": [{"license": {"id": "MIT"}}, {"license": {"name": "Custom"}}],
         "components": [{"name": "inner", "version": "1", "licenses": [{"expression": "MIT OR Apache-2.0"}]}]},
        {"type": "library", "name": "left-pad", "version": "1.3.0", "purl": "pkg:npm/left-pad@1.3.0"},
    ],
}


def test_poll_delays_start_small_and_double_up_to_the_maximum():
    delays = sbom.poll_delays(5, 60)
    assert [next(delays) for _ in range(7)] == [5, 10, 20, 40, 60, 60, 60]
    zero = sbom.poll_delays(0, 8)
    assert [next(zero) for _ in range(3)] == [0, 8, 8]  # no tight loop after the first


def test_wait_polls_with_backoff_until_every_job_finished():
    clock = Clock()
    client: Any = FakeClient({
        "tok-1": [{"status": RUNNING}] * 3 + [{"status": DONE, "downloadUrl": "https://dl/1"}],
        "tok-2": [{"status": RUNNING}, {"status": "SBOM_EXPORT_STATUS_FAILED", "errorMessage": "boom"}],
    })
    jobs = [ExportJob(1, "tok-1"), ExportJob(2, "tok-2")]

    sbom.wait_for_exports(client, jobs, deadline=clock.now + 3600, poll_interval=5, max_poll_interval=60,
                          sleep=clock.sleep, clock=clock)

    assert clock.waits == [5, 10, 20, 40]
    assert client.polls == ["tok-1", "tok-2", "tok-1", "tok-2", "tok-1", "tok-1"]  # a finished job is not polled
    assert (jobs[0].status, jobs[0].download_url) == (COMPLETED, "https://dl/1")
    assert (jobs[1].status, jobs[1].error) == (FAILED, "boom")


def test_wait_gives_up_at_the_deadline_and_the_last_wait_is_cut_short():
    clock = Clock()
    client: Any = FakeClient({"tok-1": [{"status": RUNNING}]})
    jobs = [ExportJob(1, "tok-1")]
    sbom.wait_for_exports(client, jobs, deadline=clock.now + 30, poll_interval=5, max_poll_interval=60,
                          sleep=clock.sleep, clock=clock)
    assert clock.waits == [5, 10, 15]
    assert (jobs[0].status, jobs[0].error) == (TIMEOUT, "not finished at the deadline: gave up waiting")


def test_a_poll_error_no_retry_fixes_fails_the_running_jobs_and_a_transient_one_is_retried():
    class Transient(FindingsApiError):
        retryable_by_task = True

    clock = Clock()
    client: Any = FakeClient({"tok-1": [Transient("503"), {"status": DONE, "downloadUrl": "https://dl/1"}]})
    jobs = [ExportJob(1, "tok-1")]
    sbom.wait_for_exports(client, jobs, deadline=clock.now + 600, sleep=clock.sleep, clock=clock)
    assert jobs[0].status == COMPLETED

    client = FakeClient({"tok-1": [FindingsApiError("401 bad token")], "tok-2": [{"status": RUNNING}]})
    jobs = [ExportJob(1, "tok-1"), ExportJob(2, "tok-2"), ExportJob(3, None, FAILED, "earlier")]
    sbom.wait_for_exports(client, jobs, deadline=clock.now + 600, sleep=clock.sleep, clock=clock)
    assert [j.status for j in jobs] == [FAILED, FAILED, FAILED]
    assert "401 bad token" in str(jobs[1].error)
    assert jobs[2].error == "earlier"


def test_an_unknown_status_fails_that_job_only():
    job = ExportJob(1, "tok")
    sbom.apply_state(job, SbomExportState.model_validate({"status": "SBOM_EXPORT_STATUS_EXPLODED"}))
    assert job.status == FAILED
    assert "SBOM_EXPORT_STATUS_EXPLODED" in str(job.error)


def test_a_start_that_fails_is_a_failed_job_and_the_others_start():
    jobs = sbom.start_exports(cast(Any, FakeClient({})), [1, 666, 2], cyclonedx_version="1.6")
    assert [(j.repository_id, j.task_token, j.status) for j in jobs] == [
        (1, "tok-1", "in_progress"), (666, None, FAILED), (2, "tok-2", "in_progress")]
    assert "repository not found" in str(jobs[1].error)


def test_jobs_round_trip_as_json_without_the_download_link():
    job = ExportJob(7, "tok", COMPLETED, None, download_url="https://dl/secret-key")
    assert job.as_dict() == {"repository_id": 7, "task_token": "tok", "status": COMPLETED, "error": None}
    assert ExportJob.from_dict(job.as_dict()) == ExportJob(7, "tok", COMPLETED)
    assert "secret-key" not in repr(job)


def rows(warehouse, table, *columns):
    with warehouse.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(*(table.c[c] for c in columns)).order_by(table.c.id))]


def test_download_and_store_keeps_every_outcome_and_the_components_of_completed_ones(warehouse):
    warehouse.run_id = "run-1"
    client: Any = FakeClient({"tok-2": [{"status": DONE, "downloadUrl": "https://dl/2"}]})
    jobs = [ExportJob(1, "tok-1", COMPLETED, download_url="https://dl/1"), ExportJob(2, "tok-2", COMPLETED),
            ExportJob(3, "tok-3", FAILED, "boom"), ExportJob(4, "tok-4", TIMEOUT, "late")]

    components = sbom.download_and_store(client, warehouse, jobs)

    assert client.downloads == ["https://dl/1", "https://dl/2"]  # job 2's link read again (after a deferral)
    assert components == {1: 3, 2: 3}
    stored = rows(warehouse, sboms, "repository_id", "task_token", "status", "error", "spec_version",
                  "component_count", "run_id")
    assert stored == [(1, "tok-1", COMPLETED, None, "1.6", 3, "run-1"),
                      (2, "tok-2", COMPLETED, None, "1.6", 3, "run-1"),
                      (3, "tok-3", FAILED, "boom", None, None, "run-1"),
                      (4, "tok-4", TIMEOUT, "late", None, None, "run-1")]
    assert rows(warehouse, sboms, "document")[0][0] == DOCUMENT
    assert rows(warehouse, sbom_components, "repository_id", "name", "version", "purl", "licences")[:3] == [
        (1, "lodash", "4.17.21", "pkg:npm/lodash@4.17.21", "MIT, Custom"),
        (1, "inner", "1", None, "MIT OR Apache-2.0"),
        (1, "left-pad", "1.3.0", "pkg:npm/left-pad@1.3.0", None),
    ]
    assert sbom.summary(jobs, components) == {
        "repositories": [1, 2, 3, 4], "completed": [1, 2],
        "failed": {"3": "failed: boom", "4": "timeout: late"}, "components": 6}


def test_a_new_export_replaces_the_components_and_old_exports_are_pruned(warehouse):
    doc = {"specVersion": "1.5", "components": [{"name": "a", "version": "1"}]}
    for n in range(sbom.SBOMS_KEPT + 2):
        sbom.store_export(warehouse, ExportJob(1, f"tok-{n}", COMPLETED), doc)
    sbom.store_export(warehouse, ExportJob(1, "tok-failed", FAILED, "boom"))  # a failure keeps the components
    tokens = [t for (t,) in rows(warehouse, sboms, "task_token")]
    assert len(tokens) == sbom.SBOMS_KEPT
    assert tokens[-1] == "tok-failed"
    assert rows(warehouse, sbom_components, "repository_id", "name") == [(1, "a")]
    (sbom_id,) = rows(warehouse, sbom_components, "sbom_id")[0]
    assert rows(warehouse, sboms, "id", "task_token")[-2] == (sbom_id, f"tok-{sbom.SBOMS_KEPT + 1}")


def test_a_failed_download_fails_that_job_only(warehouse):
    class Expired(FakeClient):
        def download_sbom(self, url: str, *, max_bytes: int | None = None) -> SbomDocument:
            if url.endswith("/1"):
                raise FindingsApiError("403 link expired")
            return super().download_sbom(url, max_bytes=max_bytes)

    jobs = [ExportJob(1, "t1", COMPLETED, download_url="https://dl/1"),
            ExportJob(2, "t2", COMPLETED, download_url="https://dl/2")]
    components = sbom.download_and_store(cast(Any, Expired({})), warehouse, jobs)
    assert components == {2: 3}
    assert jobs[0].status == FAILED
    assert "403 link expired" in str(jobs[0].error)
    assert rows(warehouse, sboms, "repository_id", "status") == [(1, FAILED), (2, COMPLETED)]


def test_repositories_with_dependencies_and_the_licence_table(warehouse):
    warehouse.upsert_dependency_repositories(dependency_repository_rows([
        {"id": 5, "name": "a", "numDependencies": 3}, {"id": 2, "name": "b", "numDependencies": 1},
        {"id": 9, "name": "c", "numDependencies": 0}]))
    assert sbom.repositories_with_dependencies(warehouse) == [2, 5]
    assert sbom.sbom_licence_table(warehouse).empty
    sbom.store_export(warehouse, ExportJob(5, "t", COMPLETED), DOCUMENT)
    sbom.store_export(warehouse, ExportJob(2, "u", COMPLETED), {"components": [{"name": "x", "licenses": [
        {"license": {"id": "MIT"}}]}]})
    table = sbom.sbom_licence_table(warehouse)
    assert table.to_dict("index") == {
        "MIT": {"components": 2, "repositories": 2},
        "Custom": {"components": 1, "repositories": 1},
        "MIT OR Apache-2.0": {"components": 1, "repositories": 1},
        "(unknown)": {"components": 1, "repositories": 1},
    }


@pytest.mark.parametrize("bad", [{"status": None}])
def test_a_missing_status_is_unknown_and_fails_the_job(bad):
    job = ExportJob(1, "tok")
    sbom.apply_state(job, SbomExportState.model_validate(bad))
    assert job.status == FAILED
