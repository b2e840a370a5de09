"""Limits of one attempt: a total deadline while the body is read (a server dripping bytes) and a size cap.

Time is the fake clock's: a dripping body advances it per chunk (``dripped``), nothing sleeps.
"""

from __future__ import annotations

import gzip
import json

import httpx
import pytest
from findings_provider.client import (
    AmbiguousWriteError,
    AsyncFindingsClient,
    FindingsClient,
    ResponseTooLargeError,
    TransportError,
)
from findings_provider.client.errors import ConfigurationError

from .conftest import Recorder, call_async, client_kwargs, dripped, raw

FINDINGS = json.dumps({"findings": [{"id": i} for i in range(50)]}).encode()
TICKETS = json.dumps({"failed": [], "skipped": [], "succeeded": [{"ticket_id": 1, "issue_ids": [5]}]}).encode()


# --- total deadline per attempt -----------------------------------------------------------------------------------


def test_a_dripping_body_hits_the_total_deadline_and_is_retried(make_client, clock) -> None:
    """Every chunk comes within httpx's read timeout, yet the whole body would take 40 s: cut at 25 s, retried;
    the deadline is per attempt (the second attempt's 20 s drip is within it)."""
    rec = Recorder(dripped(clock, FINDINGS, pieces=4, gap=10.0), dripped(clock, FINDINGS, pieces=4, gap=5.0))
    page = make_client(rec, total_timeout=25).list_findings()
    assert len(page.items) == 50
    assert rec.count == 2


def test_the_total_deadline_exhausted_is_a_timeout_transport_error(make_client, clock) -> None:
    rec = Recorder(*[dripped(clock, FINDINGS, pieces=10, gap=3.0) for _ in range(4)])
    with pytest.raises(TransportError, match=r"ReadTimeout after 4 attempt\(s\): .*total deadline of 5 s") as info:
        make_client(rec, total_timeout=5).get_scan(1)
    assert info.value.endpoint == "scan_get"
    assert rec.count == 4


def test_the_total_deadline_async(make_async_client, clock) -> None:
    rec = Recorder(dripped(clock, FINDINGS, pieces=4, gap=10.0), raw(FINDINGS))
    page = call_async(make_async_client(rec, total_timeout=25), "list_findings")
    assert len(page.items) == 50
    assert rec.count == 2


def test_ticket_creation_past_the_total_deadline_is_ambiguous(make_client, make_async_client, clock) -> None:
    rec = Recorder(dripped(clock, TICKETS, pieces=4, gap=10.0), raw(TICKETS))
    with pytest.raises(AmbiguousWriteError, match="ReadTimeout"):
        make_client(rec, total_timeout=25).create_tickets(issue_type="sast", issue_ids=[5])
    assert rec.count == 1
    rec = Recorder(dripped(clock, TICKETS, pieces=4, gap=10.0), raw(TICKETS))
    with pytest.raises(AmbiguousWriteError, match="ReadTimeout"):
        call_async(make_async_client(rec, total_timeout=25), "create_tickets", issue_type="sast", issue_ids=[5])
    assert rec.count == 1


@pytest.mark.parametrize(("timeout", "total"), [(30.0, 120.0), (5.0, 60.0), (100.0, 400.0)])
def test_default_total_timeout_is_four_times_the_timeout_and_at_least_a_minute(timeout, total) -> None:
    for cls in (FindingsClient, AsyncFindingsClient):
        assert cls(**client_kwargs(timeout=timeout)).total_timeout == total
    assert FindingsClient(**client_kwargs(timeout=timeout, total_timeout=7)).total_timeout == 7.0


# --- size cap -----------------------------------------------------------------------------------------------------


def test_default_size_cap_is_128_mib() -> None:
    assert FindingsClient(**client_kwargs()).max_response_bytes == 128 * 1024 * 1024


def test_a_body_beyond_the_size_cap_is_refused_without_retry(make_client, clock) -> None:
    rec = Recorder(raw(FINDINGS), repeat_last=True)
    with pytest.raises(ResponseTooLargeError) as info:
        make_client(rec, max_response_bytes=len(FINDINGS) - 1).list_findings()
    assert rec.count == 1
    assert clock.sleeps == []
    assert info.value.endpoint == "findings"
    assert f"size cap of {len(FINDINGS) - 1} bytes" in str(info.value)
    assert info.value.retryable_by_task is False  # the same request meets the same answer: raise the cap
    # exactly at the cap: read
    assert len(make_client(Recorder(raw(FINDINGS)), max_response_bytes=len(FINDINGS)).list_findings().items) == 50


def test_a_streamed_body_without_length_is_cut_at_the_cap(make_client, clock) -> None:
    rec = Recorder(dripped(clock, FINDINGS, pieces=8, gap=0.0))
    with pytest.raises(ResponseTooLargeError):
        make_client(rec, max_response_bytes=100).list_findings()
    assert rec.count == 1


def test_the_cap_counts_decoded_bytes(make_client) -> None:
    """A small gzip body that inflates beyond the cap (a compression bomb) is refused."""
    bomb = gzip.compress(b'{"findings": []' + b" " * 1_000_000 + b"}")
    response = httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=httpx.ByteStream(bomb))
    with pytest.raises(ResponseTooLargeError):
        make_client(Recorder(response), max_response_bytes=100_000).list_findings()


def test_the_size_cap_async_and_for_ticket_creation(make_async_client, make_client) -> None:
    rec = Recorder(raw(FINDINGS))
    with pytest.raises(ResponseTooLargeError):
        call_async(make_async_client(rec, max_response_bytes=10), "list_findings")
    rec = Recorder(raw(TICKETS), raw(TICKETS))
    with pytest.raises(AmbiguousWriteError, match="size cap") as info:
        make_client(rec, max_response_bytes=10).create_tickets(issue_type="sast", issue_ids=[5])
    assert isinstance(info.value.__cause__, ResponseTooLargeError)
    assert rec.count == 1


@pytest.mark.parametrize("options", [{"total_timeout": 0}, {"total_timeout": -5}, {"max_response_bytes": 0}])
def test_limits_must_be_positive(options) -> None:
    with pytest.raises(ConfigurationError, match=next(iter(options))):
        FindingsClient(**client_kwargs(**options))


def test_a_body_that_cannot_be_decoded_is_retried_like_a_broken_response(make_client) -> None:
    """httpx raises ``DecodingError`` (not a ``TransportError``) for a broken gzip body: retried, never raw."""
    broken = httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=httpx.ByteStream(b"not gzip"))
    rec = Recorder(broken, raw(FINDINGS))
    assert len(make_client(rec).list_findings().items) == 50
    assert rec.count == 2
