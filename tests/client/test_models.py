"""Response models: scan statuses, derived scan status, loosely typed values and timestamps."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from findings_provider.client.models import (
    Deployment,
    FindingsPage,
    Rule,
    Scan,
    ScanDetails,
    SecretsPage,
    text_of,
)
from findings_provider.client.timeutil import parse_timestamp, to_epoch_seconds, to_iso
from findings_provider.client.vocabulary import ScanStatus, UnknownScanStatusError
from present import present

from . import payloads as p

UTC = timezone.utc
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

# --- ScanStatus ---------------------------------------------------------------------------------------------

STATUS_TABLE = [
    # value, member, terminal, success, failure
    ("SCAN_STATUS_PENDING", ScanStatus.PENDING, False, False, False),
    ("SCAN_STATUS_RUNNING", ScanStatus.RUNNING, False, False, False),
    ("SCAN_STATUS_COMPLETED", ScanStatus.COMPLETED, True, True, False),
    ("SCAN_STATUS_ERROR", ScanStatus.ERROR, True, False, True),
    ("SCAN_STATUS_NEVER_FINISHED", ScanStatus.NEVER_FINISHED, True, False, True),
    ("SCAN_STATUS_CANCELLED", ScanStatus.CANCELLED, True, False, True),
]


@pytest.mark.parametrize(("value", "member", "terminal", "success", "failure"), STATUS_TABLE)
def test_scan_status_mapping(value, member, terminal, success, failure) -> None:
    status = ScanStatus.parse(value)
    assert status is member
    assert str(status) == value
    assert status.is_terminal is terminal
    assert status.is_success is success
    assert status.is_failure is failure
    assert Scan(id="1", status=value).scan_status is member


def test_every_status_is_in_the_table() -> None:
    assert {row[1] for row in STATUS_TABLE} == set(ScanStatus)


@pytest.mark.parametrize("value", ["SCAN_STATUS_QUEUED", "completed", "", "scan_status_running"])
def test_unknown_scan_status_is_an_error_naming_it(value: str) -> None:
    with pytest.raises(UnknownScanStatusError) as info:
        ScanStatus.parse(value)
    assert info.value.value == value
    assert repr(value) in str(info.value)
    assert "SCAN_STATUS_COMPLETED" in str(info.value)  # says what is known
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnknownScanStatusError):
        Scan(id="1", status=value).scan_status  # noqa: B018


def test_unknown_scan_status_error_pickles() -> None:
    exc = UnknownScanStatusError("SCAN_STATUS_QUEUED")
    back = pickle.loads(pickle.dumps(exc))  # noqa: S301 (our own bytes)
    assert type(back) is UnknownScanStatusError
    assert back.value == "SCAN_STATUS_QUEUED"
    assert str(back) == str(exc)


def test_scan_without_status_is_unknown() -> None:
    with pytest.raises(UnknownScanStatusError):
        Scan(id="1").scan_status  # noqa: B018


# --- ScanDetails.derive_status ------------------------------------------------------------------------------


def details(**fields) -> ScanDetails:
    return ScanDetails.model_validate({"id": 1, **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"started_at": "2024-05-01T11:00:00Z", "completed_at": "2024-05-01T11:10:00Z", "exit_code": 0},
            ScanStatus.COMPLETED,
        ),
        (
            {"started_at": "2024-05-01T11:00:00Z", "completed_at": "2024-05-01T11:10:00Z", "exit_code": 1},
            ScanStatus.COMPLETED,
        ),
        (
            {"started_at": "2024-05-01T11:00:00Z", "completed_at": "2024-05-01T11:10:00Z", "exit_code": 2},
            ScanStatus.ERROR,
        ),
        (
            {"started_at": "2024-05-01T11:00:00Z", "completed_at": "2024-05-01T11:10:00Z", "exit_code": 137},
            ScanStatus.ERROR,
        ),
        ({"started_at": "2024-05-01T11:00:00Z", "completed_at": "2024-05-01T11:10:00Z"}, ScanStatus.ERROR),
        # completed long ago is still completed, not never-finished
        (
            {"started_at": "2024-04-01T11:00:00Z", "completed_at": "2024-04-01T11:10:00Z", "exit_code": 0},
            ScanStatus.COMPLETED,
        ),
        ({"started_at": "2024-05-01T10:59:59Z"}, ScanStatus.NEVER_FINISHED),
        ({"started_at": "2024-05-01 10:00:00+00:00", "exit_code": 0}, ScanStatus.NEVER_FINISHED),
        ({"started_at": "2024-05-01T11:00:00Z"}, ScanStatus.RUNNING),  # exactly one hour: not yet
        ({"started_at": "2024-05-01T11:59:00Z"}, ScanStatus.RUNNING),
        ({"started_at": "2024-05-01T12:59:00+02:00"}, ScanStatus.NEVER_FINISHED),  # 10:59 UTC, zone honoured
        ({}, ScanStatus.RUNNING),
    ],
)
def test_derive_status(fields: dict, expected: ScanStatus) -> None:
    assert details(**fields).derive_status(now=NOW) is expected


def test_derive_status_uses_the_current_time_by_default() -> None:
    scan = details(started_at="2024-05-01T11:30:00Z")
    with time_machine.travel(NOW, tick=False):
        assert scan.status is ScanStatus.RUNNING
    with time_machine.travel(NOW + timedelta(hours=1), tick=False):
        assert scan.status is ScanStatus.NEVER_FINISHED


def test_explicit_status_field_wins_and_is_mapped_strictly() -> None:
    scan = details(status="SCAN_STATUS_CANCELLED", completed_at="2024-05-01T11:10:00Z", exit_code=0)
    assert scan.derive_status(now=NOW) is ScanStatus.CANCELLED
    with pytest.raises(UnknownScanStatusError, match="SCAN_STATUS_PAUSED"):
        details(status="SCAN_STATUS_PAUSED").derive_status(now=NOW)


# --- loosely typed values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Fix login", "Fix login"),
        (None, None),
        ({"value": "Fix login"}, "Fix login"),
        ({"text": "Fix login", "value": 3}, "Fix login"),
        ({"title": "T"}, "T"),
        ({"string": "S"}, "S"),
        ({"kind": 1, "anything": "first string"}, "first string"),
        ({"kind": 1}, None),
        ([{"value": "part one"}, "part two", None], "part one part two"),
        (12, "12"),
    ],
)
def test_text_of(value, expected) -> None:
    assert text_of(value) == expected


def test_commit_and_pull_request_titles_of_any_shape() -> None:
    scan = ScanDetails.model_validate(
        p.scan_details(
            meta={"commit_title": [{"text": "a"}, {"text": "b"}], "pull_request_title": {"value": "PR"}}
        )
    )
    assert scan.meta.commit_title_text == "a b"
    assert text_of(scan.meta.pull_request_title) == "PR"
    assert (
        ScanDetails.model_validate(p.scan_details(meta={"commit_title": "plain"})).meta.commit_title_text
        == "plain"
    )


def test_vulnerability_class_string_or_list() -> None:
    assert Rule.model_validate({"vulnerabilityClass": "XSS"}).vulnerabilityClass == ["XSS"]
    assert Rule.model_validate({"vulnerabilityClass": ["XSS", "SSRF"]}).vulnerabilityClass == ["XSS", "SSRF"]
    assert Rule.model_validate({"vulnerabilityClass": None}).vulnerabilityClass == []
    assert Rule.model_validate({}).vulnerabilityClass == []


def test_unknown_fields_are_kept_everywhere() -> None:
    page = FindingsPage.model_validate(
        {"sastFindings": {"findings": [p.sast_finding(1)], "total": 1}, "page_info": {"n": 1}}
    )
    assert page.model_extra == {"page_info": {"n": 1}}
    assert present(page.sastFindings).model_extra == {"total": 1}
    assert page.items[0].model_extra == {"brand_new_field": {"nested": [1, 2]}}
    assert present(page.items[0].rule).model_dump()["vulnerabilityClasses"] == ["SQL Injection"]


def test_findings_page_shapes() -> None:
    both = FindingsPage.model_validate(
        {"sastFindings": {"findings": [p.sast_finding(1)]}, "scaFindings": {"findings": [p.sca_finding(2)]}}
    )
    assert [f.id for f in both.items] == [1, 2]
    flat = FindingsPage.model_validate({"findings": [p.sca_finding(3)]})
    assert [f.id for f in flat.items] == [3]
    sca_only = FindingsPage.model_validate({"scaFindings": {"findings": [p.sca_finding(4)]}})
    assert [f.id for f in sca_only.items] == [4]
    assert FindingsPage.model_validate({}).items == []
    assert FindingsPage.model_validate({"findings": []}).items == []


def test_deployment_aliases() -> None:
    dep = Deployment.model_validate({"deploymentId": 7, "deploymentSlug": "seven"})
    assert (dep.id, dep.slug) == ("7", "seven")


def test_secrets_page_aliases() -> None:
    page = SecretsPage.model_validate({"secrets": [{"id": 1}], "nextCursor": "n2"})
    assert [f.id for f in page.items] == [1]
    assert page.cursor == "n2"
    page = SecretsPage.model_validate({"items": [{"id": 2}], "cursor": 9})
    assert [f.id for f in page.items] == [2]
    assert page.cursor == "9"


def test_ids_as_strings_or_integers() -> None:
    scan = Scan.model_validate(p.scan(scan_id=12, repository_id=7))
    assert scan.id == "12"
    assert scan.repository_id == "7"


# --- timestamps ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (p.TS_SPACE, datetime(2020, 11, 18, 23, 28, 12, 391807, tzinfo=UTC)),
        (p.TS_MILLIS_Z, datetime(2020, 11, 18, 23, 28, 12, 391000, tzinfo=UTC)),
        (p.TS_MICROS_Z, datetime(2020, 11, 18, 20, 46, 25, 269650, tzinfo=UTC)),
        ("2020-11-18T20:46:25z", datetime(2020, 11, 18, 20, 46, 25, tzinfo=UTC)),
        ("2020-11-19T01:46:25+05:00", datetime(2020, 11, 18, 20, 46, 25, tzinfo=UTC)),
        ("2020-11-18T20:46:25", datetime(2020, 11, 18, 20, 46, 25, tzinfo=UTC)),  # no zone: UTC
        ("2020-11-18", datetime(2020, 11, 18, tzinfo=UTC)),
        (1605731185, datetime(2020, 11, 18, 20, 26, 25, tzinfo=UTC)),
        (1605731185.5, datetime(2020, 11, 18, 20, 26, 25, 500000, tzinfo=UTC)),
        ("1605731185", datetime(2020, 11, 18, 20, 26, 25, tzinfo=UTC)),
        (
            datetime(2020, 11, 18, 21, 0, tzinfo=timezone(timedelta(hours=1))),
            datetime(2020, 11, 18, 20, 0, tzinfo=UTC),
        ),
        (datetime(2020, 11, 18, 21, 0), datetime(2020, 11, 18, 21, 0, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_to_aware_utc(value, expected: datetime) -> None:
    parsed = parse_timestamp(value)
    assert parsed == expected
    assert parsed.tzinfo is not None
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", [None, ""])
def test_parse_timestamp_empty(value) -> None:
    assert parse_timestamp(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2020-13-45T00:00:00Z",
        True,
        [2020],
        "1e400",
        10**30,
        "99999999999999999999",
        "0001-01-01T00:00:00+01:00",
    ],
)
def test_parse_timestamp_refuses_naming_the_value(value) -> None:
    with pytest.raises(ValueError, match="timestamp") as info:
        parse_timestamp(value)
    assert repr(value)[:12] in str(info.value)


def test_bad_timestamp_in_a_model_is_a_validation_error() -> None:
    import pydantic

    with pytest.raises(pydantic.ValidationError, match="started_at"):
        Scan.model_validate({"id": "1", "started_at": 10**30})


def test_to_iso_and_epoch() -> None:
    assert to_iso(datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)) == "2024-01-02T03:04:05.000006Z"
    assert to_iso("2024-01-02 05:04:05+02:00") == "2024-01-02T03:04:05.000000Z"
    assert to_epoch_seconds(datetime(1970, 1, 1, 0, 1)) == 60.0
    assert to_epoch_seconds(5) == 5.0
    with pytest.raises(ValueError, match="not a timestamp"):
        to_iso("")


def test_finding_in_either_key_style_has_the_reference_spelling() -> None:
    from findings_provider.client.models import Finding

    snake = Finding.model_validate({
        "id": "5", "location": {"file_path": "a.py", "end_line": 3, "end_column": 4},
        "external_ticket": {"id": "7", "external_slug": "T-7", "linked_issue_ids": ["5"]},
        "rule": {"cwe_names": ["CWE-1"], "owasp_names": None, "vulnerability_classes": "X"},
        "review_comments": [{"external_discussion_id": "d", "external_note_id": 3}],
    })
    location, ticket, rule = present(snake.location), present(snake.external_ticket), present(snake.rule)
    assert (snake.id, location.filePath, location.endLine, location.endColumn) == (5, "a.py", 3, 4)
    assert (ticket.externalSlug, ticket.linkedIssueIds, snake.ticket_id) == ("T-7", [5], 7)
    assert (rule.cweNames, rule.owaspNames, rule.vulnerabilityClasses) == (["CWE-1"], [], ["X"])
    assert snake.review_comments[0].externalNoteId == "3"


def test_finding_enums_are_canonical_and_unknown_ones_kept() -> None:
    from findings_provider.client.models import Finding

    f = Finding.model_validate({"id": 1, "severity": "SEVERITY_CRITICAL", "reachability": "conditionally reachable",
                                "triage_state": "provisionally_ignored", "status": "brand_new_status",
                                "assistant": {"autotriage": {"verdict": "VERDICT_TRUE_POSITIVE"}}})
    assert (f.severity, f.reachability, f.triage_state, f.status, f.autotriage_verdict) == (
        "critical", "conditionally_reachable", "provisionally_ignored", "brand_new_status", "true_positive")
