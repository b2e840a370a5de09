"""Validation before sending: every limit of section 8 at both edges, enums, per-type filters, the triage and
ticket rules. A refused input names the field and the value, and sends nothing."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from findings_provider.client import (
    ConfigurationError,
    FindingsClient,
    ResponseDecodeError,
    TicketRequest,
    TriageRequest,
    ValidationError,
)
from findings_provider.client.models import FindingsPage, ScanDetails, ScansPage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Recorder, client_kwargs, raw

UTC = timezone.utc

EMPTY: dict[str, dict[str, Any]] = {
    "findings": {"findings": []},
    "scans": {"scans": []},
    "rules": {"rules": []},
    "tickets": {"failed": [], "skipped": [], "succeeded": []},
    "triage": {"num_triaged": 0, "triaged_issues": []},
    "dependencies": {"dependencies": [], "hasMore": False},
    "repositories": {"repositorySummaries": [], "hasMore": False},
    "secrets": {"findings": []},
    "projects": {"projects": []},
}


def refused(rec: Recorder, call, *fragments: str) -> ValidationError:
    """Assert that ``call()`` raises ValidationError naming every fragment and that nothing was sent."""
    with pytest.raises(ValidationError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert rec.count == 0
    assert info.value.status_code is None  # refused locally, not by the server
    return info.value


# --- section 8 limits at both edges -------------------------------------------------------------------------

LIMITS = [
    # (operation, payload key, call building kwargs, bad low, good low, good high, bad high, where sent)
    ("findings", "page_size", lambda c, v: c.list_findings(page_size=v), 99, 100, 3000, 3001, "query"),
    ("scans", "limit", lambda c, v: c.search_scans(limit=v), 0, 1, 500, 501, "body"),
    ("rules", "limit", lambda c, v: c.list_policy_rules(9, limit=v), 0, 1, 2000, 2001, "query"),
    (
        "tickets",
        "limit",
        lambda c, v: c.create_tickets(issue_type="sast", issue_ids=[1], limit=v),
        0,
        1,
        20,
        21,
        "body",
    ),
    (
        "triage",
        "limit",
        lambda c, v: c.bulk_triage(issue_type="sast", issue_ids=[1], new_triage_state="fixing", limit=v),
        0,
        1,
        3000,
        3001,
        "body",
    ),
    ("dependencies", "pageSize", lambda c, v: c.list_dependencies(page_size=v), 0, 1, 10000, 10001, "body"),
    (
        "repositories",
        "pageSize",
        lambda c, v: c.list_repositories_with_dependencies(page_size=v),
        0,
        1,
        100,
        101,
        "body",
    ),
    ("secrets", "limit", lambda c, v: c.list_secrets(limit=v), 0, 1, 3000, 3001, "query"),
    ("projects", "page_size", lambda c, v: c.list_projects(page_size=v), 0, 1, 3000, 3001, "query"),
]


def sent_value(rec: Recorder, key: str, where: str) -> Any:
    if where == "query":
        return int(rec.last.url.params[key])
    return rec.json()[key]


@pytest.mark.parametrize(("name", "key", "call", "bad_low", "low", "high", "bad_high", "where"), LIMITS)
def test_limits_accept_the_edges(name, key, call, bad_low, low, high, bad_high, where, make_client) -> None:
    for value in (low, high):
        rec = Recorder(EMPTY[name])
        call(make_client(rec), value)
        assert rec.count == 1
        assert sent_value(rec, key, where) == value


@pytest.mark.parametrize(("name", "key", "call", "bad_low", "low", "high", "bad_high", "where"), LIMITS)
def test_limits_refuse_beyond_the_edges(
    name, key, call, bad_low, low, high, bad_high, where, make_client
) -> None:
    for value in (bad_low, bad_high):
        rec = Recorder(EMPTY[name])
        client = make_client(rec)
        exc = refused(rec, lambda client=client, value=value: call(client, value), f"'{key}'", f"= {value}")
        assert exc.field == key


def test_findings_iterator_validates_page_size_before_any_request(make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    refused(rec, lambda: client.items(client.list_findings, "sast", page_size=5000), "'page_size'", "5000")


# --- enums --------------------------------------------------------------------------------------------------


def test_bad_severity(make_client) -> None:
    rec = Recorder()
    refused(
        rec, lambda: make_client(rec).list_findings(severities=["high", "urgent"]), "severities", "'urgent'"
    )


def test_bad_issue_type_for_findings(make_client) -> None:
    rec = Recorder()
    refused(rec, lambda: make_client(rec).list_findings("secrets"), "'issue_type'", "'secrets'")


def test_bad_issue_type_for_triage(make_client) -> None:
    rec = Recorder()
    refused(
        rec,
        lambda: make_client(rec).bulk_triage(issue_type="dast", issue_ids=[1], new_triage_state="fixing"),
        "'issue_type'",
        "'dast'",
    )


def test_bad_policy_mode(make_client) -> None:
    rec = Recorder()
    refused(
        rec, lambda: make_client(rec).update_rule_mode(9, "a.b", "MODE_LOUD"), "'policyMode'", "'MODE_LOUD'"
    )


def test_bad_triage_state(make_client) -> None:
    rec = Recorder()
    refused(
        rec,
        lambda: make_client(rec).bulk_triage(issue_type="sast", issue_ids=[1], new_triage_state="closed"),
        "'new_triage_state'",
        "'closed'",
    )


def test_bad_triage_reason_and_scan_status(make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    refused(
        rec,
        lambda: client.bulk_triage(
            issue_type="sast", issue_ids=[1], new_triage_state="ignored", new_triage_reason="meh"
        ),
        "new_triage_reason",
        "'meh'",
    )
    refused(rec, lambda: client.search_scans(statuses=["SCAN_STATUS_DONE"]), "statuses", "'SCAN_STATUS_DONE'")


def test_scan_statuses_known_from_the_service_are_accepted(make_client) -> None:
    rec = Recorder(EMPTY["scans"])
    make_client(rec).search_scans(statuses=["SCAN_STATUS_PENDING", "SCAN_STATUS_NEVER_FINISHED"])
    assert rec.json()["statuses"] == ["SCAN_STATUS_PENDING", "SCAN_STATUS_NEVER_FINISHED"]


# --- per-type filters of findings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"autotriage_verdict": "false_positive"}, "autotriage_verdict"),
        ({"confidence": "high"}, "confidence"),
        ({"policies": ["rule-board-block"]}, "policies"),
        ({"rules": ["r"]}, "rules"),
        ({"categories": ["security"]}, "categories"),
    ],
)
def test_sast_only_filter_with_sca(kwargs: dict, name: str, make_client) -> None:
    rec = Recorder()
    refused(rec, lambda: make_client(rec).list_findings("sca", **kwargs), f"'{name}'", "'sast'", "'sca'")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"exposures": ["reachable"]}, "exposures"),
        ({"transitivities": ["direct"]}, "transitivities"),
        ({"is_malicious": True}, "is_malicious"),
    ],
)
def test_sca_only_filter_with_sast(kwargs: dict, name: str, make_client) -> None:
    rec = Recorder()
    refused(rec, lambda: make_client(rec).list_findings("sast", **kwargs), f"'{name}'", "'sca'", "'sast'")


def test_unknown_keyword_refused(make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    refused(rec, lambda: client.list_findings(severity=["high"]), "'severity'", "['high']")
    refused(rec, lambda: client.search_scans(status="SCAN_STATUS_ERROR"), "'status'", "'SCAN_STATUS_ERROR'")
    refused(
        rec,
        lambda: client.bulk_triage(issue_type="sast", issue_ids=[1], new_triage_state="fixing", bogus=1),
        "'bogus'",
        "= 1",
    )
    refused(rec, lambda: client.create_tickets(issue_type="sast", issue_id=[1]), "'issue_id'", "[1]")


def test_path_ids_must_be_digits(make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    refused(rec, lambda: client.get_scan("12/../13"), "scan_id", "'12/../13'")
    refused(rec, lambda: client.list_policy_rules("abc"), "policy_id", "'abc'")
    refused(rec, lambda: client.update_rule_mode("x1", "a.b", "MODE_BLOCK"), "policyId", "'x1'")


def test_deployment_id_must_be_digits() -> None:
    with pytest.raises(ConfigurationError, match="'acme'"):
        FindingsClient(**client_kwargs(deployment_id="acme"))


# --- bulk triage rules --------------------------------------------------------------------------------------


def test_triage_needs_state_or_note(make_client) -> None:
    rec = Recorder()
    refused(
        rec,
        lambda: make_client(rec).bulk_triage(issue_type="sast", issue_ids=[1]),
        "new_triage_state",
        "new_note",
    )


def test_triage_note_alone_is_enough(make_client) -> None:
    rec = Recorder(EMPTY["triage"])
    make_client(rec).bulk_triage(issue_type="secrets", issue_ids=[1], new_note="looked at it")
    assert rec.json()["new_note"] == "looked at it"
    assert "new_triage_state" not in rec.json()


@pytest.mark.parametrize("state", ["reviewing", "fixing", "reopened", None])
def test_triage_reason_only_with_ignored(state, make_client) -> None:
    rec = Recorder()
    kwargs = {"new_triage_state": state} if state else {"new_note": "n"}
    refused(
        rec,
        lambda: make_client(rec).bulk_triage(
            issue_type="sast", issue_ids=[1], new_triage_reason="acceptable_risk", **kwargs
        ),
        "new_triage_reason='acceptable_risk'",
        "'ignored'",
        repr(state),
    )


def test_triage_note_length(make_client) -> None:
    rec = Recorder(EMPTY["triage"])
    client = make_client(rec)
    client.bulk_triage(issue_type="sast", issue_ids=[1], new_note="n" * 3000)
    assert len(rec.json()["new_note"]) == 3000
    rec.requests.clear()
    exc = refused(
        rec,
        lambda: client.bulk_triage(issue_type="sast", issue_ids=[1], new_note="n" * 3001),
        "'new_note'",
        "3000",
    )
    assert exc.field == "new_note"


def test_triage_without_ids_or_filters_refused(make_client) -> None:
    rec = Recorder()
    refused(
        rec,
        lambda: make_client(rec).bulk_triage(issue_type="sast", new_triage_state="ignored"),
        "issue_ids",
        "allow_unfiltered",
    )


def test_triage_unfiltered_on_purpose_is_sent_without_the_flag(make_client) -> None:
    rec = Recorder(EMPTY["triage"])
    make_client(rec).bulk_triage(issue_type="sast", new_triage_state="reopened", allow_unfiltered=True)
    assert rec.json() == {
        "issue_type": "sast",
        "deploymentSlug": "acme",
        "limit": 3000,
        "new_triage_state": "reopened",
    }


def test_triage_empty_issue_ids_refused(make_client) -> None:
    rec = Recorder()
    refused(
        rec,
        lambda: make_client(rec).bulk_triage(issue_type="sast", issue_ids=[], new_triage_state="fixing"),
        "issue_ids is empty",
    )


def test_triage_ids_are_integers(make_client) -> None:
    rec = Recorder(EMPTY["triage"])
    client = make_client(rec)
    client.bulk_triage(issue_type="sast", issue_ids=[7, 8], new_triage_state="fixing")
    assert rec.json()["issue_ids"] == [7, 8]
    rec.requests.clear()
    refused(
        rec,
        lambda: client.bulk_triage(issue_type="sast", issue_ids=[-1], new_triage_state="fixing"),
        "issue_ids",
        "-1",
    )


def test_triage_request_object_is_validated_at_construction() -> None:
    # built directly (not through the client) the request model raises pydantic's error, a ValueError
    with pytest.raises(ValueError, match="allow_unfiltered"):
        TriageRequest(issue_type="sast", new_triage_state="fixing")
    with pytest.raises(ValueError, match="new_triage_state"):
        TriageRequest(issue_type="sast", issue_ids=[1])


# --- values that narrow nothing are no selection -----------------------------------------------------------

SELECTING_CALLS = {
    "triage": lambda c, **kw: c.bulk_triage(issue_type="sast", new_triage_state="reviewing", **kw),
    "tickets": lambda c, **kw: c.create_tickets(issue_type="sast", **kw),
}


@pytest.mark.parametrize("operation", sorted(SELECTING_CALLS))
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"ref": ""}, "ref"),
        ({"ref": "  "}, "ref"),
        ({"repos": [" ", "\t"]}, "repos"),
        ({"rules": ["py.sqli", "  "]}, "rules"),
        ({"issue_ids": [1], "ref": " "}, "ref"),  # refused with ids too: a blank filter is a mistake
    ],
)
def test_blank_filter_values_are_refused_naming_field_and_value(operation, kwargs, field, make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    exc = refused(
        rec, lambda: SELECTING_CALLS[operation](client, **kwargs), f"'{field}'", f"= {kwargs[field]!r}", "blank"
    )
    assert exc.field == field


@pytest.mark.parametrize("operation", sorted(SELECTING_CALLS))
@pytest.mark.parametrize(
    "since", [0, "0", "000", 0.4, -1, -86400.0, datetime(1970, 1, 1, tzinfo=UTC), datetime(1969, 7, 20)]
)
def test_since_at_or_before_the_epoch_is_refused(operation, since, make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    exc = refused(
        rec, lambda: SELECTING_CALLS[operation](client, since=since), "'since'", f"= {since!r}", "after the epoch"
    )
    assert exc.field == "since"


# --- tickets ------------------------------------------------------------------------------------------------


def test_ticket_issue_ids_sent_as_strings(make_client) -> None:
    rec = Recorder(EMPTY["tickets"])
    make_client(rec).create_tickets(issue_type="sca", issue_ids=[1, "2", 30])
    assert rec.json()["issue_ids"] == ["1", "2", "30"]


def test_ticket_issue_ids_must_be_digits(make_client) -> None:
    rec = Recorder()
    refused(
        rec,
        lambda: make_client(rec).create_tickets(issue_type="sast", issue_ids=["12a"]),
        "issue_ids",
        "'12a'",
    )


def test_ticket_selection_rules(make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    refused(rec, lambda: client.create_tickets(issue_type="sast"), "issue_ids", "allow_unfiltered")
    refused(rec, lambda: client.create_tickets(issue_type="sast", issue_ids=[]), "issue_ids is empty")
    refused(
        rec,
        lambda: client.create_tickets(issue_type="sast", issue_ids=[1], tracker_project_id="PROJ"),
        "'tracker_project_id'",
        "'PROJ'",
    )


def test_ticket_tracker_project_field_renames_the_body_key(make_client) -> None:
    rec = Recorder(EMPTY["tickets"])
    request = TicketRequest(issue_type="sast", severities=["high"], tracker_project_id="10")
    make_client(rec, tracker_project_field="brandtracker_project_id").create_tickets(request)
    body = rec.json()
    assert body["brandtracker_project_id"] == "10"
    assert "tracker_project_id" not in body
    assert body["severities"] == ["high"]
    assert body["group_issues"] is True
    assert body["limit"] == 20


def test_ticket_without_tracker_project_sends_no_tracker_field(make_client) -> None:
    rec = Recorder(EMPTY["tickets"])
    make_client(rec, tracker_project_field="brandtracker_project_id").create_tickets(
        issue_type="sast", issue_ids=[1], group_issues=False
    )
    body = rec.json()
    assert "brandtracker_project_id" not in body
    assert "tracker_project_id" not in body
    assert body["group_issues"] is False


# --- projects -----------------------------------------------------------------------------------------------


def test_project_operations_validation(make_client) -> None:
    rec = Recorder()
    client = make_client(rec)
    refused(rec, lambda: client.add_project_tags("org/repo", []), "'tags'")
    refused(rec, lambda: client.remove_project_tags("", ["x"]), "'project_name'")
    refused(rec, lambda: client.set_managed_scans("org/repo"), "diff_scan", "full_scan")


# --- property tests -----------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
SCAN_KEYS = [
    "id",
    "status",
    "started_at",
    "completed_at",
    "exit_code",
    "is_full_scan",
    "findings_counts",
    "enabled_products",
    "total_time",
    "repository_id",
]
FINDING_KEYS = [
    "id",
    "created_at",
    "relevant_since",
    "triaged_at",
    "categories",
    "location",
    "external_ticket",
    "rule",
    "assistant",
    "repository",
    "review_comments",
    "is_malicious",
    "first_seen_scan_id",
]
DETAIL_KEYS = ["id", "started_at", "completed_at", "exit_code", "meta", "stats", "deployment_id"]


def shaped(keys: list[str]) -> st.SearchStrategy:
    """Objects with documented keys and arbitrary values (where type confusion is likeliest)."""
    value = (
        JSON
        | st.integers(min_value=-(10**30), max_value=10**30)
        | st.sampled_from(
            [
                "2020-11-18T23:28:12.391Z",
                "0001-01-01T00:00:00+01:00",
                "9999-12-31T23:59:59-01:00",
                "99999999999999",
                "1e400",
                "",
                "SCAN_STATUS_COMPLETED",
            ]
        )
    )
    return st.dictionaries(st.sampled_from(keys), value, max_size=len(keys))


BODIES = st.one_of(
    JSON,
    st.fixed_dictionaries({"scans": st.lists(shaped(SCAN_KEYS), max_size=3)}, optional={"cursor": JSON}),
    st.fixed_dictionaries({"findings": st.lists(shaped(FINDING_KEYS), max_size=3)}),
    st.fixed_dictionaries(
        {"sastFindings": st.fixed_dictionaries({"findings": st.lists(shaped(FINDING_KEYS))})}
    ),
    st.fixed_dictionaries({"scaFindings": JSON}),
    shaped(DETAIL_KEYS),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES)
def test_any_json_body_parses_or_raises_decode_error(body: Any) -> None:
    content = json.dumps(body).encode()
    operations = [
        (lambda c: c.list_findings(), FindingsPage),
        (lambda c: c.search_scans(), ScansPage),
        (lambda c: c.get_scan(1), ScanDetails),
        (lambda c: c.list_findings(issue_type="sca"), FindingsPage),
    ]
    with FindingsClient(**client_kwargs(transport=_always(content))) as client:
        for operation, model in operations:
            result, error = outcome(lambda operation=operation: operation(client), ResponseDecodeError)
            if error is not None:
                assert error.malformed is False  # valid JSON is never "malformed"
            else:
                assert isinstance(result, model)
                for item in getattr(result, "items", []):
                    for stamp in ("created_at", "started_at", "completed_at", "relevant_since"):
                        value = getattr(item, stamp, None)
                        assert value is None or value.utcoffset().total_seconds() == 0
        pages, error = outcome(
            lambda: list(client.raw_pages(client.list_findings, page_size=100)), ResponseDecodeError
        )
        if error is None:
            assert all(isinstance(bytes(i), bytes) for pg in pages for i in pg.items)


def outcome(call: Any, expected: type[Exception]) -> tuple[Any, Any]:
    """``(result, None)`` or ``(None, error)`` for an error of the expected type; anything else propagates."""
    try:
        return call(), None
    except expected as exc:
        return None, exc


def _always(content: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: raw(content))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page_size=st.integers(min_value=-(2**70), max_value=2**70) | st.integers(min_value=90, max_value=3010))
def test_any_page_size_is_sent_or_refused(page_size: int) -> None:
    rec = Recorder({"findings": []}, repeat_last=True)
    with FindingsClient(**client_kwargs(transport=httpx.MockTransport(rec))) as client:
        _, error = outcome(lambda: client.list_findings(page_size=page_size), ValidationError)
        if error is not None:
            assert not 100 <= page_size <= 3000
            assert error.field == "page_size"
            assert str(page_size) in str(error)
            assert rec.count == 0
        else:
            assert 100 <= page_size <= 3000
            assert rec.count == 1
            assert rec.last.url.params["page_size"] == str(page_size)


def test_every_limit_of_the_api_has_its_edges_tested() -> None:
    """A new ``Limit`` in ``client/limits.py`` needs its row in ``LIMITS`` (the values at and beyond its edges)."""
    from findings_provider.client import limits

    defined = Counter((value.minimum, value.maximum) for value in vars(limits).values()
                      if isinstance(value, limits.Limit))
    tested = Counter((row[4], row[5]) for row in LIMITS)
    assert {edges: count for edges, count in defined.items() if tested[edges] < count} == {}  # a row per Limit


# --- the operations beyond the reference (api-notes) ------------------------------------------------------------

NEW_OPERATION_REFUSALS = [
    # (id, call, fragments the message must hold: the operation, the field, the value, what is allowed)
    ("project name empty", lambda c: c.get_project(""), ["get project", "'project_name'", "''"]),
    ("project name dot-dot", lambda c: c.delete_project("org/../other"),
     ["delete project", "'project_name'", "'org/../other'", "'..'"]),
    ("update nothing", lambda c: c.update_project("org/repo"), ["update project", "at least one", "primary_branch"]),
    ("update blank tag", lambda c: c.update_project("org/repo", tags=["team-a", " "]),
     ["'tags.1'", "' '", "blank"]),
    ("update blank branch", lambda c: c.update_project("org/repo", primary_branch=""),
     ["'primary_branch'", "''", "blank"]),
    ("lockfiles repository", lambda c: c.list_lockfiles("org/repo"),
     ["list lockfiles", "'repository_id'", "'org/repo'", "pattern"]),
    ("lockfiles page size", lambda c: c.list_lockfiles(7, page_size=0),
     ["'pageSize'", "= 0", "greater than or equal to 1"]),
    ("lockfiles negative cursor", lambda c: c.list_lockfiles(7, cursor=-1), ["'cursor'", "-1"]),
    ("sbom version", lambda c: c.start_sbom_export(7, cyclonedx_version="2.0"),
     ["start SBOM export", "'formatVersion'", "'cyclonedxVersion' = '2.0'", "SBOM_CYCLONE_DX_VERSION_V1_4",
      "SBOM_CYCLONE_DX_VERSION_V1_7"]),
    ("sbom version blank", lambda c: c.start_sbom_export(7, cyclonedx_version=""),
     ["'formatVersion'", "'cyclonedxVersion' = ''"]),
    ("sbom repository", lambda c: c.start_sbom_export("12a"), ["'repositoryId'", "'12a'"]),
    ("sbom repository bool", lambda c: c.start_sbom_export(True), ["'repositoryId'", "True"]),
    ("sbom ref blank", lambda c: c.start_sbom_export(7, ref="  "), ["'ref'", "'  '", "blank"]),
    ("sbom component type", lambda c: c.start_sbom_export(7, metadata_component_type="app lication"),
     ["'metadataComponentType'", "'app lication'", "'application' or 'library'"]),
    ("sbom supplier url", lambda c: c.start_sbom_export(7, metadata_supplier={"url": "acme.example.com"}),
     ["'metadataSupplier'", "'url' = 'acme.example.com'", "http(s) URL"]),
    ("sbom supplier typo", lambda c: c.start_sbom_export(7, metadata_supplier={"nmae": "Acme"}),
     ["'metadataSupplier'", "'nmae' = 'Acme'", "Extra inputs are not permitted"]),
    ("sbom task token", lambda c: c.get_sbom_export(".."), ["get SBOM export", "'task_token'", "'..'"]),
    ("sbom task token blank", lambda c: c.get_sbom_export(" "), ["'task_token'", "' '"]),
    ("link url", lambda c: c.link_ticket("tracker/SEC-12", [1]), ["link ticket", "'ticket_url'", "'tracker/SEC-12'"]),
    ("link no ids", lambda c: c.link_ticket("https://t.example.com/SEC-1", []), ["'issue_ids'", "at least 1"]),
    ("link bad id", lambda c: c.link_ticket("https://t.example.com/SEC-1", [5, "5x"]), ["'issue_ids.1'", "'5x'"]),
    ("link bool id", lambda c: c.link_ticket("https://t.example.com/SEC-1", [True]), ["'issue_ids.0'", "True"]),
    ("unlink no ids", lambda c: c.unlink_tickets([]), ["unlink tickets", "'issue_ids'", "at least 1"]),
    ("unlink negative id", lambda c: c.unlink_tickets([-3]), ["'issue_ids.0'", "'-3'"]),
    ("delete link blank", lambda c: c.delete_ticket_link(""), ["delete ticket link", "'external_ticket_id'", "''"]),
    ("delete link dot", lambda c: c.delete_ticket_link("."), ["'external_ticket_id'", "'.'"]),
    ("findings blank ref", lambda c: c.list_findings(ref=" "), ["list findings", "'ref'", "' '", "blank"]),
]


@pytest.mark.parametrize(("call", "fragments"), [case[1:] for case in NEW_OPERATION_REFUSALS],
                         ids=[case[0] for case in NEW_OPERATION_REFUSALS])
def test_new_operations_refuse_bad_input_before_sending(call, fragments, make_client) -> None:
    rec = Recorder()
    refused(rec, lambda: call(make_client(rec)), *fragments)


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("1.4", "SBOM_CYCLONE_DX_VERSION_V1_4"),
        ("v1.5", "SBOM_CYCLONE_DX_VERSION_V1_5"),
        ("V1_6", "SBOM_CYCLONE_DX_VERSION_V1_6"),
        ("SBOM_CYCLONE_DX_VERSION_V1_7", "SBOM_CYCLONE_DX_VERSION_V1_7"),
    ],
)
def test_sbom_versions_are_sent_as_the_full_value(given, sent, make_client) -> None:
    rec = Recorder({"taskToken": "t"})
    make_client(rec).start_sbom_export("42", cyclonedx_version=given, metadata_component_type="APPLICATION")
    body = rec.json()
    assert body["formatVersion"] == {"format": "SBOM_FORMAT_CYCLONEDX", "cyclonedxVersion": sent}
    assert body["metadataComponentType"] == "SBOM_METADATA_COMPONENT_TYPE_CYCLONE_DX_V15_APPLICATION"
    assert "ref" not in body  # the primary branch when left out


def test_update_project_sends_only_what_is_given(make_client) -> None:
    rec = Recorder({"project": {"name": "org/repo"}}, {"project": {"name": "org/repo"}})
    client = make_client(rec)
    client.update_project("org/repo", tags=[])  # an empty list clears the tags: sent
    client.update_project("org/repo", full_scan=True)
    assert rec.json(0) == {"tags": []}
    assert rec.json(1) == {"managed_scan_config": {"full_scan": {"enabled": True}}}


def test_dedup_and_the_default_ref_go_on_the_wire(make_client) -> None:
    from findings_provider.client.requests import DEFAULT_REF

    rec = Recorder({"findings": []}, {"findings": []})
    client = make_client(rec)
    client.list_findings("sca", dedup=True, ref=DEFAULT_REF)
    assert ("dedup", "true") in rec.query(0)
    assert ("ref", "_default") in rec.query(0)
    client.list_findings("sast")
    assert [k for k, _ in rec.query(1) if k in ("dedup", "ref")] == []  # left out: the server's defaults
