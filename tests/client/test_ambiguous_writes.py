"""Ticket creation (the first non-idempotent write): every outcome but a valid ticket response or a definite refusal
before processing is ``AmbiguousWriteError``, whatever form the surprise takes; never sent twice.

Each table is checked as a whole, so a failure lists every surprise that escaped as something else. The writes of
api-notes (a project update or deletion, ticket links, an SBOM export) are never sent twice either; their reads are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import pytest
from findings_provider.client import (
    AmbiguousWriteError,
    AuthenticationError,
    FindingsApiError,
    NotFoundError,
    ResponseDecodeError,
    TransportError,
    ValidationError,
)

from .conftest import Recorder, call_async, ok, raw
from .fixtures import operations as fx

TICKETS_OK = {"failed": [], "skipped": [], "succeeded": [{"ticket_id": 1, "issue_ids": [5]}]}
HTML = b"<!DOCTYPE html><html><body><h1>Maintenance</h1></body></html>"


class Boom(Exception):
    """An exception no HTTP library raises: a bug or an unexpected failure below the client."""


def raises(error: BaseException) -> Callable[[httpx.Request], Any]:
    def answer(request: httpx.Request) -> Any:
        raise error

    return answer


def gzipped(body: bytes) -> httpx.Response:
    """A 200 whose body is sent gzip-encoded (not decoded before the client reads it)."""
    return httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=httpx.ByteStream(body))


def surprises() -> dict[str, Any]:
    """Answers after which the server may have created tickets (the request reached it): all ambiguous."""
    return {
        "200 HTML": raw(HTML, 200, {"Content-Type": "text/html"}),
        "200 empty body": raw(b"", 200),
        "204 no content": raw(b"", 204),
        "200 JSON list": ok([TICKETS_OK]),
        "200 JSON in an envelope": ok({"data": TICKETS_OK}),
        "200 JSON object of another shape": ok({"status": "accepted"}),
        "200 failing validation": ok({"succeeded": [{"ticket_id": "not a number", "issue_ids": [5]}]}),
        "201 failing validation": ok({"failed": "none"}, 201),
        "200 broken gzip": gzipped(b"not gzip at all"),
        "101 switching protocols": raw(b"", 101),
        "301 moved": raw(b"", 301, {"Location": "https://elsewhere.example.com/"}),
        "302 found": raw(b"", 302, {"Location": "/elsewhere"}),
        "303 see other": raw(b"", 303, {"Location": "/elsewhere"}),
        "307 temporary redirect": raw(b"", 307, {"Location": "/elsewhere"}),
        "500": raw(b"oops", 500),
        "503": raw(b"", 503),
        "read timeout": httpx.ReadTimeout("read timed out"),
        "server disconnected": httpx.RemoteProtocolError("server disconnected"),
        "unexpected exception": raises(Boom("something unexpected")),
        "unexpected OSError": raises(OSError("connection reset")),
    }


def refusals() -> dict[str, tuple[Any, type[FindingsApiError]]]:
    """Answers proving the server did not act (a 4xx, or a connection that never opened): never ambiguous."""
    return {
        "400": (raw(b'{"error": "bad"}', 400), ValidationError),
        "401": (raw(b"", 401), AuthenticationError),
        "404": (raw(b"", 404), NotFoundError),
        "409": (raw(b"", 409), FindingsApiError),
        "connect error": (httpx.ConnectError("refused"), TransportError),
        "pool timeout": (httpx.PoolTimeout("no connection free"), TransportError),
    }


def create_tickets(client) -> Any:
    return client.create_tickets(issue_type="sast", issue_ids=[5])


def misjudged(outcome: Callable[[], Any], rec: Recorder, expected: type[FindingsApiError]) -> str | None:
    """What is wrong with the outcome of one answer (``None``: ``expected``, ambiguity only after one request)."""
    try:
        result = outcome()
    except FindingsApiError as exc:
        if expected is AmbiguousWriteError:
            if not isinstance(exc, AmbiguousWriteError):
                return f"{type(exc).__name__}: {exc}"
            if rec.count != 1:
                return f"{rec.count} requests"
            if "external_ticket" not in str(exc):
                return f"no advice in {exc}"
        elif isinstance(exc, AmbiguousWriteError) or not isinstance(exc, expected):
            return f"{type(exc).__name__}: {exc}"
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"a result: {result!r}"


def table() -> dict[str, tuple[Any, type[FindingsApiError]]]:
    return {**{name: (answer, AmbiguousWriteError) for name, answer in surprises().items()}, **refusals()}


def test_every_surprise_after_sending_is_ambiguous_and_only_those(make_client) -> None:
    wrong = {}
    for name, (answer, expected) in table().items():
        rec = Recorder(answer, repeat_last=True)
        problem = misjudged(partial(lambda r: create_tickets(make_client(r)), rec), rec, expected)
        if problem:
            wrong[name] = problem
    assert not wrong, wrong


def test_every_surprise_after_sending_is_ambiguous_and_only_those_async(make_async_client) -> None:
    wrong = {}
    for name, (answer, expected) in table().items():
        rec = Recorder(answer, repeat_last=True)
        client = make_async_client(rec)
        problem = misjudged(
            partial(call_async, client, "create_tickets", issue_type="sast", issue_ids=[5]),
            rec,
            expected,
        )
        if problem:
            wrong[name] = problem
    assert not wrong, wrong


def test_a_wrong_shape_is_ambiguous_with_the_decode_error_as_cause(make_client) -> None:
    rec = Recorder(ok({"data": TICKETS_OK}))
    with pytest.raises(AmbiguousWriteError) as info:
        create_tickets(make_client(rec))
    assert info.value.status_code == 200
    assert info.value.endpoint == "tickets"
    assert "not its documented response" in str(info.value)
    assert isinstance(info.value.__cause__, ResponseDecodeError)
    assert "TicketResult" in str(info.value.__cause__)


def test_a_redirect_is_not_followed_and_is_ambiguous(make_client) -> None:
    rec = Recorder(raw(b"", 302, {"Location": "https://elsewhere.example.com/tickets"}), TICKETS_OK)
    with pytest.raises(AmbiguousWriteError) as info:
        create_tickets(make_client(rec))
    assert info.value.status_code == 302
    assert [str(r.url.host) for r in rec.requests] == ["findings.example.com"]


def test_an_unexpected_exception_is_ambiguous_and_named(make_client) -> None:
    rec = Recorder(raises(Boom("something unexpected")))
    with pytest.raises(AmbiguousWriteError, match="Boom: something unexpected") as info:
        create_tickets(make_client(rec))
    assert info.value.__cause__ is None  # an arbitrary exception may hold anything: not chained


# --- the writes and reads beyond the reference (api-notes) -----------------------------------------------------

#: Each new write, called with valid input, with the advice its ambiguity message gives.
NEW_WRITES: dict[str, tuple[Callable[[Any], Any], str]] = {
    "update_project": (lambda c: c.update_project("org/repo", primary_branch="refs/heads/dev"), "get_project"),
    "delete_project": (lambda c: c.delete_project("org/repo"), "NotFoundError once it is deleted"),
    "start_sbom_export": (lambda c: c.start_sbom_export(7), "second job"),
    "link_ticket": (lambda c: c.link_ticket("https://t.example.com/SEC-1", [1]), "external_ticket"),
    "unlink_tickets": (lambda c: c.unlink_tickets([1]), "external_ticket"),
    "delete_ticket_link": (lambda c: c.delete_ticket_link(12), "external_ticket"),
}

#: Each new read, and a valid answer of it.
NEW_READS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "ping": (lambda c: c.ping(), {}),
    "get_project": (lambda c: c.get_project("org/repo"), fx.project_real()),
    "list_lockfiles": (lambda c: c.list_lockfiles(7), fx.lockfiles_real()),
    "get_sbom_export": (lambda c: c.get_sbom_export("tt-1"), fx.sbom_status_real()),
    "download_sbom": (lambda c: c.download_sbom(fx.DOWNLOAD_URL), fx.cyclonedx()),
}


@pytest.mark.parametrize("name", list(NEW_WRITES))
@pytest.mark.parametrize("answer", ["503", "500", "read timeout"])
def test_a_new_write_is_never_sent_twice_after_an_ambiguous_answer(name, answer, make_client) -> None:
    call, advice = NEW_WRITES[name]
    rec = Recorder(surprises()[answer], ok({}), repeat_last=False)
    with pytest.raises(AmbiguousWriteError) as info:
        call(make_client(rec))
    assert rec.count == 1
    assert "the server may have acted on it" in str(info.value)
    assert advice in str(info.value)


@pytest.mark.parametrize("name", list(NEW_WRITES))
def test_a_new_write_answered_429_is_sent_again(name, make_client) -> None:
    call, _ = NEW_WRITES[name]
    answers = {
        "update_project": fx.project_real(), "delete_project": fx.project_deleted_real(),
        "start_sbom_export": fx.sbom_task_real(), "link_ticket": fx.ticket_link_real(),
        "unlink_tickets": fx.ticket_unlink_real(), "delete_ticket_link": fx.ticket_link_deleted_real(),
    }
    rec = Recorder(raw(b"", 429, {"Retry-After": "1"}), ok(answers[name]))
    call(make_client(rec))  # 429: the server did not act, so sending again is safe
    assert rec.count == 2


@pytest.mark.parametrize("name", list(NEW_READS))
def test_a_new_read_answered_503_is_sent_again(name, make_client, make_async_client) -> None:
    call, answer = NEW_READS[name]
    rec = Recorder(raw(b"", 503), httpx.ReadTimeout("slow"), ok(answer))
    call(make_client(rec))
    assert rec.count == 3
    rec = Recorder(raw(b"", 503), ok(answer))

    async def go() -> Any:
        async with make_async_client(rec) as client:
            return await call(client)

    asyncio.run(go())
    assert rec.count == 2
