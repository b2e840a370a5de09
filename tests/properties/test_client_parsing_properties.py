"""Property tests of the client's response parsing: whatever the server sends, the client returns exactly what
was sent or raises a typed ``FindingsApiError``; never another exception, never a silently different value.

The network is mocked at the transport (``httpx.MockTransport``); the retry policy has no delays.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from chaos.harness import tally
from findings_provider.client import (
    AmbiguousWriteError,
    AuthenticationError,
    FindingsApiError,
    FindingsClient,
    NotFoundError,
    RateLimitedError,
    ResponseDecodeError,
    RetryPolicy,
    ServerError,
    ValidationError,
)
from findings_provider.client.canonical import FINDING_FIELDS
from findings_provider.client.models import Finding
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from present import present

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

UTC = timezone.utc
TOKEN = "prop-token-0f9e"


def client_for(handler: Any, max_retries: int = 0) -> FindingsClient:
    policy = RetryPolicy(max_retries=max_retries, backoff_base=0.0, backoff_max=0.0, rng=random.Random(0))
    return FindingsClient("https://findings.example.com", TOKEN, deployment_id="7", deployment_slug="acme",
                          transport=httpx.MockTransport(handler), retry_policy=policy)


def answering(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    return lambda request: httpx.Response(status, content=body, headers=headers or {})


# --- generated findings in every shape the service uses ------------------------------------------------------------

MOMENTS = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC)
)


def render(moment: datetime, style: int) -> str:
    """The three timestamp shapes of the service (api-notes)."""
    if style == 0:
        return moment.isoformat(sep=" ", timespec="microseconds")
    if style == 1:
        return moment.isoformat(timespec="milliseconds")[:-6] + "Z"
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def as_rendered(moment: datetime, style: int) -> datetime:
    """The moment a rendering denotes (milliseconds style drops the microseconds)."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000) if style == 1 else moment


UNKNOWN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
KNOWN_FIELDS = {"id", "severity", "relevant_since", "created_at", "status", "repository", "rule_name",
                "external_ticket", "first_seen_scan_id", "assistant", "is_malicious", "location", "categories"}
#: Every key the model reads (its fields, their aliases, and the first key of each canonical source path): an
#: unknown field is none of these (``type`` beside an empty ``rule_name``, say, is read as the rule's name).
READ_KEYS = KNOWN_FIELDS | {path[0] for _, paths in FINDING_FIELDS.values() for path in paths} | {
    name for field_name, info in Finding.model_fields.items()
    for name in (field_name, info.alias, *(getattr(info.validation_alias, "choices", None) or ()))
    if isinstance(name, str)}


@st.composite
def findings(draw: Any, ids: Any = None) -> dict[str, Any]:
    relevant, r_style = draw(MOMENTS), draw(st.integers(0, 2))
    created, c_style = draw(MOMENTS), draw(st.integers(0, 2))
    finding = {
        "id": draw(ids) if ids is not None else draw(st.integers(1, 2**53)),
        "severity": draw(st.sampled_from(["low", "medium", "high", "critical"])),
        "status": draw(st.sampled_from(["open", "fixed", "ignored", "reviewing", "fixing"])),
        "relevant_since": render(relevant, r_style),
        "created_at": render(created, c_style),
        "repository": {"name": draw(st.text(min_size=1, max_size=20)), "url": "https://git.example.com/x"},
        "rule_name": draw(st.text(max_size=30)),
        "first_seen_scan_id": draw(st.integers(0, 2**53)),
        "is_malicious": draw(st.booleans()),
        "categories": draw(st.lists(st.text(max_size=8), max_size=3)),
        "location": {"filePath": draw(st.text(max_size=20)), "line": draw(st.integers(0, 10**6))},
    }
    if draw(st.booleans()):
        finding["external_ticket"] = {"id": draw(st.integers(1, 2**40)), "url": "https://t.example.com/1",
                                      "externalSlug": "SEC-1", "linkedIssueIds": [finding["id"]]}
    if draw(st.booleans()):
        finding["assistant"] = {"autotriage": {"verdict": draw(st.sampled_from(["true_positive", "false_positive"])),
                                               "reason": "r"}}
    # fields the client does not know: kept, never an error (every endpoint is labelled experimental)
    extra = draw(st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in READ_KEYS),
                                 UNKNOWN, max_size=3))
    finding.update(extra)
    finding["_expect"] = {"relevant_since": as_rendered(relevant, r_style), "created_at": as_rendered(created, c_style)}
    return finding


def strip(finding: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in finding.items() if k != "_expect"}


def page(items: list[dict[str, Any]], shape: str, issue_type: str = "sast") -> bytes:
    items = [strip(i) for i in items]
    if shape == "flat":
        return json.dumps({"findings": items}).encode()
    key, other = ("scaFindings", "sastFindings") if issue_type == "sca" else ("sastFindings", "scaFindings")
    return json.dumps({key: {"findings": items}, other: {"findings": []}}).encode()


# --- 1. a well-formed page comes back exactly -----------------------------------------------------------------------


@SETTINGS
@given(items=st.lists(findings(), max_size=8, unique_by=lambda f: f["id"]), shape=st.sampled_from(["ref", "flat"]),
       issue_type=st.sampled_from(["sast", "sca"]))
def test_a_findings_page_is_parsed_to_exactly_its_values(
    items: list[dict[str, Any]], shape: str, issue_type: str
) -> None:
    tally("hypothesis.examples.findings_page_exact")
    body = page(items, shape, issue_type)
    with client_for(answering(body)) as client:
        parsed = client.list_findings(issue_type).items
        raw_pages = list(client.raw_pages(client.list_findings, issue_type, page_size=100))
    assert [f.id for f in parsed] == [f["id"] for f in items]
    for finding, source in zip(parsed, items, strict=True):
        assert finding.severity == source["severity"]
        assert finding.status == source["status"]
        assert finding.relevant_since == source["_expect"]["relevant_since"]
        assert finding.created_at == source["_expect"]["created_at"]
        assert finding.relevant_since.utcoffset() == timedelta(0)
        assert present(finding.repository).name == source["repository"]["name"]
        assert finding.first_seen_scan_id == source["first_seen_scan_id"]
        assert finding.is_malicious is source["is_malicious"]
        assert finding.categories == source["categories"]
        assert present(finding.location).line == source["location"]["line"]
        assert finding.ticket_id == (source.get("external_ticket") or {}).get("id")
        assert finding.autotriage_verdict == ((source.get("assistant") or {}).get("autotriage") or {}).get("verdict")
        for key in set(source) - KNOWN_FIELDS - {"_expect"}:
            assert (finding.model_extra or {})[key] == source[key], key
    # the extraction fast path keeps every finding's bytes: they decode to exactly what was sent
    assert len(raw_pages) == 1
    assert [json.loads(bytes(i)) for i in raw_pages[0].items] == [strip(i) for i in items]


# --- 2. paging over any number of findings yields each exactly once ---------------------------------------------------


@SETTINGS
@given(total=st.integers(0, 650), page_size=st.sampled_from([100, 150, 300]), overlap=st.integers(0, 5),
       shape=st.sampled_from(["ref", "flat"]))
@example(total=445, page_size=150, overlap=5, shape="ref")  # the last data fills a whole page
def test_paging_yields_every_finding_once(total: int, page_size: int, overlap: int, shape: str) -> None:
    """A server that repeats the last ``overlap`` items of each page on the next (a result set that moved while
    paging, api-notes) still yields every finding once; the pull stops at the first short page."""
    tally("hypothesis.examples.paging_exact")
    data = [{"id": 10_000 + i, "severity": "low"} for i in range(total)]
    requested: list[int] = []

    def chunk(number: int) -> list[dict[str, Any]]:
        start = max(0, number * page_size - (overlap if number else 0))
        return data[start : number * page_size + page_size]

    def handler(request: httpx.Request) -> httpx.Response:
        number = int(request.url.params["page"])
        assert int(request.url.params["page_size"]) == page_size
        requested.append(number)
        return httpx.Response(200, content=page(chunk(number), shape))

    with client_for(handler) as client:
        ids = [f.id for f in client.items(client.list_findings, "sast", page_size=page_size)]
    assert ids == [f["id"] for f in data]
    assert requested == list(range(len(requested)))  # pages in order, no page twice
    # up to the first page the server answers short: with the overlap, the last data can fill a whole page (445
    # findings, 150 a page, 5 repeated: page 2 holds 150), and only the next, empty page ends the pull
    first_short = next(n for n in range(total // page_size + 2) if len(chunk(n)) < page_size)
    assert len(requested) == first_short + 1


# --- 3. wrong types in known fields are refused, never coerced into another value -------------------------------------

WRONG = {
    "int": st.sampled_from([True, False, 1.5, "abc", "", [], {}, [1], {"id": 1}]),
    "str": st.sampled_from([1, 0, 2.5, True, [], ["a"], {}, {"name": "x"}]),
    "timestamp": st.sampled_from([True, [], {}, "not a date", "2020-13-45T00:00:00Z", "yesterday", [2020]]),
    "object": st.sampled_from([1, "x", True, [1, 2], 2.5]),
    "bool": st.sampled_from([2, -1, "maybe", [], {}, 0.5]),
    "list": st.sampled_from([1, True, {"a": 1}, 2.5]),
}
FIELDS = {
    ("id",): "int",
    ("first_seen_scan_id",): "int",
    ("severity",): "str",
    ("status",): "str",
    ("relevant_since",): "timestamp",
    ("created_at",): "timestamp",
    ("repository",): "object",
    ("repository", "name"): "str",
    ("location", "line"): "int",
    ("external_ticket",): "object",
    ("external_ticket", "id"): "int",
    ("is_malicious",): "bool",
    ("categories",): "list",
}


@SETTINGS
@given(finding=findings(), field=st.sampled_from(sorted(FIELDS)), data=st.data())
def test_a_wrong_type_in_a_known_field_is_a_typed_error_naming_it(finding: dict[str, Any], field: tuple[str, ...],
                                                                   data: Any) -> None:
    tally("hypothesis.examples.wrong_types")
    wrong = data.draw(WRONG[FIELDS[field]], label="wrong value")
    if field[0] == "external_ticket" and "external_ticket" not in finding:
        finding["external_ticket"] = {"id": 1}
    target = finding
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = wrong
    with client_for(answering(page([finding], "ref"))) as client, pytest.raises(ResponseDecodeError) as caught:
        client.list_findings()
    assert caught.value.malformed is False
    assert ".".join(field) in str(caught.value)


def test_ids_given_as_digit_strings_keep_their_value() -> None:
    """Leniency is fine where the value is the same (the service sends ids as strings on some endpoints)."""
    with client_for(answering(page([{"id": "12345", "first_seen_scan_id": 7.0}], "ref"))) as client:
        (finding,) = client.list_findings().items
    assert finding.id == 12345
    assert finding.first_seen_scan_id == 7


# --- 4. malformed bodies and error statuses: typed errors for every operation ---------------------------------

VALID_BODIES = [
    b'{"sastFindings": {"findings": [{"id": 1, "severity": "high"}]}, "scaFindings": {"findings": []}}',
    b'{"scans": [{"id": "5", "status": "SCAN_STATUS_COMPLETED"}], "cursor": "abc"}',
    b'{"num_triaged": 2, "triaged_issues": [1, 2]}',
    b'{"failed": [], "skipped": [], "succeeded": [{"ticket_id": 1, "issue_ids": [1]}]}',
    b'{"projects": [{"name": "org/repo", "tags": ["a"]}]}',
]
OPERATIONS = {
    "list_findings": lambda c: c.list_findings(),
    "raw_pages": lambda c: list(c.raw_pages(c.list_findings, page_size=100)),
    "search_scans": lambda c: c.search_scans(),
    "get_scan": lambda c: c.get_scan(5),
    "bulk_triage": lambda c: c.bulk_triage(issue_type="sast", issue_ids=[1], new_triage_state="reviewing"),
    "create_tickets": lambda c: c.create_tickets(issue_type="sast", issue_ids=["1"]),
    "list_projects": lambda c: c.list_projects(),
    "list_policy_rules": lambda c: c.list_policy_rules(3),
    "list_deployments": lambda c: c.list_deployments(),
}
MALFORMED = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(VALID_BODIES).flatmap(lambda b: st.integers(0, len(b) - 1).map(lambda n: b[:n])),  # truncated
    st.sampled_from(VALID_BODIES).flatmap(  # one byte flipped
        lambda b: st.tuples(st.integers(0, len(b) - 1), st.integers(0, 255)).map(
            lambda t: b[: t[0]] + bytes([t[1]]) + b[t[0] + 1 :])),
    st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(),
                 lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
)


@SETTINGS
@given(body=MALFORMED, operation=st.sampled_from(sorted(OPERATIONS)))
def test_any_2xx_body_is_a_result_or_a_typed_error(body: bytes, operation: str) -> None:
    tally("hypothesis.examples.malformed_bodies")
    error: FindingsApiError | None = None
    with client_for(answering(body)) as client:
        try:
            OPERATIONS[operation](client)
        except (ResponseDecodeError, AmbiguousWriteError) as exc:  # anything else fails the test
            error = exc
    if error is not None:
        assert error.endpoint, error
        if isinstance(error, AmbiguousWriteError):
            assert operation == "create_tickets"  # only the non-idempotent write is ambiguous


STATUS_ERRORS = {401: AuthenticationError, 403: AuthenticationError, 404: NotFoundError, 400: ValidationError,
                 422: ValidationError, 429: RateLimitedError, 500: ServerError, 502: ServerError, 503: ServerError}


@SETTINGS
@given(status=st.sampled_from([*sorted(STATUS_ERRORS), 405, 409, 418, 504, 599]), body=MALFORMED,
       operation=st.sampled_from(sorted(OPERATIONS)))
def test_any_error_status_is_its_typed_error_with_the_status(status: int, body: bytes, operation: str) -> None:
    tally("hypothesis.examples.error_statuses")
    with client_for(answering(body, status)) as client, pytest.raises(FindingsApiError) as caught:
        OPERATIONS[operation](client)
    error = caught.value
    assert error.status_code == status
    if operation == "create_tickets" and status >= 500:
        assert isinstance(error, AmbiguousWriteError)
    elif status in STATUS_ERRORS:
        assert isinstance(error, STATUS_ERRORS[status])
    assert TOKEN not in str(error)


# --- 5. huge pages ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [3000, 20_000])
def test_a_huge_page_is_parsed_completely(count: int) -> None:
    """A page of 3000 (the maximum) or of far more findings than asked for (20,000, ~6 MB): every finding once,
    and paging goes on past an over-full page (only a short page ends it)."""
    tally("huge_pages")
    filler = "x" * 200
    big = page([{"id": i, "severity": "low", "rule_name": filler} for i in range(count)], "ref")
    last = page([{"id": count + 1, "severity": "low"}], "ref")
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(int(request.url.params["page"]))
        return httpx.Response(200, content=big if calls[-1] == 0 else last)

    with client_for(handler) as client:
        ids = [f.id for f in client.items(client.list_findings, "sast", page_size=3000)]
        raw = [len(p.items) for p in client.raw_pages(client.list_findings, "sast", page_size=3000)]
    assert ids == [*range(count), count + 1]
    assert calls == [0, 1, 0, 1]
    assert raw == [count, 1]


def test_a_huge_garbage_body_is_a_typed_error() -> None:
    with client_for(answering(b"[" * 100_000)) as client, pytest.raises(ResponseDecodeError):
        client.list_findings()
    with client_for(answering(b'{"sastFindings": {"findings": [' + b'{"id": 1},' * 200_000 + b"]")) as client:
        with pytest.raises(ResponseDecodeError):
            list(client.raw_pages(client.list_findings))
