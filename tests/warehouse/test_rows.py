"""API JSON -> row tuples: column mapping, leniency, timestamps and the verbatim ``raw`` column."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec
import orjson
import pytest
from findings_provider.client.vocabulary import IssueType
from findings_provider.warehouse import (
    DEPENDENCY_COLUMNS,
    DEPENDENCY_REPOSITORY_COLUMNS,
    FINDING_COLUMNS,
    POLICY_RULE_COLUMNS,
    SCAN_COLUMNS,
    dependency_repository_rows,
    dependency_rows,
    finding_row_from_dict,
    finding_rows,
    policy_rule_rows,
    scan_rows,
    schema,
)
from findings_provider.warehouse.timestamps import utc_datetime, utc_text
from present import present

# A code finding as the service sends it: pretty-printed, keys in its order, escapes kept as sent.
SAST = b"""{
  "id": 9001,
  "categories": ["security"],
  "confidence": "high",
  "severity": "critical",
  "created_at": "2020-11-18T20:46:25.269650Z",
  "relevant_since": "2020-11-18T23:28:12.391Z",
  "first_seen_scan_id": 77,
  "match_based_id": "a1b2c3",
  "syntactic_id": "s-1",
  "ref": "refs/heads/main",
  "repository": {"name": "acme/payments", "url": "https://git.example.com/acme/payments"},
  "location": {"filePath": "src/db.py", "line": 10, "column": 4, "endLine": 10, "endColumn": 40},
  "external_ticket": null,
  "rule": {"name": "python.sqli", "message": "Tainted \\"input\\" reaches a query\\n", "cweNames": []},
  "rule_name": "python.sqli",
  "rule_message": "caf\\u00e9 \xc3\xa9",
  "status": "open",
  "triage_state": "untriaged",
  "triage_reason": "no_triage_reason",
  "triaged_at": null,
  "state_updated_at": "2020-11-19 08:00:00.5+00:00",
  "sourcing_policy": {"id": 1, "name": "Default", "slug": "default"},
  "assistant": {
    "autofix": {"explanation": null, "fix_code": "cursor.execute(q, (x,))"},
    "autotriage": {"reason": "user input reaches the query", "verdict": "true_positive"},
    "component": {"risk": "high", "tag": "payments"}
  },
  "brand_new_field": {"the": ["api", "is", "experimental"]}
}"""

SCA = {
    "id": 42,
    "confidence": "medium",
    "severity": "high",
    "relevant_since": "2020-11-18 23:28:12.391807+00:00",
    "first_seen_scan_id": "78",
    "match_based_id": "m-42",
    "ref": "refs/heads/dev",
    "repository": {"name": "acme/web", "url": "https://git.example.com/acme/web"},
    "rule_name": "ssc-lodash-proto",
    "status": "fixing",
    "triage_state": "reviewing",
    "triage_reason": None,
    "reachability": "always_reachable",
    "found_dependency": {
        "ecosystem": "npm",
        "package": "lodash",
        "version": "4.17.20",
        "transitivity": "direct",
    },
    "epss_score": {"percentile": 0.9, "score": 0.02},
    "usage": {
        "location": {"filePath": "app.js", "line": 3},
        "external_ticket": {"id": 313, "url": "https://t"},
    },
    "external_ticket": None,
}

SECRETS = {
    "id": "5550001",
    "repository": "acme/infra",
    "secret_type": "AWS access key",
    "severity": "critical",
    "status": "open",
    "validation_state": "valid",
    "created_at": "2021-02-03T04:05:06Z",
}


def as_dict(row: tuple) -> dict:
    return dict(zip(FINDING_COLUMNS, row, strict=True))


def test_raw_is_the_original_bytes_exactly():
    (row,) = finding_rows("sast", [msgspec.Raw(SAST)])
    assert as_dict(row)["raw"].encode() == SAST


def test_raw_items_sliced_out_of_a_page_body_keep_their_own_bytes():
    body = b'{"findings": [ {"id": 1, "status":"open"} ,{"id":2,  "status": "fixed"}]}'
    items = msgspec.json.decode(body, type=dict[str, list[msgspec.Raw]])["findings"]
    rows = finding_rows("sast", items)
    assert [as_dict(r)["raw"] for r in rows] == ['{"id": 1, "status":"open"}', '{"id":2,  "status": "fixed"}']
    assert [as_dict(r)["status"] for r in rows] == ["open", "fixed"]


def test_sca_finding_reachability_and_ticket_of_its_usage():
    row = as_dict(finding_row_from_dict("sca", SCA))
    assert row["reachability"] == "always_reachable"
    assert row["autotriage_verdict"] is None
    assert row["external_ticket_id"] == 313
    assert row["first_seen_scan_id"] == 78
    assert row["triage_reason"] is None
    assert row["status"] == "fixing"


def test_external_ticket_of_the_finding_wins_over_its_usage():
    finding = {**SCA, "external_ticket": {"id": 7, "externalSlug": "SEC-7"}}
    assert as_dict(finding_row_from_dict("sca", finding))["external_ticket_id"] == 7


def test_secrets_finding_mapped_leniently():
    row = as_dict(finding_row_from_dict("secrets", SECRETS))
    assert row["issue_type"] == "secrets"
    assert row["id"] == 5550001
    assert row["repository_name"] == "acme/infra"
    assert row["rule_name"] == "AWS access key"
    assert row["relevant_since"] == "2021-02-03 04:05:06.000000+00:00"
    assert row["severity"] == "critical"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"rule": {"name": "from-rule-object"}}, "from-rule-object"),
        ({"type": "generic_api_key"}, "generic_api_key"),
        ({"rule_name": "explicit", "secret_type": "ignored"}, "explicit"),
    ],
)
def test_rule_name_fallbacks(extra, expected):
    assert as_dict(finding_row_from_dict("secrets", {"id": 1, **extra}))["rule_name"] == expected


def test_missing_fields_are_null():
    row = as_dict(finding_row_from_dict("sast", {"id": 3}))
    assert {k for k, v in row.items() if v is not None} == {"issue_type", "id", "raw"}


def test_unexpected_types_do_not_fail_and_follow_the_value_rules():
    finding = {
        "id": 4,
        "severity": 3,
        "confidence": True,
        "repository": ["not", "an", "object"],
        "repository_name": "acme/fallback",
        "assistant": "none",
        "external_ticket": "SEC-1",
        "first_seen_scan_id": "not-a-number",
        "relevant_since": "yesterday",
        "match_based_id": {"nested": 1},
    }
    row = as_dict(finding_row_from_dict("sast", finding))
    assert row["severity"] == "3"
    assert row["confidence"] == "true"
    assert row["repository_name"] == "acme/fallback"
    assert row["autotriage_verdict"] is None
    assert row["external_ticket_id"] is None
    assert row["first_seen_scan_id"] is None
    assert row["relevant_since"] is None
    assert row["match_based_id"] == '{"nested":1}'


def test_the_three_timestamp_shapes_of_the_service_are_one_instant_in_utc():
    shapes = ["2020-11-18 23:28:12.391000+00:00", "2020-11-18T23:28:12.391Z", "2020-11-18T23:28:12.391000Z"]
    rows = finding_rows(
        "sast", [msgspec.Raw(orjson.dumps({"id": i, "relevant_since": s})) for i, s in enumerate(shapes)]
    )
    texts = {as_dict(r)["relevant_since"] for r in rows}
    assert texts == {"2020-11-18 23:28:12.391000+00:00"}
    assert datetime.fromisoformat(texts.pop()) == datetime(2020, 11, 18, 23, 28, 12, 391000, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "value",
    [
        "2020-11-18 23:28:12.391807+00:00",
        "2020-11-18T23:28:12.391Z",
        "2020-11-18T20:46:25.269650Z",
        "2020-11-18T20:46:25Z",
        "2020-11-19T01:46:25.5+05:00",
        "2020-11-18T20:46:25",
        "2020-11-18",
    ],
)
def test_fast_path_agrees_with_the_full_parse(value):
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    expected = (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    assert utc_text(value) == expected.isoformat(" ", "microseconds")
    assert utc_datetime(value) == expected
    assert present(present(utc_datetime(value)).utcoffset()).total_seconds() == 0


@pytest.mark.parametrize("value", ["", "yesterday", "2020-13-18T20:46:25.123Z", "2020-11-18T25:00:00.000Z", 5, None])
def test_what_is_not_a_timestamp_is_none(value):
    assert utc_text(value) is None


def test_canonical_text_sorts_chronologically():
    values = [
        "2020-11-18T23:28:12Z",
        "2020-11-18T23:28:12.5Z",
        "2020-11-19T00:28:12+02:00",
        "2020-11-18T23:28:11.999999Z",
    ]
    chronological = sorted(values, key=lambda v: present(utc_datetime(v)))
    assert sorted(present(utc_text(v)) for v in values) == [utc_text(v) for v in chronological]


def test_dict_and_raw_paths_share_one_mapping():
    parsed = orjson.loads(SAST)
    from_dict = finding_row_from_dict("sast", parsed)
    (from_raw,) = finding_rows("sast", [msgspec.Raw(orjson.dumps(parsed))])
    assert from_dict == from_raw
    assert orjson.loads(as_dict(from_dict)["raw"]) == parsed


def test_issue_type_enum_members_are_stored_as_plain_strings():
    from findings_provider.client.vocabulary import IssueType

    (row,) = finding_rows(IssueType.SCA, [msgspec.Raw(b'{"id": 1}')])
    assert type(row[0]) is str
    assert row[0] == "sca"


def test_unknown_issue_type_and_missing_id_are_errors():
    with pytest.raises(ValueError, match="unknown issue type 'code'"):
        finding_rows("code", [msgspec.Raw(b'{"id": 1}')])
    with pytest.raises(ValueError, match="sast finding has no usable id"):
        finding_rows("sast", [msgspec.Raw(b'{"id": null, "status": "open"}')])
    with pytest.raises(ValueError, match="sast finding has no usable id"):
        finding_rows("sast", [msgspec.Raw(b'{"id": "abc"}')])


def test_scan_rows_from_search_results():
    scan = {
        "id": "123",
        "deployment_id": "1",
        "repository_id": 456,
        "branch": "main",
        "commit": "0a1b2c",
        "started_at": "2020-11-18T20:46:25.269650Z",
        "completed_at": None,
        "status": "SCAN_STATUS_RUNNING",
        "exit_code": 0,
        "is_full_scan": False,
        "enabled_products": ["PRODUCT_SAST"],
        "findings_counts": {"code": 1, "secrets": 0, "supply_chain": 2, "total": 3},
        "total_time": 12.5,
    }
    raw = orjson.dumps(scan)
    rows = scan_rows([scan, msgspec.Raw(raw)])
    assert rows[0] == rows[1]
    assert dict(zip(SCAN_COLUMNS, rows[0], strict=True)) == {
        "id": "123",
        "repository_id": "456",
        "branch": "main",
        "commit": "0a1b2c",
        "status": "SCAN_STATUS_RUNNING",
        "exit_code": 0,
        "started_at": "2020-11-18 20:46:25.269650+00:00",
        "completed_at": None,
        "is_full_scan": False,
        "raw": raw.decode(),
    }


def test_rule_dependency_and_repository_rows():
    rule = {
        "id": "r1",
        "path": "python.sqli",
        "policyMode": "MODE_BLOCK",
        "severity": "SEVERITY_HIGH",
        "category": "security",
        "confidence": "CONFIDENCE_HIGH",
        "source": "SOURCE_PRO",
        "vulnerabilityClass": "SQL Injection",
    }
    (rule_row,) = policy_rule_rows("17", [rule])
    assert dict(zip(POLICY_RULE_COLUMNS, rule_row, strict=True)) == {
        "policy_id": "17",
        "id": "r1",
        "path": "python.sqli",
        "policy_mode": "MODE_BLOCK",
        "severity": "SEVERITY_HIGH",
        "category": "security",
        "confidence": "CONFIDENCE_HIGH",
        "source": "SOURCE_PRO",
        "raw": orjson.dumps(rule).decode(),
    }
    camel = {
        "id": "d1",
        "name": "lodash",
        "version": "4.17.20",
        "ecosystem": "npm",
        "license": ["MIT", "ISC"],
        "lockfilePath": "package-lock.json",
        "repositoryId": 5,
    }
    snake = {
        "id": "d2",
        "name": "requests",
        "license": "Apache-2.0",
        "lockfile_path": "poetry.lock",
        "repository_id": "6",
    }
    rows = [dict(zip(DEPENDENCY_COLUMNS, r, strict=True)) for r in dependency_rows([camel, snake])]
    assert [(r["license"], r["lockfile_path"], r["repository_id"]) for r in rows] == [
        ('MIT, ISC', "package-lock.json", "5"),
        ("Apache-2.0", "poetry.lock", "6"),
    ]
    (repo_row,) = dependency_repository_rows(
        [b'{"id": 9, "name": "acme/web", "numDependencies": 120, "hasDependencyPathScan": true}']
    )
    assert repo_row == (
        9,
        "acme/web",
        120,
        True,
        '{"id": 9, "name": "acme/web", "numDependencies": 120, "hasDependencyPathScan": true}',
    )


@pytest.mark.parametrize(
    ("builder", "item"),
    [
        (scan_rows, {"status": "SCAN_STATUS_RUNNING"}),
        (dependency_rows, {"name": "x"}),
        (dependency_repository_rows, {"id": "nine"}),
    ],
)
def test_objects_without_an_id_are_errors(builder, item):
    with pytest.raises(ValueError, match="has no usable id"):
        builder([item])


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        (schema.findings, FINDING_COLUMNS),
        (schema.scans, SCAN_COLUMNS),
        (schema.policy_rules, POLICY_RULE_COLUMNS),
        (schema.dependencies, DEPENDENCY_COLUMNS),
        (schema.dependency_repositories, DEPENDENCY_REPOSITORY_COLUMNS),
    ],
)
def test_row_columns_are_the_table_columns_but_synced_at(table, columns):
    assert len(set(columns)) == len(columns)
    # findings.counted is not the row's: warehouse.branches computes it over all copies of a finding; the store
    # adds findings.digest (rows.content_digest of raw) as it adds synced_at
    computed = {"counted", "digest"} if table is schema.findings else set()
    assert set(table.c.keys()) == {*columns, "synced_at", *computed}


def test_dependency_licences_as_a_list_are_kept():
    from findings_provider.warehouse.rows import DEPENDENCY_COLUMNS, dependency_rows

    (row,) = dependency_rows([{"id": "d1", "name": "lodash", "licenses": ["MIT", "Apache-2.0"]}])
    assert row[DEPENDENCY_COLUMNS.index("license")] == "MIT, Apache-2.0"
    (row,) = dependency_rows([{"id": "d2", "name": "x", "license": "BSD-3-Clause"}])
    assert row[DEPENDENCY_COLUMNS.index("license")] == "BSD-3-Clause"


# A secret in the real service's dialect (api-notes): proto-JSON, camelCase, PREFIX_VALUE enums, digit-string ids.
SECRET_REAL = {
    "id": "691234",
    "type": "AWS access key",
    "findingPath": "config/aws.py:3",
    "ref": "refs/heads/main",
    "createdAt": "2024-07-11T20:46:25.269650Z",
    "repository": {"name": "acme/infra", "visibility": "REPOSITORY_VISIBILITY_PRIVATE"},
    "externalTicket": {"id": "12", "externalSlug": "SEC-12"},
    "severity": "SEVERITY_HIGH",
    "confidence": "CONFIDENCE_LOW",
    "status": "FINDING_STATUS_OPEN",
    "validationState": "VALIDATION_STATE_CONFIRMED_VALID",
    "autotriage": {"verdict": "VERDICT_FALSE_POSITIVE"},
}


# A finding of the AI code scanner: a code finding's shape with its own fields (kept in ``raw`` only).
AI_SAST = {
    "id": 9101,
    "severity": "high",
    "confidence": "medium",
    "created_at": "2024-03-01T10:00:00Z",
    "relevant_since": "2024-03-01T10:00:00Z",
    "match_based_id": "ai-1",
    "ref": "refs/heads/main",
    "repository": {"name": "acme/billing", "url": "https://git.example.com/acme/billing"},
    "location": {"filePath": "billing/invoices.py", "line": 42},
    "rule": {"name": "ai.detection.idor", "message": "The invoice lookup does not check its owner"},
    "rule_name": "ai.detection.idor",
    "status": "open",
    "triage_state": "untriaged",
    "ai_impact": "An attacker reads other users' invoices",
    "assistant": {"autotriage": {"verdict": "true_positive"}},
    "external_ticket": {"id": 88, "externalSlug": "SEC-88"},
}

#: A finding of every issue type, as the service sends it, and every column of the row it becomes (``raw``: the
#: bytes as received). A new ``IssueType`` needs its entry: the test below runs once per member of the enum.
ROWS: dict[str, tuple[bytes, dict[str, Any]]] = {
    "sast": (SAST, {
        "issue_type": "sast", "id": 9001, "repository_name": "acme/payments", "ref": "refs/heads/main",
        "rule_name": "python.sqli", "severity": "critical", "confidence": "high", "status": "open",
        "triage_state": "untriaged", "triage_reason": "no_triage_reason", "autotriage_verdict": "true_positive",
        "reachability": None, "match_based_id": "a1b2c3", "relevant_since": "2020-11-18 23:28:12.391000+00:00",
        "external_ticket_id": None, "first_seen_scan_id": 77, "validation_state": None, "path": "src/db.py",
        "triaged_at": None, "state_updated_at": "2020-11-19 08:00:00.500000+00:00",
    }),
    "sca": (orjson.dumps(SCA), {
        "issue_type": "sca", "id": 42, "repository_name": "acme/web", "ref": "refs/heads/dev",
        "rule_name": "ssc-lodash-proto", "severity": "high", "confidence": "medium", "status": "fixing",
        "triage_state": "reviewing", "triage_reason": None, "autotriage_verdict": None,
        "reachability": "always_reachable", "match_based_id": "m-42",
        "relevant_since": "2020-11-18 23:28:12.391807+00:00", "external_ticket_id": 313, "first_seen_scan_id": 78,
        "validation_state": None, "path": "app.js", "triaged_at": None, "state_updated_at": None,
    }),
    "ai_sast": (orjson.dumps(AI_SAST), {
        "issue_type": "ai_sast", "id": 9101, "repository_name": "acme/billing", "ref": "refs/heads/main",
        "rule_name": "ai.detection.idor", "severity": "high", "confidence": "medium", "status": "open",
        "triage_state": "untriaged", "triage_reason": None, "autotriage_verdict": "true_positive",
        "reachability": None, "match_based_id": "ai-1", "relevant_since": "2024-03-01 10:00:00.000000+00:00",
        "external_ticket_id": 88, "first_seen_scan_id": None, "validation_state": None,
        "path": "billing/invoices.py", "triaged_at": None, "state_updated_at": None,
    }),
    "secrets": (orjson.dumps(SECRET_REAL), {  # the real service's dialect
        "issue_type": "secrets", "id": 691234, "repository_name": "acme/infra", "ref": "refs/heads/main",
        "rule_name": "AWS access key", "severity": "high", "confidence": "low", "status": "open",
        "triage_state": None, "triage_reason": None, "autotriage_verdict": "false_positive",
        "reachability": None, "match_based_id": None, "relevant_since": "2024-07-11 20:46:25.269650+00:00",
        "external_ticket_id": 12, "first_seen_scan_id": None,
        "validation_state": "confirmed_valid", "path": "config/aws.py", "triaged_at": None,
        "state_updated_at": None,
    }),
}


@pytest.mark.parametrize("issue_type", list(IssueType))
def test_a_finding_of_each_issue_type_maps_every_column(issue_type):
    assert issue_type in set(ROWS), f"no {issue_type} finding in ROWS: add one and the row it becomes"
    body, expected = ROWS[issue_type]
    (row,) = finding_rows(issue_type, [msgspec.Raw(body)])
    assert as_dict(row) == {**expected, "raw": body.decode()}


@pytest.mark.parametrize("spelling", ["always reachable", "always_reachable", "ALWAYS_REACHABLE"])
def test_reachability_in_any_spelling_is_stored_canonical(spelling):
    assert as_dict(finding_row_from_dict("sca", {**SCA, "reachability": spelling}))["reachability"] == (
        "always_reachable")


def test_real_dialect_code_finding_snake_case_ticket_and_new_vocabularies():
    finding = {**orjson.loads(SAST), "external_ticket": {"id": 5, "external_slug": "S-5", "linked_issue_ids": [9001]},
               "status": "provisionally_ignored", "triage_reason": "duplicate"}
    for issue_type in ("sast", "ai_sast"):
        row = as_dict(finding_rows(issue_type, [msgspec.Raw(orjson.dumps(finding))])[0])
        assert (row["issue_type"], row["external_ticket_id"], row["status"], row["triage_reason"]) == (
            issue_type, 5, "provisionally_ignored", "duplicate")


def test_unknown_enum_value_is_stored_as_received():
    row = as_dict(finding_row_from_dict("secrets", {**SECRET_REAL, "validationState": "x", "status": "NEW_ONE"}))
    assert row["status"] == "NEW_ONE"
