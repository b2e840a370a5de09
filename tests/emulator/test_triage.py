"""Bulk triage (4.10): validation rules, selection, limit, same-fingerprint findings on other branches."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_id, by_slug

Finding = dict[str, Any]


def triage(api: httpx.Client, emulator: EmulatorProcess, **body: Any) -> httpx.Response:
    return api.post(by_slug(emulator, "triage"), json=body)


def by_fingerprint(findings: list[Finding]) -> dict[str, list[Finding]]:
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f["match_based_id"], []).append(f)
    return groups


@pytest.mark.parametrize(("body", "field"), [
    ({"issue_type": "sast", "issue_ids": [1]}, "new_triage_state"),
    ({"issue_type": "sast", "issue_ids": [1], "new_triage_state": "reviewing", "new_triage_reason": "no_time"},
     "new_triage_reason"),
    ({"issue_type": "sast", "issue_ids": [1], "new_note": "x" * 3001}, "new_note"),
    ({"issue_type": "sast", "new_triage_state": "ignored"}, "issue_ids"),
    ({"issue_type": "sast", "issue_ids": [], "repos": [], "new_triage_state": "ignored"}, "issue_ids"),
    ({"issue_type": "sast", "issue_ids": [1], "new_triage_state": "ignored", "limit": 3001}, "limit"),
    ({"issue_type": "sast", "issue_ids": [1], "new_triage_state": "ignored", "limit": 0}, "limit"),
    ({"issue_ids": [1], "new_triage_state": "ignored"}, "issue_type"),
    ({"issue_type": "sast", "issue_ids": ["1"], "new_triage_state": "ignored"}, "issue_ids"),
    ({"issue_type": "sast", "exposures": ["reachable"], "new_triage_state": "ignored"}, "exposures"),
    ({"issue_type": "sast", "since": "last week", "new_triage_state": "ignored"}, "since"),
    ({"issue_type": "sast", "issue_ids": [1], "new_triage_state": "closed"}, "new_triage_state"),
])
def test_invalid_requests_are_400_naming_the_field(api: httpx.Client, emulator: EmulatorProcess,
                                                   body: dict[str, Any], field: str) -> None:
    assert_error(triage(api, emulator, **body), 400, field)


def test_triage_by_ids_updates_every_field_and_the_other_branches(api: httpx.Client,
                                                                   fresh: EmulatorProcess) -> None:
    groups = by_fingerprint(all_findings(api, fresh, status="open"))
    twins = next(g for g in groups.values() if len(g) > 1)
    single = next(g[0] for g in groups.values() if len(g) == 1)
    before = time.time()
    response = triage(api, fresh, issue_type="sast", issue_ids=[twins[0]["id"], single["id"]],
                      new_triage_state="ignored", new_triage_reason="acceptable_risk", new_note="accepted by ops")
    assert response.status_code == 200, response.text
    body = response.json()
    expected = {f["id"] for f in twins} | {single["id"]}
    assert set(body["triaged_issues"]) == expected
    assert body["num_triaged"] == len(expected)
    after = {f["id"]: f for f in all_findings(api, fresh, status="ignored")}
    for finding_id in expected:
        f = after[finding_id]
        assert (f["triage_state"], f["triage_reason"], f["triage_comment"]) == (
            "ignored", "acceptable_risk", "accepted by ops")
        assert datetime.fromisoformat(f["triaged_at"]).timestamp() >= before - 1
        assert datetime.fromisoformat(f["state_updated_at"]).timestamp() >= before - 1


def test_reopen_and_note_only(api: httpx.Client, fresh: EmulatorProcess) -> None:
    ignored = all_findings(api, fresh, status="ignored")
    target = next(f for f in ignored if len([g for g in ignored if g["match_based_id"] == f["match_based_id"]]) == 1)
    body = triage(api, fresh, issue_type="sast", issue_ids=[target["id"]], new_triage_state="reopened").json()
    assert target["id"] in body["triaged_issues"]
    reopened = next(f for f in all_findings(api, fresh, status="open") if f["id"] == target["id"])
    assert (reopened["triage_state"], reopened["triage_reason"]) == ("reopened", None)

    body = triage(api, fresh, issue_type="sast", issue_ids=[target["id"]], new_note="still open").json()
    noted = next(f for f in all_findings(api, fresh, status="open") if f["id"] == target["id"])
    assert noted["triage_comment"] == "still open"
    assert noted["triage_state"] == "reopened"


def test_filters_and_limit_select_the_first_findings_in_order(api: httpx.Client, fresh: EmulatorProcess) -> None:
    candidates = all_findings(api, fresh, status="open", autotriage_verdict="false_positive")
    everything = by_fingerprint(all_findings(api, fresh))
    response = triage(api, fresh, issue_type="sast", status="open", autotriage_verdict="false_positive", limit=5,
                      new_triage_state="ignored", new_triage_reason="false_positive", new_note="autotriage")
    body = response.json()
    first_five = [f["id"] for f in candidates[:5]]
    assert body["triaged_issues"][:5] == first_five
    twins = {f["id"] for fid in first_five for f in everything[next(
        c["match_based_id"] for c in candidates if c["id"] == fid)]}
    assert set(body["triaged_issues"]) == twins
    assert body["num_triaged"] == len(twins)
    remaining = all_findings(api, fresh, status="open", autotriage_verdict="false_positive")
    assert [f["id"] for f in remaining] == [f["id"] for f in candidates if f["id"] not in twins]


def test_secrets_are_triaged_with_secrets_filters(api: httpx.Client, fresh: EmulatorProcess) -> None:
    secrets = api.get(by_id(fresh, "secrets"), params={"limit": 1000}).json()["findings"]
    valid = [s for s in secrets if s["validation_state"] == "valid" and s["status"] != "reviewing"]
    body = triage(api, fresh, issue_type="secrets", validation_state=["valid"], new_triage_state="reviewing").json()
    assert {s["id"] for s in valid} <= set(body["triaged_issues"])
    after = api.get(by_id(fresh, "secrets"), params={"limit": 1000}).json()["findings"]
    assert all(s["status"] == "reviewing" for s in after if s["validation_state"] == "valid")


def _selection_cases(api: httpx.Client, emulator: EmulatorProcess) -> list[tuple[dict[str, Any], Any]]:
    """(selection, predicate on findings) for the filters only selections have (4.11)."""
    rules = {r["path"]: r for r in api.get(by_id(emulator, "policies/2101"), params={"limit": 2000}).json()["rules"]}
    projects = api.get(f"/api/v1/deployments/{emulator.deployment_slug}/projects").json()["projects"]
    tagged = {p["name"] for p in projects if "tier-1" in p["tags"]}
    return [
        ({"issue_type": "sca", "dependencies": ["lodash", "django"]},
         lambda f: f["found_dependency"]["package"] in ("lodash", "django")),
        ({"issue_type": "sca", "epss_probability": ["high"]}, lambda f: f["epss_score"]["score"] >= 0.1),
        ({"issue_type": "sca", "epss_probability": ["EPSS_PROBABILITY_MINIMAL"]},
         lambda f: f["epss_score"]["score"] < 0.001),
        ({"issue_type": "sast", "pro_only": True}, lambda f: rules[f["rule_name"]]["source"] == "SOURCE_PRO"),
        ({"issue_type": "sast", "ruleset": ["p/ci"]}, lambda f: "p/ci" in rules[f["rule_name"]]["rulesets"]),
        ({"issue_type": "sast", "policy_mode": ["comment", "disabled"]},
         lambda f: rules[f["rule_name"]]["policyMode"] in ("MODE_COMMENT", "MODE_DISABLED")),
        ({"issue_type": "sast", "project_tags": ["tier-1"]}, lambda f: f["repository"]["name"] in tagged),
        ({"issue_type": "sast", "since": "1700000000", "severities": ["low"]}, lambda f: f["severity"] == "low"),
        ({"issue_type": "secrets", "repository_visibility": ["public"]},
         lambda f: f["repository_visibility"] == "public"),
        ({"issue_type": "secrets", "secret_types": ["AWS", "Stripe"]}, lambda f: f["secret_type"] in ("AWS", "Stripe")),
        ({"issue_type": "secrets", "include_historical": False}, lambda f: not f["historical"]),
    ]


def test_every_selection_filter_selects_the_matching_findings_and_their_twins(api: httpx.Client,
                                                                                fresh: EmulatorProcess) -> None:
    everything = {
        "sast": all_findings(api, fresh, issue_type="sast"),
        "sca": all_findings(api, fresh, issue_type="sca"),
        "secrets": api.get(by_id(fresh, "secrets"), params={"limit": 1000}).json()["findings"],
    }
    for selection, predicate in _selection_cases(api, fresh):
        findings = everything[selection["issue_type"]]
        matching = {f["match_based_id"] for f in findings if predicate(f)}
        expected = {f["id"] for f in findings if f["match_based_id"] in matching}
        body = triage(api, fresh, new_note="checked", **selection).json()
        assert set(body["triaged_issues"]) == expected, selection
        assert 0 < len(expected) < len(findings), selection
