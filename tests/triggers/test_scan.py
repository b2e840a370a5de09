"""ScanStatusTrigger on its own: serialisation, one event per outcome, polling, deadline, cancellation."""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import AsyncFindingsClient
from findings_provider.triggers.scan import MAX_TRANSIENT_FAILURES, ScanStatusTrigger

from .helpers import ScriptedApi


def details(scan_id: str, status: str | None = None, **fields: Any) -> dict[str, Any]:
    body = {"id": int(scan_id), "started_at": datetime.now(timezone.utc).isoformat(), "meta": {}, **fields}
    if status:
        body["status"] = status
    return body


def trigger(scan_ids: Any = "11", *, deadline: float | None = None, poll: float = 0.001) -> ScanStatusTrigger:
    return ScanStatusTrigger(scan_ids=scan_ids, deadline=deadline or time.time() + 30, findings_conn_id="my_conn",
                             deployment_id="1", poll_interval=poll)


async def events(t: ScanStatusTrigger) -> list[dict[str, Any]]:
    return [e.payload async for e in t.run()]


def test_serialize_round_trip_keeps_everything_but_the_token() -> None:
    original = ScanStatusTrigger(scan_ids=["11", 12], deadline=1_900_000_000.5,  # type: ignore[list-item]
                                 findings_conn_id="my_conn", deployment_id=1,  # type: ignore[arg-type]
                                 poll_interval=15)  # ints where strings are declared: normalised, as a DAG may pass
    classpath, kwargs = original.serialize()
    assert classpath == "findings_provider.triggers.scan.ScanStatusTrigger"
    assert kwargs == {"scan_ids": ["11", "12"], "deadline": 1_900_000_000.5, "findings_conn_id": "my_conn",
                      "deployment_id": "1", "poll_interval": 15.0}
    json.dumps(kwargs)  # plain JSON: survives a triggerer restart
    module, name = classpath.rsplit(".", 1)
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)


def test_completed_scan_yields_one_success_event(mock_api) -> None:
    api = mock_api({"11": [details("11", completed_at="2026-11-18T10:00:00Z", exit_code=1)]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "success"
    assert event["scan_id"] == "11"
    assert event["scan_status"] == "SCAN_STATUS_COMPLETED"
    assert event["statuses"] == {"11": "SCAN_STATUS_COMPLETED"}
    assert [r.url.path for r in api.requests] == ["/api/v1/deployments/1/scan/11"]  # the serialised deployment


@pytest.mark.parametrize("status", ["SCAN_STATUS_ERROR", "SCAN_STATUS_NEVER_FINISHED", "SCAN_STATUS_CANCELLED"])
def test_unsuccessful_scans_fail_with_a_clear_message(mock_api, status: str) -> None:
    mock_api({"11": [details("11", status)]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "failed"
    assert event["scan_status"] == status
    assert event["message"] == f"scan 11 finished unsuccessfully: {status}"


def test_derived_statuses_of_scan_details() -> None:
    # the details endpoint carries no status: error exit codes and old unfinished scans are failures
    api = ScriptedApi({"11": [details("11", completed_at="2026-11-18T10:00:00Z", exit_code=2)],
               "12": [details("12", started_at=(datetime.now(timezone.utc) - timedelta(hours=2)).isoformat())]})

    async def go() -> list[dict[str, Any]]:
        client = AsyncFindingsClient("https://api.test", "t0ken-value", deployment_id="1",
                                     transport=httpx.MockTransport(api))
        async with client:
            return [await trigger("11")._wait(client), await trigger("12")._wait(client)]

    first, second = asyncio.run(go())
    assert (first["status"], first["scan_status"]) == ("failed", "SCAN_STATUS_ERROR")
    assert (second["status"], second["scan_status"]) == ("failed", "SCAN_STATUS_NEVER_FINISHED")


@pytest.mark.parametrize("waiting", ["SCAN_STATUS_RUNNING", "SCAN_STATUS_PENDING"])
def test_running_and_pending_keep_polling(mock_api, waiting: str) -> None:
    api = mock_api({"11": [details("11", waiting), details("11", waiting), details("11", "SCAN_STATUS_COMPLETED")]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "success"
    assert len(api.requests) == 3


def test_unknown_status_is_an_error_naming_the_value(mock_api) -> None:
    mock_api({"11": [details("11", "SCAN_STATUS_EXPLODED")]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "error"
    assert event["scan_status"] == "SCAN_STATUS_EXPLODED"
    assert "SCAN_STATUS_EXPLODED" in event["message"]
    assert event["retryable"] is False


def test_deadline_yields_a_timeout_event(mock_api) -> None:
    api = mock_api({"11": [details("11", "SCAN_STATUS_RUNNING")]})
    started = time.monotonic()
    # A deadline of 0.6 s leaves room for three polls 0.05 s apart on a loaded machine (0.2 s once saw only two).
    (event,) = asyncio.run(events(trigger(deadline=time.time() + 0.6, poll=0.05)))
    assert event["status"] == "timeout"
    assert event["scan_status"] == "SCAN_STATUS_RUNNING"
    assert "11 (SCAN_STATUS_RUNNING)" in event["message"]
    assert 0.55 < time.monotonic() - started < 3
    assert len(api.requests) >= 3


def test_a_list_waits_for_all_and_fails_on_the_first_failure(mock_api) -> None:
    done = details("11", "SCAN_STATUS_COMPLETED")
    mock_api({"11": [done], "12": [details("12", "SCAN_STATUS_RUNNING"), details("12", "SCAN_STATUS_COMPLETED")]})
    (event,) = asyncio.run(events(trigger(["11", "12"])))
    assert event["status"] == "success"
    assert event["scan_ids"] == ["11", "12"]
    mock_api({"11": [done], "12": [details("12", "SCAN_STATUS_ERROR")]})
    (event,) = asyncio.run(events(trigger(["11", "12"])))
    assert (event["status"], event["scan_id"]) == ("failed", "12")


def test_fatal_api_error_ends_the_wait_transient_ones_are_polled_through(mock_api) -> None:
    mock_api({"11": [httpx.Response(401, json={})]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "error"
    assert event["retryable"] is False
    assert "AuthenticationError" in event["message"]

    api = mock_api({"11": [httpx.Response(503), httpx.Response(503), details("11", "SCAN_STATUS_COMPLETED")]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "success"
    assert len(api.requests) == 3

    api = mock_api({"11": [httpx.Response(503)]})
    (event,) = asyncio.run(events(trigger()))
    assert event["status"] == "error"
    assert event["retryable"] is True
    assert "ServerError" in event["message"]
    assert len(api.requests) == MAX_TRANSIENT_FAILURES


def test_cancellation_has_no_side_effect(mock_api) -> None:
    api = mock_api({"11": [details("11", "SCAN_STATUS_RUNNING")]})
    closed: list[bool] = []
    original = AsyncFindingsClient.aclose

    async def tracking_close(self: AsyncFindingsClient) -> None:
        closed.append(True)
        await original(self)

    async def go() -> None:
        AsyncFindingsClient.aclose = tracking_close  # type: ignore[method-assign]
        try:
            task = asyncio.ensure_future(events(trigger(poll=10)))
            while not api.requests:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            AsyncFindingsClient.aclose = original  # type: ignore[method-assign]

    asyncio.run(go())
    assert closed == [True]
    assert {r.method for r in api.requests} == {"GET"}
    assert len(api.requests) == 1


@pytest.mark.integration
def test_against_the_emulator_with_an_env_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    with EmulatorProcess(findings=100) as emu:
        monkeypatch.setenv("AIRFLOW_CONN_SCAN_TRIGGER_TEST", json.dumps({
            "conn_type": "findings_api", "host": emu.base_url, "password": emu.token,
            "extra": {"deployment_slug": emu.deployment_slug}}))
        scan = emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0.3)
        failing = emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0.3, final_status="SCAN_STATUS_ERROR")
        ok = ScanStatusTrigger(scan_ids=str(scan["id"]), deadline=time.time() + 20,
                               findings_conn_id="scan_trigger_test", deployment_id=emu.deployment_id,
                               poll_interval=0.1)
        _classpath, kwargs = ok.serialize()
        (event,) = asyncio.run(events(ScanStatusTrigger(**kwargs)))
        assert event["status"] == "success"
        bad = ScanStatusTrigger(scan_ids=[str(failing["id"])], deadline=time.time() + 20,
                                findings_conn_id="scan_trigger_test", poll_interval=0.1)
        (event,) = asyncio.run(events(bad))
        assert (event["status"], event["scan_status"]) == ("failed", "SCAN_STATUS_ERROR")
        gets = [r for r in emu.requests() if r["operation"] == "scan_get"]
        assert gets
        assert all(r["method"] == "GET" for r in emu.requests())
