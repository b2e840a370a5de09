"""Property tests of the client's request validation: any input is either sent exactly as given, or refused
before any request with a ``ValidationError`` naming the offending field. Nothing else escapes, and no input
can make a request land on another path than the operation's own.
"""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from chaos.harness import tally
from findings_provider.client import FindingsClient, RetryPolicy, ValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
PREFIX = "/api/v1/deployments/acme/projects/"

PROJECT = {"project": {"name": "org/repo", "tags": []}}


class Recorder:
    def __init__(self, body: bytes = b"{}") -> None:
        self.requests: list[httpx.Request] = []
        self.body = body

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, content=self.body)


def client_for(recorder: Recorder) -> FindingsClient:
    return FindingsClient("https://findings.example.com", "tok-props", deployment_id="7", deployment_slug="acme",
                          transport=httpx.MockTransport(recorder),
                          retry_policy=RetryPolicy(max_retries=0, rng=random.Random(0)))


def attempt(call: Any) -> ValidationError | None:
    try:
        call()
    except ValidationError as exc:
        return exc
    return None


# --- path parameters ----------------------------------------------------------------------------------------------

NAMES = st.one_of(
    st.text(max_size=30),
    st.lists(st.sampled_from(["org", "repo", "..", ".", "", "a b", "%2e%2e", "x?y", "#", "a/b", "ü"]),
             min_size=1, max_size=5).map("/".join),
)


@SETTINGS
@given(name=NAMES, operation=st.sampled_from(["tags_add", "tags_remove", "managed_scan"]))
def test_a_project_name_never_leaves_its_path(name: str, operation: str) -> None:
    """A project name reaches the server as exactly that project (slashes kept, everything else encoded), or
    is refused naming the field; a name with ``..`` segments never retargets the request."""
    tally("hypothesis.examples.project_paths")
    import json

    recorder = Recorder(json.dumps(PROJECT).encode())
    with client_for(recorder) as client:
        calls = {
            "tags_add": lambda: client.add_project_tags(name, ["t"]),
            "tags_remove": lambda: client.remove_project_tags(name, ["t"]),
            "managed_scan": lambda: client.set_managed_scans(name, diff_scan=True),
        }
        error = attempt(calls[operation])
    if error is not None:
        assert error.field, error
        assert "project" in error.field.lower(), error
        assert not recorder.requests
        return
    (request,) = recorder.requests
    path = request.url.raw_path.decode().split("?")[0]
    suffix = "/managed-scan" if operation == "managed_scan" else "/tags"
    assert path.startswith(PREFIX), (name, path)
    assert path.endswith(suffix), (name, path)
    assert unquote(path[len(PREFIX) : -len(suffix)]) == name, (name, path)


@SETTINGS
@given(value=st.one_of(st.text(max_size=12), st.integers(-5, 2**64), st.booleans(), st.floats()))
def test_numeric_path_ids_are_digits_or_refused(value: Any) -> None:
    tally("hypothesis.examples.path_ids")
    recorder = Recorder(b'{"id": "1"}')
    with client_for(recorder) as client:
        error = attempt(lambda: client.get_scan(value))
    if error is not None:
        assert error.field == "scan_id"
        assert not recorder.requests
        return
    (request,) = recorder.requests
    assert request.url.raw_path.decode() == f"/api/v1/deployments/7/scan/{value}"
    assert str(value).isdigit()
    assert str(value).isascii()


# --- bulk triage and tickets: the rules of the service, checked before sending --------------------------------

STATES = st.sampled_from([None, "ignored", "reviewing", "fixing", "reopened", "open", "IGNORED", "", 3])
REASONS = st.sampled_from([None, "acceptable_risk", "false_positive", "no_time", "no_triage_reason", "bogus", 1])
IDS = st.one_of(st.none(), st.lists(st.one_of(st.integers(-3, 2**33), st.text(max_size=4), st.booleans()),
                                    max_size=4))


@SETTINGS
@given(state=STATES, reason=REASONS, ids=IDS, note=st.one_of(st.none(), st.text(max_size=5),
                                                              st.just("n" * 3001)),
       issue_type=st.sampled_from(["sast", "sca", "secrets", "dast", ""]),
       severities=st.one_of(st.none(), st.lists(st.sampled_from(["low", "high", "severe", ""]), max_size=2)))
def test_bulk_triage_sends_exactly_a_valid_request_or_names_the_field(state, reason, ids, note, issue_type,
                                                                      severities) -> None:
    tally("hypothesis.examples.triage_requests")
    fields = {"issue_type": issue_type, "new_triage_state": state, "new_triage_reason": reason,
              "issue_ids": ids, "new_note": note, "severities": severities}
    fields = {k: v for k, v in fields.items() if v is not None}
    recorder = Recorder(b'{"num_triaged": 0, "triaged_issues": []}')
    with client_for(recorder) as client:
        error = attempt(lambda: client.bulk_triage(**fields))
    valid_ids = ids is None or (ids and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**32
                                            for i in ids))
    rules_hold = (
        issue_type in ("sast", "sca", "secrets")
        and state in (None, "ignored", "reviewing", "fixing", "reopened")
        and reason in (None, "acceptable_risk", "false_positive", "no_time", "no_triage_reason")
        and (state is not None or note is not None)
        and (reason is None or state == "ignored")
        and (note is None or len(note) <= 3000)
        and valid_ids
        and (severities is None or all(s in ("low", "high") for s in severities))
        and (ids is not None or bool(severities))  # a selection: ids or a filter
    )
    if error is not None:
        assert not rules_hold, error
        assert error.field is None or isinstance(error.field, str)
        assert not recorder.requests
        return
    assert rules_hold, fields
    import json

    body = json.loads(recorder.requests[0].content)
    for key, value in fields.items():
        assert body[key] == value, key


@SETTINGS
@given(ids=st.lists(st.one_of(st.integers(-3, 10**12), st.text(max_size=6), st.booleans(), st.floats()),
                    min_size=1, max_size=5),
       limit=st.one_of(st.none(), st.integers(-1, 25)))
def test_ticket_ids_are_sent_as_digit_strings_or_refused(ids: list[Any], limit: int | None) -> None:
    tally("hypothesis.examples.ticket_requests")
    recorder = Recorder(b'{"failed": [], "skipped": [], "succeeded": []}')
    fields: dict[str, Any] = {"issue_type": "sast", "issue_ids": ids}
    if limit is not None:
        fields["limit"] = limit
    with client_for(recorder) as client:
        error = attempt(lambda: client.create_tickets(**fields))
    as_text = [str(i) if isinstance(i, int) and not isinstance(i, bool) else i for i in ids]
    digits = all(isinstance(t, str) and t.isdigit() and t.isascii() for t in as_text)
    ok = digits and (limit is None or 1 <= limit <= 20)
    if error is not None:
        assert not ok, error
        assert error.field, error
        assert error.field.split(".")[0] in ("issue_ids", "limit"), error
        assert not recorder.requests
        return
    assert ok
    import json

    body = json.loads(recorder.requests[0].content)
    assert body["issue_ids"] == as_text
    assert body["limit"] == (20 if limit is None else limit)


# --- findings filters ---------------------------------------------------------------------------------------------

FILTER_VALUES = {
    "severities": st.lists(st.sampled_from(["low", "medium", "high", "critical", "urgent", "", "HIGH"]), max_size=3),
    "status": st.sampled_from(["open", "fixed", "ignored", "reviewing", "fixing", "closed", ""]),
    "exposures": st.lists(st.sampled_from(["reachable", "always_reachable", "unreachable", "maybe"]), max_size=2),
    "autotriage_verdict": st.sampled_from(["true_positive", "false_positive", "unsure"]),
    "page": st.integers(-2, 2**33),
    "repos": st.lists(st.text(max_size=6), max_size=3),
}
ALLOWED = {
    "severities": {"low", "medium", "high", "critical"},
    "status": {"open", "fixed", "ignored", "reviewing", "fixing"},
    "exposures": {"reachable", "always_reachable", "unreachable"},
    "autotriage_verdict": {"true_positive", "false_positive"},
}


@SETTINGS
@given(issue_type=st.sampled_from(["sast", "sca"]), data=st.data(),
       names=st.sets(st.sampled_from(sorted(FILTER_VALUES)), min_size=1, max_size=3))
def test_findings_filters_are_sent_as_given_or_refused(issue_type: str, data: Any, names: set[str]) -> None:
    tally("hypothesis.examples.findings_filters")
    filters = {name: data.draw(FILTER_VALUES[name], label=name) for name in sorted(names)}
    recorder = Recorder(b'{"sastFindings": {"findings": []}}')
    with client_for(recorder) as client:
        error = attempt(lambda: client.list_findings(issue_type, **filters))

    def valid(name: str, value: Any) -> bool:
        if name == "page":
            return 0 <= value < 2**32
        if name == "repos":
            return all(value)
        if (name == "exposures" and issue_type != "sca") or (name == "autotriage_verdict" and issue_type != "sast"):
            return False
        values = value if isinstance(value, list) else [value]
        return all(v in ALLOWED[name] for v in values)

    bad = [name for name, value in filters.items() if not valid(name, value)]
    if error is not None:
        assert bad, error
        named = error.field.split(".")[0] if error.field else None
        assert named in bad or (named is None and any(b in str(error) for b in bad)), error
        assert not recorder.requests
        return
    assert not bad, (filters, bad)
    sent = recorder.requests[0].url.params
    for name, value in filters.items():
        expected = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        assert sent.get_list(name) == expected, name


@pytest.mark.parametrize(
    "name", ["../other", "org/../../x", "..", ".", "org/./repo", "org//repo", "/org/repo", "org/repo/"]
)
def test_project_names_with_dot_or_empty_segments_are_refused(name: str) -> None:
    recorder = Recorder()
    with client_for(recorder) as client, pytest.raises(ValidationError) as caught:
        client.add_project_tags(name, ["t"])
    assert caught.value.field == "project_name"
    assert not recorder.requests
