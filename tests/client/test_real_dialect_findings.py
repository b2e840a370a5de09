"""Findings and secrets in the real service's dialect give the canonical values of the reference's dialect.

Each test names the difference of api-notes ("The real service's dialect") it covers; both the typed models and
the warehouse's raw row path are checked, and they must agree on every fixture.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import msgspec
import orjson
import pytest
from findings_provider.client import canonical
from findings_provider.client.endpoints import ENDPOINTS, parse_model, raw_findings_parser
from findings_provider.client.models import Finding
from findings_provider.client.vocabulary import IssueType
from findings_provider.config import FindingSelector
from findings_provider.pipeline.freshness import api_filters
from findings_provider.pipeline.ticket_outcomes import ticket_in_raw, ticket_of
from findings_provider.warehouse import FINDING_COLUMNS, finding_rows
from findings_provider.warehouse.timestamps import utc_text
from present import present

from .fixtures import dialects as d

FINDINGS = ENDPOINTS["findings"]
SECRETS = ENDPOINTS["secrets"]


def typed(issue_type: str, finding: dict) -> Finding:
    """The finding through the client's typed parsing of a page in the real (flat) envelope."""
    endpoint = SECRETS if issue_type == "secrets" else FINDINGS
    (item,) = parse_model(endpoint, orjson.dumps({"findings": [finding], "cursor": ""})).items
    return item


def row(issue_type: str, finding: dict) -> dict:
    """The finding's warehouse row through the raw fast path (the bytes sliced out of a page)."""
    endpoint = SECRETS if issue_type == "secrets" else FINDINGS
    page = raw_findings_parser(endpoint)(orjson.dumps({"findings": [finding], "cursor": ""}))
    (values,) = finding_rows(issue_type, page.items)
    return dict(zip(FINDING_COLUMNS, values, strict=True))


def canonical_view(f: Finding) -> dict:
    """Every canonical value a downstream reader may use."""
    return {
        "id": f.id, "repository_name": f.repository_name, "ref": f.ref, "rule_name": f.rule_name,
        "severity": f.severity, "confidence": f.confidence, "status": f.status, "triage_state": f.triage_state,
        "triage_reason": f.triage_reason, "autotriage_verdict": f.autotriage_verdict,
        "reachability": f.reachability, "relevant_since": f.relevant_since, "created_at": f.created_at,
        "external_ticket_id": f.external_ticket_id, "ticket_id": f.ticket_id,
        "external_ticket": f.external_ticket.model_dump(exclude_none=True) if f.external_ticket else None,
        "validation_state": f.validation_state, "path": f.path,
        "location": f.location.model_dump() if f.location else None,
        "rule": f.rule.model_dump(exclude_none=True) if f.rule else None,
        "review_comments": [c.model_dump() for c in f.review_comments],
        "ticket_of": ticket_of(f),
    }


@pytest.mark.parametrize("issue_type", list(IssueType))
def test_every_issue_type_has_a_pair_of_both_dialects(issue_type):
    """A new ``IssueType`` needs a finding of it in both dialects in ``fixtures/dialects.py`` (``PAIRS``), which the
    two tests below run on."""
    assert issue_type in {t for t, _, _ in d.PAIRS}, f"no pair of {issue_type} findings in fixtures/dialects.py PAIRS"


@pytest.mark.parametrize(("issue_type", "reference", "real"), d.PAIRS, ids=[t for t, _, _ in d.PAIRS])
def test_real_dialect_gives_the_reference_canonical_values(issue_type, reference, real):
    """Covers: key style (location, external ticket, rule, review comments), enum spelling, ids, timestamps."""
    assert canonical_view(typed(issue_type, real())) == canonical_view(typed(issue_type, reference()))
    assert {k: v for k, v in row(issue_type, real()).items() if k != "raw"} == {
        k: v for k, v in row(issue_type, reference()).items() if k != "raw"}


@pytest.mark.parametrize(("issue_type", "dialect", "finding"), d.every_fixture(),
                         ids=[f"{t}-{x}" for t, x, _ in d.every_fixture()])
def test_typed_model_and_raw_row_path_agree(issue_type, dialect, finding):
    """One description: the fast row path stores exactly the typed model's canonical values."""
    f = typed(issue_type, finding)
    from_model = {"issue_type": issue_type, **{
        name: utc_text(getattr(f, name)) if kind == "timestamp" else getattr(f, name)
        for name, (kind, _) in canonical.FINDING_FIELDS.items()}}
    stored = row(issue_type, finding)
    assert stored.pop("raw") == orjson.dumps(finding).decode()  # the bytes as received
    assert stored == from_model


def test_every_canonical_field_is_a_declared_attribute_of_the_typed_finding():
    """A field added to ``FINDING_FIELDS`` (a new warehouse column) is declared on ``Finding`` too, so that type
    checkers and readers of the model see it (an undeclared one would only be kept as an unknown field)."""
    assert [name for name in canonical.FINDING_FIELDS if name not in Finding.model_fields] == []


def test_findings_envelopes_flat_and_per_type_including_ai():
    """Envelope: flat ``findings`` (real) or ``sastFindings``/``scaFindings``/``aiSastFindings`` (reference)."""
    per_type = orjson.dumps({"sastFindings": {"findings": [d.sast_reference()]},
                             "scaFindings": {"findings": [d.sca_reference()]},
                             "aiSastFindings": {"findings": [d.ai_reference()]}, "unknownFindings": {}})
    flat = orjson.dumps({"findings": [d.sast_real(), d.sca_real(), d.ai_real()]})
    for body in (per_type, flat):
        assert [f.id for f in parse_model(FINDINGS, body).items] == [1001, 2001, 3001]
        assert [orjson.loads(bytes(i))["id"] for i in raw_findings_parser(FINDINGS)(body).items] == [1001, 2001, 3001]
    assert parse_model(FINDINGS, flat).items[2].ai_impact.startswith("An attacker")


def test_secret_canonical_values():
    """Secrets: digit-string ids, ``createdAt`` as relevant_since, ``externalTicket``, proto enums, findingPath."""
    f = typed("secrets", d.secret_real())
    assert (f.id, f.external_ticket_id, present(f.external_ticket).linkedIssueIds) == (691234, 12, [691234])
    assert f.relevant_since == f.created_at == datetime(2024, 7, 11, 20, 46, 25, 269650, tzinfo=timezone.utc)
    assert (f.severity, f.confidence, f.status, f.validation_state) == ("high", "low", "open", "confirmed_valid")
    assert (f.autotriage_verdict, f.repository_name, f.path, f.ref) == (
        "false_positive", "acme/infra", "config/aws.py", "refs/heads/main")  # the line stays in raw
    assert f.review_comments[0].externalNoteId == "5"
    assert row("secrets", d.secret_real())["relevant_since"] == "2024-07-11 20:46:25.269650+00:00"


def test_zone_less_timestamp_is_utc():
    f = typed("secrets", d.secret_real(d.CREATED_ZONELESS))
    assert f.relevant_since == datetime(2024, 7, 11, 20, 46, 25, 269650, tzinfo=timezone.utc)


@pytest.mark.parametrize(("kind", "value", "expected"), [
    ("reachability", "always reachable", "always_reachable"),
    ("reachability", "always_reachable", "always_reachable"),
    ("reachability", "ALWAYS_REACHABLE", "always_reachable"),
    ("reachability", "no reachability analysis", "unknown"),  # the reference's and the exposures filter's word
    ("verdict", "VERDICT_NO_VERDICT", None),  # no verdict at all
    ("severity", "SEVERITY_HIGH", "high"),
    ("severity", "SEVERITY_CRITICAL", "critical"),
    ("status", "FINDING_STATUS_OPEN", "open"),
    ("status", "FINDING_STATUS_PROVISIONALLY_IGNORED", "provisionally_ignored"),
    ("confidence", "CONFIDENCE_MEDIUM", "medium"),
    ("verdict", "VERDICT_FALSE_POSITIVE", "false_positive"),
    ("validation_state", "VALIDATION_STATE_CONFIRMED_VALID", "confirmed_valid"),
    ("validation_state", "VALIDATION_STATE_NO_VALIDATOR", "no_validator"),
    ("triage_reason", "duplicate", "duplicate"),
    ("triage_state", "provisionally_ignored", "provisionally_ignored"),
])
def test_enum_spellings(kind, value, expected):
    assert canonical.enum_value(kind, value) == expected


def test_unknown_enum_value_is_stored_as_received_and_logged_once(caplog):
    """Wider vocabularies: a value nobody knows yet never fails the page."""
    canonical.forget_logged_unknowns()
    weird = [d.secret_real() | {"id": str(i), "status": "FINDING_STATUS_SNOOZED"} for i in (1, 2)]
    body = orjson.dumps({"findings": weird, "cursor": ""})
    with caplog.at_level(logging.WARNING, logger="findings_provider.client.canonical"):
        assert [f.status for f in parse_model(SECRETS, body).items] == ["FINDING_STATUS_SNOOZED"] * 2
        rows = finding_rows("secrets", raw_findings_parser(SECRETS)(body).items)
    assert [r[FINDING_COLUMNS.index("status")] for r in rows] == ["FINDING_STATUS_SNOOZED"] * 2
    assert [r.getMessage() for r in caplog.records].count(
        "unknown status value 'FINDING_STATUS_SNOOZED': stored as received") == 1


def test_reachability_null_stays_null():
    assert row("sca", d.sca_real() | {"reachability": None})["reachability"] is None


def test_ticket_reread_finds_camel_case_external_ticket():
    """The ticket re-read: ``externalTicket`` (secrets) with a digit-string id, in raw JSON and typed."""
    raw = orjson.dumps(d.secret_real()).decode()
    assert ticket_in_raw(raw) == {"id": 12, "url": "https://t/SEC-12", "externalSlug": "SEC-12"}
    assert present(ticket_of(typed("secrets", d.secret_real())))["id"] == 12
    usage = orjson.dumps({"id": 1, "usage": {"externalTicket": {"id": "9", "externalSlug": "S-9"}}}).decode()
    assert present(ticket_in_raw(usage))["id"] == 9


def test_selector_accepts_either_spelling():
    selector = FindingSelector.model_validate({
        "reachability": ["always reachable", "REACHABLE"], "severity": ["SEVERITY_HIGH"],
        "status": ["FINDING_STATUS_OPEN", "provisionally_ignored"], "autotriage_verdict": ["VERDICT_FALSE_POSITIVE"],
    })
    assert selector.columns() == {"reachability": ["always_reachable", "reachable"], "severity": ["high"],
                                  "status": ["open", "provisionally_ignored"],
                                  "autotriage_verdict": ["false_positive"]}
    with pytest.raises(ValueError):
        FindingSelector.model_validate({"severity": ["SEVERITY_EXTREME"]})


def test_exposures_filter_maps_no_analysis_to_unknown():
    selector = FindingSelector.model_validate({"reachability": ["no reachability analysis", "always reachable"]})
    assert api_filters("sca", selector, None)["exposures"] == ["unknown", "always_reachable"]


def test_issue_types_are_defined_once():
    assert tuple(t.value for t in IssueType) == canonical.ISSUE_TYPES
    assert set(canonical.OFFSET_TYPES) == set(canonical.ISSUE_TYPES) - {"secrets"}


def test_raw_row_path_agrees_with_a_row_built_from_bytes_in_a_page():
    """The raw column keeps the item's bytes exactly, whatever the dialect."""
    body = b'{"findings": [ {"id":"7", "severity":"SEVERITY_LOW", "createdAt":"2024-07-11T20:46:25.269650Z"} ]}'
    (values,) = finding_rows("secrets", raw_findings_parser(SECRETS)(body).items)
    stored = dict(zip(FINDING_COLUMNS, values, strict=True))
    assert stored["raw"] == '{"id":"7", "severity":"SEVERITY_LOW", "createdAt":"2024-07-11T20:46:25.269650Z"}'
    assert (stored["id"], stored["severity"]) == (7, "low")
    assert msgspec.json.decode(stored["raw"])["severity"] == "SEVERITY_LOW"


def test_ai_findings_cannot_be_ticketed():
    """The ticket endpoint takes sast, sca and secrets only: a ticket policy for ai_sast is refused up front."""
    from findings_provider.config import TicketPolicy

    with pytest.raises(ValueError, match="no ai_sast tickets"):
        TicketPolicy.model_validate({"name": "x", "issue_type": "ai_sast", "select": {"status": ["open"]}})


@pytest.mark.parametrize(("received", "canonical"), [
    ("config/aws.py:3", "config/aws.py"),  # the real secrets' findingPath: file:line
    ("config/aws.py", "config/aws.py"),
    ("odd:name.py", "odd:name.py"),  # a colon not followed by a line number is part of the name
    ("dir/file.py:", "dir/file.py:"),
    (":12", ":12"),
    (None, None),
])
def test_a_location_path_is_the_file_without_its_line(received, canonical):
    from findings_provider.client.canonical import file_path

    assert file_path(received) == canonical
    stored = row("secrets", {"id": 5, "findingPath": received})
    assert stored["path"] == canonical
