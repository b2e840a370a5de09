"""Retries, backoff, Retry-After, error mapping and the never-retried ticket creation.

Waits are read from the fake clock (``clock.sleeps``), never from the wall clock.
"""

from __future__ import annotations

import logging
import pickle
import random
from email.utils import formatdate
from typing import Any

import httpx
import pytest
from findings_provider.client import (
    AmbiguousWriteError,
    AuthenticationError,
    DeploymentNotFoundError,
    FindingsApiError,
    NotFoundError,
    PaginationError,
    PolicyApiRetiredError,
    RateLimitedError,
    ResponseDecodeError,
    RetryPolicy,
    ServerError,
    TransportError,
    ValidationError,
)
from findings_provider.client.errors import ConfigurationError
from findings_provider.client.transport import parse_retry_after

from .conftest import Recorder, call_async, fast_policy, ok, raw

FINDINGS_OK = {"findings": [{"id": 1}]}
TICKETS_OK = {"failed": [], "skipped": [], "succeeded": [{"ticket_id": 1, "issue_ids": [5]}]}


def create_tickets(client):
    return client.create_tickets(issue_type="sast", issue_ids=[5])


# --- Retry-After --------------------------------------------------------------------------------------------


def test_429_with_retry_after_waits_exactly_that_long(make_client, clock) -> None:
    rec = Recorder(raw(b"slow down", 429, {"Retry-After": "3"}), FINDINGS_OK)
    page = make_client(rec).list_findings()
    assert [f.id for f in page.items] == [1]
    assert rec.count == 2
    assert clock.sleeps == [3.0]


def test_429_retry_after_async(make_async_client, clock) -> None:
    rec = Recorder(raw(b"", 429, {"Retry-After": "2"}), raw(b"", 429, {"Retry-After": "5"}), FINDINGS_OK)
    page = call_async(make_async_client(rec), "list_findings")
    assert [f.id for f in page.items] == [1]
    assert clock.sleeps == [2.0, 5.0]
    assert rec.count == 3


def test_retry_after_http_date(make_client, clock) -> None:
    when = formatdate(clock.time() + 7, usegmt=True)
    rec = Recorder(raw(b"", 503, {"Retry-After": when}), FINDINGS_OK)
    make_client(rec).list_findings()
    assert clock.sleeps == [7.0]


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after(formatdate(1_000_010, usegmt=True), now=1_000_000) == 10.0
    assert parse_retry_after(formatdate(999_990, usegmt=True), now=1_000_000) == 0.0  # a date in the past
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


def test_retry_after_larger_than_the_remaining_budget_gives_up_at_once(make_client, clock) -> None:
    rec = Recorder(raw(b'{"error":"rate"}', 429, {"Retry-After": "61"}))
    with pytest.raises(RateLimitedError) as info:
        make_client(rec, retry_policy=fast_policy(max_total_seconds=60)).list_findings()
    assert rec.count == 1
    assert clock.sleeps == []
    assert info.value.retry_after == 61.0
    assert info.value.status_code == 429


def test_total_time_bound_counts_earlier_waits(make_client, clock) -> None:
    rec = Recorder(raw(b"", 429, {"Retry-After": "25"}), repeat_last=True)
    with pytest.raises(RateLimitedError):
        make_client(rec, retry_policy=fast_policy(max_retries=10, max_total_seconds=60)).list_findings()
    assert clock.sleeps == [25.0, 25.0]  # a third wait would end after 75 s > 60 s
    assert rec.count == 3


# --- 5xx and connection errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_retried_then_success(status: int, make_client, clock) -> None:
    rec = Recorder(raw(b"oops", status), FINDINGS_OK)
    page = make_client(rec).list_findings()
    assert page.items[0].id == 1
    assert rec.count == 2
    assert len(clock.sleeps) == 1
    assert 0.0005 <= clock.sleeps[0] <= 0.001


@pytest.mark.parametrize(
    ("status", "error"), [(429, RateLimitedError), (503, ServerError), (502, ServerError), (500, ServerError)]
)
def test_attempts_bounded_then_typed_error(status: int, error: type[FindingsApiError], make_client, clock) -> None:
    body = b'{"message": "backend unavailable", "trace": "' + b"x" * 1000 + b'"}'
    rec = Recorder(raw(body, status), repeat_last=True)
    with pytest.raises(error) as info:
        make_client(rec, retry_policy=fast_policy(max_retries=3)).get_scan(9)
    assert rec.count == 4  # one attempt plus max_retries retries
    assert len(clock.sleeps) == 3
    exc = info.value
    assert exc.status_code == status
    assert exc.endpoint == "scan_get"
    assert exc.body_excerpt.startswith('{"message": "backend unavailable"')
    assert len(exc.body_excerpt) <= 303
    assert exc.body_excerpt.endswith("...")
    assert f"HTTP {status}" in str(exc)
    assert "backend unavailable" in str(exc)


def test_max_retries_zero_means_one_attempt(make_client, clock) -> None:
    rec = Recorder(raw(b"", 503))
    with pytest.raises(ServerError):
        make_client(rec, retry_policy=fast_policy(max_retries=0)).list_findings()
    assert rec.count == 1
    assert clock.sleeps == []


def test_client_max_retries_argument_builds_the_policy(make_client, clock) -> None:
    rec = Recorder(raw(b"", 502), repeat_last=True)
    with pytest.raises(ServerError):
        make_client(rec, retry_policy=None, max_retries=2).list_findings()
    assert rec.count == 3
    assert len(clock.sleeps) == 2


def test_backoff_grows_with_jitter(make_client, clock) -> None:
    policy = RetryPolicy(max_retries=5, backoff_base=1.0, backoff_max=100.0, rng=random.Random(7))
    rec = Recorder(raw(b"", 503), repeat_last=True)
    with pytest.raises(ServerError):
        make_client(rec, retry_policy=policy).list_findings()
    waits = clock.sleeps
    assert len(waits) == 5
    for attempt, wait in enumerate(waits, start=1):
        cap = 2 ** (attempt - 1)
        assert cap / 2 <= wait <= cap
    assert waits == sorted(waits)
    assert waits[-1] > waits[0] * 4
    replay = random.Random(7)
    assert waits == [replay.uniform(2 ** (a - 1) / 2, 2 ** (a - 1)) for a in range(1, 6)]  # seeded jitter
    assert len({round(w / 2 ** (a - 1), 6) for a, w in enumerate(waits, start=1)}) > 1  # not a fixed fraction


def test_backoff_is_capped_and_differs_by_seed() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=8.0, rng=random.Random(1))
    assert all(4.0 <= policy.backoff(a) <= 8.0 for a in range(4, 30))
    one = [RetryPolicy(rng=random.Random(1)).backoff(a) for a in range(1, 5)]
    two = [RetryPolicy(rng=random.Random(2)).backoff(a) for a in range(1, 5)]
    assert one != two


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("connection refused"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("peer closed connection"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transport_errors_retried_for_get(error: Exception, make_client, clock) -> None:
    rec = Recorder(error, FINDINGS_OK)
    assert make_client(rec).list_findings().items[0].id == 1
    assert rec.count == 2
    assert len(clock.sleeps) == 1


def test_transport_errors_exhausted_become_transport_error(make_client) -> None:
    rec = Recorder(httpx.ConnectError("connection refused"), repeat_last=True)
    with pytest.raises(
        TransportError, match=r"ConnectError after 4 attempt\(s\): connection refused"
    ) as info:
        make_client(rec).list_policies()
    assert rec.count == 4
    assert info.value.endpoint == "policies_list"


def test_retries_are_logged_with_counts(make_client, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="findings_provider.client")
    rec = Recorder(raw(b"", 503), raw(b"", 429, {"Retry-After": "1"}), FINDINGS_OK)
    make_client(rec).list_findings()
    messages = [r.getMessage() for r in caplog.records if r.name == "findings_provider.client"]
    assert len(messages) == 2
    assert "GET findings after HTTP 503 (retry 1 of 3" in messages[0]
    assert "GET findings after HTTP 429 (retry 2 of 3, waiting 1.00s)" in messages[1]


# --- errors no retry can fix --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
def test_authentication_errors_not_retried(status: int, make_client, clock) -> None:
    rec = Recorder(raw(b'{"error": "unauthorized"}', status))
    with pytest.raises(AuthenticationError) as info:
        make_client(rec).list_findings()
    assert rec.count == 1
    assert clock.sleeps == []
    exc = info.value
    assert type(exc) is AuthenticationError
    assert exc.status_code == status
    assert "Web API access" in str(exc)
    assert "unauthorized" in exc.body_excerpt
    assert exc.retryable_by_task is False


def test_authentication_error_async(make_async_client) -> None:
    rec = Recorder(raw(b"", 401))
    with pytest.raises(AuthenticationError, match="Web API access"):
        call_async(make_async_client(rec), "get_scan", 5)
    assert rec.count == 1


@pytest.mark.parametrize(
    ("method", "args"),
    [("list_findings", ()), ("list_policies", ()), ("list_projects", ()), ("search_scans", ())],
)
def test_404_on_deployment_scoped_path_is_deployment_not_found(method: str, args: tuple, make_client) -> None:
    rec = Recorder(raw(b"Not Found", 404))
    with pytest.raises(DeploymentNotFoundError) as info:
        getattr(make_client(rec), method)(*args)
    assert rec.count == 1
    exc = info.value
    assert isinstance(exc, NotFoundError)
    assert isinstance(exc, AuthenticationError)
    assert exc.status_code == 404
    assert "deployment not found, or the API token lacks Web API access" in str(exc)


@pytest.mark.parametrize(
    ("method", "args"),
    [("get_scan", (5,)), ("list_policy_rules", (9,)), ("add_project_tags", ("org/repo", ["t"]))],
)
def test_404_on_an_object_is_not_found(method: str, args: tuple, make_client) -> None:
    rec = Recorder(raw(b"", 404))
    with pytest.raises(NotFoundError) as info:
        getattr(make_client(rec), method)(*args)
    assert not isinstance(info.value, DeploymentNotFoundError)
    assert rec.count == 1
    assert info.value.status_code == 404


@pytest.mark.parametrize(
    ("method", "args"),
    [("list_policies", ()), ("list_policy_rules", (9,)), ("update_rule_mode", (9, "a.b", "MODE_BLOCK"))],
)
def test_410_on_policy_endpoints_is_policy_api_retired(method: str, args: tuple, make_client) -> None:
    rec = Recorder(raw(b'{"error": "gone"}', 410))
    with pytest.raises(PolicyApiRetiredError, match="retired") as info:
        getattr(make_client(rec), method)(*args)
    assert rec.count == 1
    assert info.value.status_code == 410
    assert info.value.retryable_by_task is False


def test_410_elsewhere_is_not_policy_api_retired(make_client) -> None:
    rec = Recorder(raw(b"", 410))
    with pytest.raises(FindingsApiError) as info:
        make_client(rec).list_findings()
    assert not isinstance(info.value, PolicyApiRetiredError)
    assert info.value.status_code == 410
    assert rec.count == 1


@pytest.mark.parametrize("status", [400, 422])
def test_400_is_validation_error(status: int, make_client) -> None:
    rec = Recorder(raw(b'{"error": "bad severities"}', status))
    with pytest.raises(ValidationError) as info:
        make_client(rec).list_findings()
    assert rec.count == 1
    assert info.value.status_code == status
    assert "bad severities" in info.value.body_excerpt


def test_unexpected_status_is_the_base_error(make_client) -> None:
    rec = Recorder(raw(b"teapot", 418))
    with pytest.raises(FindingsApiError, match="HTTP 418") as info:
        make_client(rec).list_findings()
    assert type(info.value) is FindingsApiError
    assert rec.count == 1


# --- ticket creation: never retried after an ambiguous failure ----------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_tickets_5xx_is_ambiguous_after_one_request(status: int, make_client, clock) -> None:
    rec = Recorder(raw(b"upstream failed", status), TICKETS_OK)
    with pytest.raises(AmbiguousWriteError) as info:
        create_tickets(make_client(rec))
    assert rec.count == 1
    assert clock.sleeps == []
    exc = info.value
    assert exc.status_code == status
    assert exc.endpoint == "tickets"
    assert "external_ticket" in str(exc)
    assert "upstream failed" in exc.body_excerpt


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("server disconnected"),
        httpx.WriteError("x"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_tickets_lost_response_is_ambiguous_after_one_request(error: Exception, make_client, clock) -> None:
    rec = Recorder(error, TICKETS_OK)
    with pytest.raises(AmbiguousWriteError, match=type(error).__name__):
        create_tickets(make_client(rec))
    assert rec.count == 1
    assert clock.sleeps == []


@pytest.mark.parametrize(
    "error", [httpx.ConnectError("refused"), httpx.ConnectTimeout("timeout")], ids=lambda e: type(e).__name__
)
def test_tickets_connect_error_is_retried(error: Exception, make_client) -> None:
    rec = Recorder(error, TICKETS_OK)
    result = create_tickets(make_client(rec))
    assert result.succeeded[0].ticket_id == 1
    assert rec.count == 2


def test_tickets_connect_error_exhausted_is_transport_error_not_ambiguous(make_client) -> None:
    rec = Recorder(httpx.ConnectError("refused"), repeat_last=True)
    with pytest.raises(TransportError) as info:
        create_tickets(make_client(rec))
    assert not isinstance(info.value, AmbiguousWriteError)
    assert rec.count == 4


def test_tickets_429_is_retried(make_client, clock) -> None:
    rec = Recorder(raw(b"", 429, {"Retry-After": "4"}), TICKETS_OK)
    assert create_tickets(make_client(rec)).succeeded[0].issue_ids == [5]
    assert rec.count == 2
    assert clock.sleeps == [4.0]


def test_tickets_malformed_body_is_ambiguous(make_client) -> None:
    rec = Recorder(raw(b'{"failed": [], "succ'), TICKETS_OK)
    with pytest.raises(AmbiguousWriteError) as info:
        create_tickets(make_client(rec))
    assert rec.count == 1
    assert info.value.status_code == 200
    assert isinstance(info.value.__cause__, ResponseDecodeError)


def test_tickets_400_is_validation_error_not_ambiguous(make_client) -> None:
    rec = Recorder(raw(b"", 400))
    with pytest.raises(ValidationError):
        create_tickets(make_client(rec))
    assert rec.count == 1


def test_tickets_ambiguity_async(make_async_client) -> None:
    rec = Recorder(raw(b"", 503), TICKETS_OK)
    with pytest.raises(AmbiguousWriteError):
        call_async(make_async_client(rec), "create_tickets", issue_type="sca", issue_ids=["7"])
    assert rec.count == 1
    rec2 = Recorder(httpx.ReadTimeout("lost"), TICKETS_OK)
    with pytest.raises(AmbiguousWriteError):
        call_async(make_async_client(rec2), "create_tickets", issue_type="sca", issue_ids=["7"])
    assert rec2.count == 1


def test_bulk_triage_is_retried(make_client) -> None:
    """Triage sets a state: sending it twice has the same effect, so it is retried like a read."""
    rec = Recorder(raw(b"", 503), {"num_triaged": 1, "triaged_issues": [5]})
    result = make_client(rec).bulk_triage(issue_type="sast", issue_ids=[5], new_triage_state="fixing")
    assert result.num_triaged == 1
    assert rec.count == 2


# --- response bodies ----------------------------------------------------------------------------------------


def test_malformed_json_on_get_is_retried_then_succeeds(make_client, clock) -> None:
    rec = Recorder(raw(b'{"findings": [{"id": 1}, {"id"'), FINDINGS_OK)
    assert make_client(rec).list_findings().items[0].id == 1
    assert rec.count == 2
    assert len(clock.sleeps) == 1


def test_malformed_json_exhausted(make_client) -> None:
    rec = Recorder(raw(b"<html>proxy error"), repeat_last=True)
    with pytest.raises(ResponseDecodeError) as info:
        make_client(rec).get_scan(1)
    assert info.value.malformed is True
    assert "proxy error" in info.value.body_excerpt
    assert rec.count == 4


def test_wrong_shape_is_decode_error_without_retry(make_client, clock) -> None:
    rec = Recorder({"scans": [{"id": "1", "exit_code": "not a number"}]}, repeat_last=True)
    with pytest.raises(ResponseDecodeError) as info:
        make_client(rec).search_scans()
    assert rec.count == 1
    assert clock.sleeps == []
    exc = info.value
    assert exc.malformed is False
    assert "scans.0.exit_code" in str(exc)
    assert "ScansPage" in str(exc)


def test_wrong_shape_raw_page_is_decode_error_without_retry(make_client) -> None:
    rec = Recorder({"findings": {"not": "a list"}}, repeat_last=True)
    client = make_client(rec)
    with pytest.raises(ResponseDecodeError) as info:
        list(client.raw_pages(client.list_findings))
    assert info.value.malformed is False
    assert rec.count == 1


def test_wrong_shape_async(make_async_client) -> None:
    rec = Recorder([1, 2, 3], repeat_last=True)
    with pytest.raises(ResponseDecodeError):
        call_async(make_async_client(rec), "list_findings")
    assert rec.count == 1


# --- exceptions pickle --------------------------------------------------------------------------------------


def _exceptions() -> list[FindingsApiError]:
    kw: dict[str, Any] = {"status_code": 503, "endpoint": "findings", "body_excerpt": "busy"}
    return [
        FindingsApiError("base", **kw),
        ConfigurationError("bad url"),
        ValidationError("bad value", field="page_size", **kw),
        AuthenticationError("auth", **kw),
        NotFoundError("nf", **kw),
        DeploymentNotFoundError("dnf", **kw),
        PolicyApiRetiredError("gone", **kw),
        RateLimitedError("rl", retry_after=3.5, **kw),
        ServerError("se", **kw),
        TransportError("te", endpoint="findings"),
        ResponseDecodeError("rd", malformed=True, **kw),
        AmbiguousWriteError("amb", **kw),
        PaginationError("loop", endpoint="scans_search"),
    ]


@pytest.mark.parametrize("exc", _exceptions(), ids=lambda e: type(e).__name__)
def test_exceptions_pickle_round_trip(exc: FindingsApiError) -> None:
    back = pickle.loads(pickle.dumps(exc))  # noqa: S301 (our own bytes)
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert back.args == exc.args
    for name in ("message", "status_code", "endpoint", "body_excerpt", "field", "retry_after", "malformed"):
        assert getattr(back, name, None) == getattr(exc, name, None), name


def test_raised_exceptions_pickle_round_trip(make_client) -> None:
    rec = Recorder(raw(b"nope", 429, {"Retry-After": "500"}))
    with pytest.raises(RateLimitedError) as info:
        make_client(rec).list_findings()
    back = pickle.loads(pickle.dumps(info.value))  # noqa: S301 (our own bytes)
    assert (back.status_code, back.retry_after, back.body_excerpt) == (429, 500.0, "nope")


def test_error_message_format() -> None:
    exc = ServerError("server error", status_code=502, endpoint="findings", body_excerpt="bad gateway")
    assert str(exc) == "[findings] HTTP 502: server error (response: bad gateway)"
    assert ok({}).status_code == 200  # helper sanity: default response is a 200
