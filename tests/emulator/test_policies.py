"""Policies: list, rules with cursor pagination (4.5), rule mode update (4.6)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_id

MODES = {"MODE_MONITOR", "MODE_COMMENT", "MODE_BLOCK", "MODE_DISABLED"}
RULE_FIELDS = {"id", "path", "category", "confidence", "severity", "source", "policyMode", "languages",
               "technologies", "cweCategories", "owaspCategories", "vulnerabilityClass", "rulesets",
               "registryMaintainer", "lastChangeAt", "url"}


def rules_of(api: httpx.Client, emulator: EmulatorProcess, policy_id: str, limit: int) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    cursor = ""
    while True:
        page = api.get(by_id(emulator, f"policies/{policy_id}"), params={"cursor": cursor, "limit": limit}).json()
        rules.extend(page["rules"])
        cursor = page["cursor"]
        if not cursor:
            return rules


def test_policies_list_has_one_default_code_policy(api: httpx.Client, emulator: EmulatorProcess) -> None:
    policies = api.get(by_id(emulator, "policies")).json()["policies"]
    assert len(policies) == 2
    assert [p["isDefault"] for p in policies] == [True, False]
    assert all(isinstance(p["id"], str) and p["productType"] == "PRODUCT_TYPE_SAST" for p in policies)


def test_rules_default_limit_returns_all_40_rules(api: httpx.Client, emulator: EmulatorProcess) -> None:
    page = api.get(by_id(emulator, "policies/2101")).json()
    assert page["policy"]["id"] == "2101"
    assert page["cursor"] == ""
    assert len(page["rules"]) == 40
    assert all(RULE_FIELDS <= rule.keys() for rule in page["rules"])


def test_rules_cursor_pagination_reaches_the_end(api: httpx.Client, emulator: EmulatorProcess) -> None:
    paged = rules_of(api, emulator, "2101", limit=7)
    assert [r["id"] for r in paged] == [r["id"] for r in rules_of(api, emulator, "2101", limit=2000)]
    assert len({r["id"] for r in paged}) == 40


@pytest.mark.parametrize("params", [{"limit": 2001}, {"limit": 0}, {"cursor": "not-a-cursor"}])
def test_rules_invalid_query_is_400(api: httpx.Client, emulator: EmulatorProcess, params: dict[str, Any]) -> None:
    assert_error(api.get(by_id(emulator, "policies/2101"), params=params), 400, next(iter(params)))


def test_unknown_policy_is_404(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert_error(api.get(by_id(emulator, "policies/9999")), 404)


def test_both_policies_have_rules_in_every_mode_that_findings_use(api: httpx.Client,
                                                                  emulator: EmulatorProcess) -> None:
    default_rules = rules_of(api, emulator, "2101", limit=500)
    assert {r["policyMode"] for r in default_rules} == MODES
    assert {r["policyMode"] for r in rules_of(api, emulator, "2102", limit=500)} == MODES
    paths = {r["path"] for r in default_rules}
    assert all(path.count(".") >= 2 for path in paths)
    finding_rules = {f["rule_name"] for f in all_findings(api, emulator, issue_type="sast")}
    assert finding_rules <= paths
    assert len(finding_rules) > 10


def test_update_rejects_an_unknown_mode_or_rule(api: httpx.Client, emulator: EmulatorProcess) -> None:
    path = api.get(by_id(emulator, "policies/2101")).json()["rules"][0]["path"]
    put = by_id(emulator, "policies/2101")
    assert_error(api.put(put, json={"rulePath": path, "policyMode": "MODE_LOUD"}), 400, "policyMode")
    assert_error(api.put(put, json={"policyMode": "MODE_BLOCK"}), 400, "rulePath")
    assert_error(api.put(put, json={"rulePath": "no.such.rule", "policyMode": "MODE_BLOCK"}), 404, "rulePath")


def test_update_persists_and_moves_findings_between_policy_boards(api: httpx.Client, fresh: EmulatorProcess) -> None:
    rules = rules_of(api, fresh, "2101", limit=500)
    used = {f["rule_name"] for f in all_findings(api, fresh, issue_type="sast")}
    rule = next(r for r in rules if r["policyMode"] == "MODE_MONITOR" and r["path"] in used)
    block_before = {f["id"] for f in all_findings(api, fresh, policies=["rule-board-block"])}

    response = api.put(by_id(fresh, "policies/2101"), json={"rulePath": rule["path"], "policyMode": "MODE_BLOCK"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["policyId"] == "2101"
    updated = body["updatedRule"]
    assert updated["path"] == rule["path"]
    assert updated["policyMode"] == "MODE_BLOCK"
    assert isinstance(updated["vulnerabilityClass"], str)
    assert updated["lastChangeBy"]
    assert "hasValidators" in updated
    assert "secretType" in updated

    reread = {r["path"]: r["policyMode"] for r in rules_of(api, fresh, "2101", limit=500)}
    assert reread[rule["path"]] == "MODE_BLOCK"
    block_after = all_findings(api, fresh, policies=["rule-board-block"])
    moved = {f["id"] for f in block_after} - block_before
    assert moved
    assert all(f["rule_name"] == rule["path"] for f in block_after if f["id"] in moved)


def test_the_policy_api_retires_and_comes_back_on_the_admin_switch_without_losing_changes(
        api: httpx.Client, fresh: EmulatorProcess) -> None:
    rule = rules_of(api, fresh, "2101", limit=500)[0]
    mode = "MODE_DISABLED" if rule["policyMode"] != "MODE_DISABLED" else "MODE_MONITOR"
    assert api.put(by_id(fresh, "policies/2101"), json={"rulePath": rule["path"], "policyMode": mode}).is_success
    fresh.retire_policies()  # the deployment migrates now
    try:
        for method, path in (("GET", "policies"), ("GET", "policies/2101"), ("PUT", "policies/2101")):
            body = {"rulePath": rule["path"], "policyMode": "MODE_BLOCK"} if method == "PUT" else None
            answer = assert_error(api.request(method, by_id(fresh, path), json=body), 410)
            assert answer["code"] == "DEPLOYMENT_MIGRATED"
    finally:
        fresh.retire_policies(False)
    reread = {r["path"]: r["policyMode"] for r in rules_of(api, fresh, "2101", limit=500)}
    assert reread[rule["path"]] == mode  # nothing was regenerated
