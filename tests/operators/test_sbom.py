"""SbomExportOperator against the emulator, through connections: several polls, a failed job, the download without
the token, storage, the deferral round trip through the real trigger, the all-failed outcome."""

from __future__ import annotations

import asyncio

import pytest
from findings_provider.compat import AirflowException, AirflowSkipException, TaskDeferred
from findings_provider.operators.sbom import SbomExportOperator
from findings_provider.triggers.sbom import SbomExportTrigger
from findings_provider.warehouse import dependency_repository_rows
from findings_provider.warehouse.schema import sbom_components, sboms
from task_context import FakeTaskInstance, make_context, run_operator
from warehouse_rows import stored

pytestmark = pytest.mark.integration


def repository_ids(emulator) -> list[int]:
    with emulator.client() as http:
        body = http.post(f"/api/v1/deployments/{emulator.deployment_id}/dependencies/repositories",
                         json={"pageSize": 100}).json()
    return sorted(r["id"] for r in body["repositorySummaries"] if r["numDependencies"])


def op(**kwargs) -> SbomExportOperator:
    return SbomExportOperator(task_id="export_sboms", **{"poll_interval": 0.05, "max_poll_interval": 0.2,
                                                         "deferrable": False, **kwargs})


def test_exports_wait_several_polls_a_failed_one_is_recorded_and_downloads_carry_no_token(fresh, warehouse):
    ids = repository_ids(fresh)[:3]
    fresh.sbom(polls=4, fail_repositories=[ids[1]], error_message="generator crashed")

    result = run_operator(op(repository_ids=ids, cyclonedx_version="1.5"), FakeTaskInstance())

    assert result["repositories"] == ids
    assert result["completed"] == [ids[0], ids[2]]
    assert result["failed"] == {str(ids[1]): "failed: generator crashed"}
    log = fresh.requests()
    starts = [r for r in log if r["operation"] == "sbom_export"]
    assert [int(r["body"]["repositoryId"]) for r in starts] == ids  # an int64: a string on the wire
    assert {r["body"]["formatVersion"]["cyclonedxVersion"] for r in starts} == {"SBOM_CYCLONE_DX_VERSION_V1_5"}
    polls = [r for r in log if r["operation"] == "sbom_status"]
    assert len(polls) == 3 * 4  # each job took 4 polls, and none was polled after it finished
    downloads = [r for r in log if r["operation"] == "sbom_download"]
    assert len(downloads) == 2
    assert [r["authorization_sent"] for r in downloads] == [False, False]  # the link is fetched without the token
    assert all(r["authorization_sent"] for r in starts + polls)
    rows = stored(warehouse, sboms, "repository_id", "status", "error", "spec_version", "component_count")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (ids[0], "completed", None, "1.5"), (ids[1], "failed", "generator crashed", None),
        (ids[2], "completed", None, "1.5")]
    components = stored(warehouse, sbom_components, "repository_id", "name", "version", "purl", "licences")
    assert {c[0] for c in components} == {ids[0], ids[2]}
    assert result["components"] == len(components) == rows[0][4] + rows[2][4] > 0
    assert all(c[3].startswith("pkg:") for c in components)


def test_every_repository_with_dependencies_by_default(fresh, warehouse):
    pairs = zip(repository_ids(fresh)[:2], (5, 0), strict=True)
    warehouse.upsert_dependency_repositories(dependency_repository_rows([
        {"id": i, "name": f"r{i}", "numDependencies": n} for i, n in pairs]))
    fresh.sbom(polls=1)
    result = run_operator(op(repository_ids="[]"), FakeTaskInstance())
    assert result["repositories"] == repository_ids(fresh)[:1]


def test_the_task_fails_naming_the_repositories_only_when_every_export_failed(fresh, warehouse):
    ids = repository_ids(fresh)[:2]
    fresh.sbom(polls=2, fail_repositories=ids)
    with pytest.raises(AirflowException, match=rf"every SBOM export failed \(2 repositories\): {ids[0]}: failed"):
        run_operator(op(repository_ids=ids), FakeTaskInstance())
    assert [r[0] for r in stored(warehouse, sboms, "status")] == ["failed", "failed"]


def test_switched_off_it_skips_without_a_request(fresh, warehouse):
    with pytest.raises(AirflowSkipException):
        run_operator(op(enabled="False", repository_ids=[1]), FakeTaskInstance())
    assert [r for r in fresh.requests() if r["operation"].startswith("sbom")] == []


def test_deferrable_it_waits_in_the_trigger_and_downloads_on_resume(fresh, warehouse):
    ids = repository_ids(fresh)[:2]
    fresh.sbom(polls=3, fail_next=1)
    operator = op(repository_ids=ids, deferrable=True, timeout=120)
    context = make_context(FakeTaskInstance(task_id="export_sboms"))

    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, SbomExportTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert [r for r in fresh.requests() if r["operation"] == "sbom_status"] == []  # no polling in the worker
    _, kwargs = trigger.serialize()
    assert [j["repository_id"] for j in kwargs["jobs"]] == ids

    async def first_event() -> dict:
        async for event in SbomExportTrigger(**kwargs).run():
            return event.payload
        raise AssertionError("no event")

    event = asyncio.run(first_event())
    assert event["status"] == "done"
    result = operator.execute_complete(context, event)

    assert result["completed"] == [ids[1]]
    assert result["failed"] == {str(ids[0]): "failed: SBOM generation failed"}
    downloads = [r for r in fresh.requests() if r["operation"] == "sbom_download"]
    assert [r["authorization_sent"] for r in downloads] == [False]
    assert [r[0] for r in stored(warehouse, sboms, "status")] == ["failed", "completed"]
