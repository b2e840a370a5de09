"""The demo's and the tests' Airflow REST client (``devtools/airflow_api.py``): a call whose answer is lost is sent
again when that does no harm, and a trigger whose answer is lost is sent again with the same run id and creates at
most one run."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from devtools import airflow_api
from devtools.airflow_api import AirflowApi, ApiError


class FakeAirflow:
    """``/auth/token``; ``POST .../dagRuns`` answered as ``answers`` says in turn (a status code, or ``"timeout"``:
    the run is created but the answer is lost) and ``GET .../dagRuns/{id}`` of the runs created; any other call
    answered the next of ``answers`` (``"timeout"``: no answer), with ``{"ok": true}`` for a 2xx."""

    def __init__(self, *answers: int | str) -> None:
        self.answers = list(answers)
        self.posted: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []
        self.runs: dict[str, dict[str, Any]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": "jwt"})
        self.calls.append((request.method, request.url.path))
        if "/dagRuns" not in request.url.path:
            answer = self.answers.pop(0)
            if answer == "timeout":
                raise httpx.ReadTimeout("no answer in time", request=request)
            return httpx.Response(int(answer), json={"ok": True} if int(answer) < 300 else {"detail": "locked"})
        if request.method == "GET":
            run_id = request.url.path.rsplit("/", 1)[1]
            return httpx.Response(200, json=self.runs[run_id]) if run_id in self.runs else httpx.Response(404)
        body = json.loads(request.content)
        self.posted.append(body)
        answer = self.answers.pop(0)
        run_id = body["dag_run_id"]
        if answer in (200, "timeout"):
            if run_id in self.runs:
                return httpx.Response(409, json={"detail": f"run {run_id} exists"})
            self.runs[run_id] = {"dag_run_id": run_id, "state": "queued", "conf": body["conf"]}
            if answer == "timeout":
                raise httpx.ReadTimeout("no answer in time", request=request)
            return httpx.Response(200, json=self.runs[run_id])
        return httpx.Response(int(answer), json={"detail": "database is locked"})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    """An ``AirflowApi`` over a ``FakeAirflow``, no wait between attempts."""
    monkeypatch.setattr(airflow_api, "REPEAT_DELAY", 0.0)

    def make(*answers: int | str) -> tuple[AirflowApi, FakeAirflow]:
        server = FakeAirflow(*answers)
        api = AirflowApi("http://airflow.test", username="admin", password="pw")
        api._http = httpx.Client(base_url=api.base_url, transport=httpx.MockTransport(server))
        return api, server

    return make


def test_a_trigger_answered_500_is_sent_again_with_the_same_run_id(fake) -> None:
    api, server = fake(500, 200)
    run = api.trigger("findings_extraction", conf={"full_refresh": True})
    assert [body["dag_run_id"] for body in server.posted] == [run["dag_run_id"]] * 2
    assert list(server.runs) == [run["dag_run_id"]]
    assert run["conf"] == {"full_refresh": True}


def test_a_trigger_whose_answer_was_lost_returns_the_run_it_created_and_creates_no_second(fake) -> None:
    api, server = fake("timeout", 200)
    run = api.trigger("findings_extraction", run_id="e2e_run__1")
    assert len(server.posted) == 2  # the repeat was answered 409: the lost one created it
    assert list(server.runs) == ["e2e_run__1"]
    assert run == server.runs["e2e_run__1"]


def test_a_conflict_or_a_refusal_to_the_first_trigger_is_raised_not_repeated(fake) -> None:
    api, server = fake(409)
    with pytest.raises(ApiError) as conflict:
        api.trigger("findings_extraction", run_id="taken")
    assert conflict.value.status_code == 409
    api, server = fake(400)
    with pytest.raises(ApiError) as refused:
        api.trigger("findings_extraction")
    assert refused.value.status_code == 400
    assert len(server.posted) == 1


def test_a_trigger_answered_500_every_time_fails_after_its_attempts(fake) -> None:
    api, server = fake(*[500] * airflow_api.ATTEMPTS)
    with pytest.raises(ApiError) as failed:
        api.trigger("findings_extraction")
    assert failed.value.status_code == 500
    assert len(server.posted) == airflow_api.ATTEMPTS
    assert len({body["dag_run_id"] for body in server.posted}) == 1
    assert not server.runs


def test_reads_and_updates_are_sent_again_when_their_answer_is_lost(fake) -> None:
    api, server = fake(503, "timeout", 200, 500, 200)
    assert api.get("/api/v2/version") == {"ok": True}
    assert api.set_paused("findings_extraction", False) == {"ok": True}
    assert server.calls == [("GET", "/api/v2/version")] * 3 + [("PATCH", "/api/v2/dags/findings_extraction")] * 2


def test_a_pool_whose_creation_was_lost_is_updated_by_the_repeat(fake) -> None:
    """The repeat of a lost creation is answered 409: the pool is then updated, as one that existed."""
    api, server = fake(500, 409, 200)
    assert api.ensure_pool("findings_api", 4) == {"ok": True}
    assert server.calls == [("POST", "/api/v2/pools")] * 2 + [("PATCH", "/api/v2/pools/findings_api")]


def test_a_post_is_not_sent_again_unless_its_caller_says_so(fake) -> None:
    api, server = fake(500)
    with pytest.raises(ApiError) as failed:
        api.request("POST", "/api/v2/connections/test", json={})
    assert failed.value.status_code == 500
    assert server.calls == [("POST", "/api/v2/connections/test")]


def test_a_refusal_is_not_sent_again(fake) -> None:
    api, server = fake(404)
    with pytest.raises(ApiError):
        api.get("/api/v2/dags/nope")
    assert len(server.calls) == 1
