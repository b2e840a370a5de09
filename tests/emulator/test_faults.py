"""Fault injection as a client sees it, the request log, reset, and the loopback guard of admin routes."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
from findings_emulator.faults import FaultBook
from findings_emulator.gateway import Gateway, is_loopback
from findings_emulator.requestlog import RequestLog
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_slug


@pytest.fixture(autouse=True)
def no_faults(emulator: EmulatorProcess) -> None:
    emulator.clear_faults()


def findings(api: httpx.Client, emulator: EmulatorProcess) -> httpx.Response:
    return api.get(by_slug(emulator, "findings"))


def test_429_carries_retry_after_and_the_schedule_is_consumed_in_order(api: httpx.Client,
                                                                      emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="findings", schedule=["429", "ok", "500", "502", "503"], retry_after=3)
    first = findings(api, emulator)
    assert first.status_code == 429
    assert first.headers["retry-after"] == "3"
    assert_error(first, 429)
    assert [findings(api, emulator).status_code for _ in range(5)] == [200, 500, 502, 503, 200]


def test_429_without_retry_after(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="*", schedule=["429"], retry_after=None)
    response = api.get("/api/v1/deployments")
    assert response.status_code == 429
    assert "retry-after" not in response.headers


def test_faults_match_operation_and_method(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="*", method="POST", schedule=["503"])
    assert findings(api, emulator).status_code == 200
    assert api.post(by_slug(emulator, "triage"), json={}).status_code == 503


def test_drop_closes_the_connection_without_a_response(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="findings", schedule=["drop"])
    with pytest.raises(httpx.RemoteProtocolError):
        findings(api, emulator)
    assert findings(api, emulator).status_code == 200


def test_truncate_sends_half_a_body(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="findings", schedule=["truncate"])
    response = findings(api, emulator)
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_latency_delays_the_answer(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="deployments", schedule=["latency"], latency=0.6)
    started = time.monotonic()
    assert api.get("/api/v1/deployments").status_code == 200
    assert time.monotonic() - started >= 0.6


def test_drop_after_commits_the_change_but_loses_the_response(api: httpx.Client, fresh: EmulatorProcess) -> None:
    target = next(f for f in all_findings(api, fresh, status="open") if not f["external_ticket"])
    fresh.add_fault(operation="tickets", schedule=["drop_after"])
    with pytest.raises(httpx.RemoteProtocolError):
        api.post(by_slug(fresh, "tickets"), json={"issue_type": "sast", "issue_ids": [str(target["id"])]})
    assert [t["issue_ids"] for t in fresh.tickets()] == [[target["id"]]]
    after = next(f for f in all_findings(api, fresh, status="open") if f["id"] == target["id"])
    assert after["external_ticket"]["linkedIssueIds"] == [target["id"]]
    entry = next(e for e in fresh.requests() if e["operation"] == "tickets")
    assert (entry["operation"], entry["fault"], entry["status"]) == ("tickets", "drop_after", None)


def _logged(emulator: EmulatorProcess, operation: str) -> dict[str, Any]:
    """The request log's entry of ``operation``, once the emulator finished serving it (slow kinds log late)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        entries = [e for e in emulator.requests() if e["operation"] == operation]
        if entries:
            return entries[-1]
        time.sleep(0.05)
    raise AssertionError(f"no {operation} request logged")


def _check_act_500(response: httpx.Response, ticket_id: int) -> None:
    assert_error(response, 500)


def _check_act_html(response: httpx.Response, ticket_id: int) -> None:
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.content.startswith(b"<!DOCTYPE html>")


def _check_act_wrong_shape(response: httpx.Response, ticket_id: int) -> None:
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["data"]
    assert [s["issue_ids"] for s in body["data"]["succeeded"]] == [[ticket_id]]


def _check_act_redirect(response: httpx.Response, ticket_id: int) -> None:
    assert response.status_code == 302
    assert response.headers["location"] == "/moved-elsewhere"


ACT_CHECKS = {"act_500": (_check_act_500, 500), "act_html": (_check_act_html, 200),
              "act_wrong_shape": (_check_act_wrong_shape, 200), "act_redirect": (_check_act_redirect, 302)}


@pytest.mark.parametrize("kind", sorted(ACT_CHECKS))
def test_act_kinds_carry_the_request_out_then_answer_wrongly(api: httpx.Client, fresh: EmulatorProcess,
                                                             kind: str) -> None:
    target = next(f for f in all_findings(api, fresh, status="open") if not f["external_ticket"])
    fresh.add_fault(operation="tickets", schedule=[kind])
    response = api.post(by_slug(fresh, "tickets"), json={"issue_type": "sast", "issue_ids": [str(target["id"])]})
    check, status = ACT_CHECKS[kind]
    check(response, target["id"])
    assert [t["issue_ids"] for t in fresh.tickets()] == [[target["id"]]]
    entry = _logged(fresh, "tickets")
    assert (entry["fault"], entry["status"]) == (kind, status)


def test_act_slow_carries_the_request_out_then_answers_late(api: httpx.Client, fresh: EmulatorProcess) -> None:
    target = next(f for f in all_findings(api, fresh, status="open") if not f["external_ticket"])
    fresh.add_fault(operation="tickets", schedule=["act_slow"], latency=1.0)
    with pytest.raises(httpx.ReadTimeout):
        api.post(by_slug(fresh, "tickets"), json={"issue_type": "sast", "issue_ids": [str(target["id"])]},
                 timeout=0.3)
    assert [t["issue_ids"] for t in fresh.tickets()] == [[target["id"]]]
    assert (_logged(fresh, "tickets")["fault"], _logged(fresh, "tickets")["status"]) == ("act_slow", 200)


def test_act_drip_carries_the_request_out_then_sends_the_body_in_pieces(api: httpx.Client,
                                                                       fresh: EmulatorProcess) -> None:
    target = next(f for f in all_findings(api, fresh, status="open") if not f["external_ticket"])
    fresh.add_fault(operation="tickets", schedule=["act_drip"], latency=0.5)
    with api.stream("POST", by_slug(fresh, "tickets"),
                    json={"issue_type": "sast", "issue_ids": [str(target["id"])]}) as response:
        assert response.status_code == 200
        chunks = list(response.iter_raw())
    assert len(chunks) > 1
    assert [s["issue_ids"] for s in json.loads(b"".join(chunks))["succeeded"]] == [[target["id"]]]
    assert [t["issue_ids"] for t in fresh.tickets()] == [[target["id"]]]


def test_probability_is_deterministic_for_a_seed_and_bounded_by_times(api: httpx.Client,
                                                                      emulator: EmulatorProcess) -> None:
    def statuses() -> list[int]:
        return [api.get("/api/v1/deployments").status_code for _ in range(20)]

    emulator.add_fault(operation="deployments", probability=0.5, kinds=["503", "500"], seed=7)
    first = statuses()
    emulator.clear_faults()
    emulator.add_fault(operation="deployments", probability=0.5, kinds=["503", "500"], seed=7)
    assert statuses() == first
    assert {200, 500, 503} <= set(first)
    emulator.clear_faults()
    emulator.add_fault(operation="deployments", probability=1.0, kinds=["502"], times=2)
    assert statuses()[:4] == [502, 502, 200, 200]


def test_fault_rules_are_listed_and_validated(emulator: EmulatorProcess) -> None:
    fault_id = emulator.add_fault(operation="scans_search", schedule=["503", "ok"])
    listed = httpx.get(f"{emulator.base_url}/_emulator/faults").json()["faults"]
    assert [(f["id"], f["remaining"]) for f in listed] == [(fault_id, ["503", "ok"])]
    for spec in ({"operation": "nope", "schedule": ["503"]}, {"operation": "findings"},
                 {"operation": "findings", "schedule": ["boom"]}, {"probability": 0.5}):
        assert_error(httpx.post(f"{emulator.base_url}/_emulator/faults", json=spec), 400)


def test_request_log_records_api_calls_without_credentials(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.clear_requests()
    api.get(by_slug(emulator, "findings"), params=[("severities", "high"), ("severities", "low")])
    api.post(by_slug(emulator, "triage"), json={"issue_type": "sast"})
    first, second = emulator.requests()
    assert (first["method"], first["operation"], first["status"]) == ("GET", "findings", 200)
    assert first["query"] == {"severities": ["high", "low"]}
    assert (second["operation"], second["body"], second["status"]) == ("triage", {"issue_type": "sast"}, 400)
    assert emulator.requests(since=first["seq"]) == [second]
    assert emulator.token not in json.dumps(emulator.requests())
    assert emulator.token not in emulator.log_tail(1000)
    emulator.clear_requests()
    assert emulator.requests() == []


def test_reset_regenerates_with_overrides(api: httpx.Client, emulator: EmulatorProcess) -> None:
    emulator.add_fault(operation="findings", schedule=["503"])
    emulator.reset(findings=1000, seed=7)
    assert emulator.stats()["counts"]["findings"] == {"sast": 700, "sca": 300, "secrets": 200}
    assert findings(api, emulator).status_code == 200
    assert httpx.get(f"{emulator.base_url}/_emulator/faults").json()["faults"] == []
    assert_error(httpx.post(f"{emulator.base_url}/_emulator/reset", json={"port": 1}), 400, "port")
    emulator.reset(findings=3000, seed=42)


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True), ("10.0.0.5", False),
    ("192.168.1.20", False), ("::ffff:10.0.0.5", False), ("2001:db8::1", False), ("localhost", False),
    ("", False), (None, False),
])
def test_loopback_check(host: str | None, expected: bool) -> None:
    assert is_loopback(host) is expected


def _call(gateway: Gateway, client: tuple[str, int]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": "GET", "path": "/_emulator/requests", "query_string": b"",
             "headers": [], "client": client}
    asyncio.run(gateway(scope, receive, send))
    return sent


def test_admin_routes_refuse_other_clients_before_reaching_the_application() -> None:
    reached: list[str] = []

    async def application(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    gateway = Gateway(application, RequestLog(), FaultBook())
    refused = _call(gateway, ("10.1.2.3", 5000))
    assert refused[0]["status"] == 403
    assert json.loads(refused[1]["body"])["error"]
    assert reached == []
    assert _call(gateway, ("127.0.0.1", 5000))[0]["status"] == 200
    assert reached == ["/_emulator/requests"]
