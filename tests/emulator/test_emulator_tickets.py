"""Create tickets (4.7): grouping, limit, skipped and failed findings, tickets recorded on findings."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_slug

Finding = dict[str, Any]


def create(api: httpx.Client, emulator: EmulatorProcess, **body: Any) -> dict[str, Any]:
    response = api.post(by_slug(emulator, "tickets"), json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def ids_of(entries: list[dict[str, Any]]) -> list[int]:
    return [i for entry in entries for i in entry["issue_ids"]]


@pytest.mark.parametrize(("body", "field"), [
    ({"issue_type": "sast", "issue_ids": [1]}, "issue_ids"),
    ({"issue_type": "sast", "issue_ids": ["1"], "limit": 21}, "limit"),
    ({"issue_type": "sast", "issue_ids": ["1"], "limit": 0}, "limit"),
    ({"issue_type": "sast"}, "issue_ids"),
    ({"issue_type": "sast", "issue_ids": ["1"], "tracker_project_id": "PROJ"}, "tracker_project_id"),
    ({"issue_type": "code", "issue_ids": ["1"]}, "issue_type"),
    ({"issue_type": "sast", "secret_types": ["AWS"]}, "secret_types"),
])
def test_invalid_requests_are_400_naming_the_field(api: httpx.Client, emulator: EmulatorProcess,
                                                   body: dict[str, Any], field: str) -> None:
    assert_error(api.post(by_slug(emulator, "tickets"), json=body), 400, field)


def test_grouped_tickets_are_recorded_on_the_findings(api: httpx.Client, fresh: EmulatorProcess) -> None:
    selection = {"status": "open", "severities": ["high", "critical"], "autotriage_verdict": "true_positive"}
    candidates = all_findings(api, fresh, **selection)
    untracked = [f for f in candidates if not f["external_ticket"]]
    result = create(api, fresh, issue_type="sast", tracker_project_id="4711", **selection)

    assert 0 < len(result["succeeded"]) <= 20
    assert sorted(ids_of(result["succeeded"]) + ids_of(result["failed"])) == sorted(f["id"] for f in untracked)
    assert sorted(ids_of(result["skipped"])) == sorted(f["id"] for f in candidates if f["external_ticket"])
    by_id = {f["id"]: f for f in candidates}
    for ticket in result["succeeded"]:
        members = [by_id[i] for i in ticket["issue_ids"]]
        assert len({(f["repository"]["name"], f["rule_name"]) for f in members}) == 1
        assert 0 < len(members) <= 50
        assert ticket["external_slug"] in ticket["ticket_url"]

    after = {f["id"]: f for f in all_findings(api, fresh, **selection)}
    for ticket in result["succeeded"]:
        for finding_id in ticket["issue_ids"]:
            assert after[finding_id]["external_ticket"] == {
                "id": ticket["ticket_id"], "externalSlug": ticket["external_slug"], "url": ticket["ticket_url"],
                "linkedIssueIds": ticket["issue_ids"]}
    recorded = fresh.tickets()
    assert [t["id"] for t in recorded] == [t["ticket_id"] for t in result["succeeded"]]
    assert all(t["tracker_project_id"] == "4711" for t in recorded)

    again = create(api, fresh, issue_type="sast", **selection)
    assert again["succeeded"] == [] or set(ids_of(again["succeeded"])).isdisjoint(ids_of(result["succeeded"]))
    assert set(ids_of(result["succeeded"])) <= set(ids_of(again["skipped"]))


def test_groups_beyond_the_limit_fail(api: httpx.Client, fresh: EmulatorProcess) -> None:
    result = create(api, fresh, issue_type="sast", status="open", limit=2)
    assert len(result["succeeded"]) == 2
    over = [entry for entry in result["failed"] if "limit" in entry["error"]]
    assert over
    assert all(entry["issue_ids"] for entry in over)
    assert len(fresh.tickets()) == 2


def test_ungrouped_tickets_hold_one_finding_each(api: httpx.Client, fresh: EmulatorProcess) -> None:
    untracked = [f for f in all_findings(api, fresh, status="open") if not f["external_ticket"]][:3]
    result = create(api, fresh, issue_type="sast", issue_ids=[str(f["id"]) for f in untracked],
                    group_issues=False)
    assert [t["issue_ids"] for t in result["succeeded"]] == [[f["id"]] for f in untracked]


def test_already_ticketed_are_skipped_fixed_and_unknown_fail(api: httpx.Client, fresh: EmulatorProcess) -> None:
    everything = all_findings(api, fresh)
    ticketed = next(f for f in everything if f["external_ticket"])
    fixed = next(f for f in everything if f["status"] == "fixed")
    result = create(api, fresh, issue_type="sast", issue_ids=[str(ticketed["id"]), str(fixed["id"]), "77777777"])
    assert result["succeeded"] == []
    assert ids_of(result["skipped"]) == [ticketed["id"]]
    errors = {entry["issue_ids"][0]: entry["error"] for entry in result["failed"]}
    assert set(errors) == {fixed["id"], 77777777}
    assert "fixed" in errors[fixed["id"]]


def test_a_group_of_more_than_50_findings_is_split(api: httpx.Client, fresh: EmulatorProcess) -> None:
    fresh.reset(repositories=1)
    findings = [f for f in all_findings(api, fresh, status="open") if not f["external_ticket"]]
    counts: dict[str, int] = {}
    for f in findings:
        counts[f["rule_name"]] = counts.get(f["rule_name"], 0) + 1
    rule, count = max(counts.items(), key=lambda item: item[1])
    assert count > 50
    result = create(api, fresh, issue_type="sast", status="open", rules=[rule])
    sizes = [len(t["issue_ids"]) for t in result["succeeded"]]
    assert sum(sizes) == count
    assert max(sizes) == 50
    assert len(sizes) == -(-count // 50)
    fresh.reset()
