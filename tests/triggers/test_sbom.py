"""SbomExportTrigger on its own: serialisation, backoff between polling rounds, one event per outcome."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from findings_provider.client import AsyncFindingsClient
from findings_provider.hooks.findings_api import FindingsApiHook
from findings_provider.triggers import sbom as sbom_trigger
from findings_provider.triggers.sbom import SbomExportTrigger

DONE = {"status": "SBOM_EXPORT_STATUS_COMPLETED", "downloadUrl": "https://dl.test/sbom/1?signature=secret"}
RUNNING = {"status": "SBOM_EXPORT_STATUS_IN_PROGRESS"}
FAILED = {"status": "SBOM_EXPORT_STATUS_FAILED", "errorMessage": "SBOM generation failed"}


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the trigger's waits instead of sleeping them."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(sbom_trigger.asyncio, "sleep", fake_sleep)
    return waits


def job(repository_id: int, token: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"repository_id": repository_id, "task_token": token or f"tok{repository_id}", "status": "in_progress",
            "error": None, **fields}


def trigger(jobs: list[dict[str, Any]], *, deadline: float | None = None) -> SbomExportTrigger:
    return SbomExportTrigger(jobs=jobs, deadline=deadline or time.time() + 3600, findings_conn_id="my_conn",
                             deployment_id="1", poll_interval=5, max_poll_interval=60)


async def events(t: SbomExportTrigger) -> list[dict[str, Any]]:
    return [e.payload async for e in t.run()]


def test_serialize_round_trip_keeps_everything_but_the_token() -> None:
    original = trigger([job(1), job(2, None, status="failed", error="could not start")], deadline=1_900_000_000.5)
    classpath, kwargs = original.serialize()
    assert classpath == "findings_provider.triggers.sbom.SbomExportTrigger"
    assert kwargs == {"jobs": [job(1), job(2, "tok2", status="failed", error="could not start")],
                      "deadline": 1_900_000_000.5, "findings_conn_id": "my_conn", "deployment_id": "1",
                      "poll_interval": 5.0, "max_poll_interval": 60.0}
    assert SbomExportTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_polls_with_a_doubling_interval_until_every_job_finished(mock_api, sleeps) -> None:
    api = mock_api({"tok1": [RUNNING] * 5 + [DONE], "tok2": [RUNNING, FAILED]})
    already = job(3, "tok3", status="failed", error="could not start the export")

    (event,) = asyncio.run(events(trigger([job(1), job(2), already])))

    assert sleeps == [5, 10, 20, 40, 60, 60]  # 5 s doubling to 60 s, never a tight loop
    assert event["status"] == "done"
    assert event["jobs"] == [job(1, status="completed"), job(2, status="failed", error="SBOM generation failed"),
                             already]
    assert "secret" not in repr(event)  # the download link is never carried in the event
    polled = [r.url.path.rsplit("/", 1)[1] for r in api.requests]
    assert polled.count("tok1") == 6
    assert polled.count("tok2") == 2  # a finished job is not polled again
    assert "tok3" not in polled
    assert all(r.headers["Authorization"] == "Bearer t0ken-value" for r in api.requests)


def test_jobs_still_running_at_the_deadline_time_out(mock_api, sleeps) -> None:
    mock_api({"tok1": [RUNNING], "tok2": [DONE]})
    (event,) = asyncio.run(events(trigger([job(1), job(2)], deadline=time.time() - 1)))
    assert event["status"] == "timeout"
    assert event["jobs"][0]["status"] == "timeout"
    assert event["jobs"][1]["status"] == "timeout"  # never polled: the deadline had passed
    assert "still running: 1, 2" in event["message"]
    assert sleeps == []


def test_a_poll_error_no_retry_fixes_fails_the_jobs_still_running(mock_api, sleeps) -> None:
    mock_api({"tok1": [DONE], "tok2": [httpx.Response(401, json={"error": "bad token"})]})
    (event,) = asyncio.run(events(trigger([job(1), job(2)])))
    assert event["status"] == "error"
    assert [j["status"] for j in event["jobs"]] == ["completed", "failed"]
    assert "cannot read the export status" in event["jobs"][1]["error"]


def test_transient_errors_are_polled_again(mock_api, sleeps) -> None:
    mock_api({"tok1": [httpx.Response(503), httpx.Response(503), DONE]})
    (event,) = asyncio.run(events(trigger([job(1)])))
    assert event["status"] == "done"
    assert event["jobs"][0]["status"] == "completed"
    assert sleeps == [5, 10, 20]


def test_a_connection_that_cannot_be_built_fails_every_running_job(monkeypatch) -> None:
    async def broken(self: FindingsApiHook) -> AsyncFindingsClient:
        raise ValueError("no such connection")

    monkeypatch.setattr(FindingsApiHook, "get_async_client", broken)
    (event,) = asyncio.run(events(trigger([job(1)])))
    assert event["status"] == "error"
    assert event["jobs"][0]["status"] == "failed"
    assert "no such connection" in event["message"]
