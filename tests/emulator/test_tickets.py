"""Create tickets (4.7): grouping, limit, skipped and failed findings, tickets recorded on findings."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_id, by_slug, ticket_link

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


# --- link an existing ticket, unlink, delete a ticket's links (both dialects) ---------------------------------

def _by_id(api: httpx.Client, emulator: EmulatorProcess) -> dict[int, Finding]:
    return {f["id"]: f for t in ("sast", "sca") for f in all_findings(api, emulator, issue_type=t)}


def test_link_unlink_and_delete_a_ticket(api: httpx.Client, each_dialect: EmulatorProcess) -> None:
    emu = each_dialect
    findings = _by_id(api, emu)
    # a finding whose generated ticket links others too (so replacing it must update them), and two without one
    holder = next(f for f in findings.values() if len((ticket_link(f) or (0, "", []))[2]) > 1)
    held = ticket_link(holder)
    assert held is not None
    old_id, old_slug, old_linked = held
    free = [i for i, f in findings.items() if ticket_link(f) is None][:2]
    chosen = [holder["id"], *free]
    url = "https://tracker.example/browse/SEC-4242"
    response = api.post(by_id(emu, "tickets/link"), json={"ticket_url": url, "issue_ids": [str(i) for i in chosen]})
    assert response.status_code == 200, response.text
    linked = response.json()
    assert set(linked) == {"ticket_id", "ticket_url", "external_slug", "linked_issue_ids", "replaced_issue_ids"}
    assert isinstance(linked["ticket_id"], int)
    assert linked["ticket_url"] == url
    assert linked["external_slug"] == "SEC-4242"
    assert linked["linked_issue_ids"] == sorted(chosen)
    assert linked["replaced_issue_ids"] == [holder["id"]]
    after = _by_id(api, emu)
    for i in chosen:
        assert ticket_link(after[i]) == (linked["ticket_id"], "SEC-4242", sorted(chosen))
        assert after[i]["external_ticket"]["url"] == url
    for i in set(old_linked) - {holder["id"]}:  # the replaced ticket no longer lists the finding
        assert ticket_link(after[i]) == (old_id, old_slug, sorted(set(old_linked) - {holder["id"]}))
    # linking again by the same URL adds to the same ticket
    again = api.post(by_id(emu, "tickets/link"), json={"ticket_url": url, "issue_ids": [free[0]]}).json()
    assert again["ticket_id"] == linked["ticket_id"]
    assert again["replaced_issue_ids"] == []

    unlinked = api.post(by_id(emu, "tickets/unlink"), json={"issue_ids": [str(free[0]), str(free[0])]})
    assert unlinked.status_code == 200, unlinked.text
    assert unlinked.json() == {"unlinked_issue_ids": [free[0]]}
    assert api.post(by_id(emu, "tickets/unlink"), json={"issue_ids": [str(free[0])]}).json() == {
        "unlinked_issue_ids": []}
    after = _by_id(api, emu)
    assert after[free[0]]["external_ticket"] is None
    assert ticket_link(after[holder["id"]]) == (linked["ticket_id"], "SEC-4242", sorted({holder["id"], free[1]}))

    deleted = api.delete(by_id(emu, f"ticketing/v2/tickets/{linked['ticket_id']}"))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"issueIds": sorted({holder["id"], free[1]})}
    after = _by_id(api, emu)
    assert all(after[i]["external_ticket"] is None for i in chosen)
    if "usage" in after[chosen[-1]]:
        assert after[chosen[-1]]["usage"]["external_ticket"] is None


@pytest.mark.parametrize(("path", "body", "field"), [
    ("tickets/link", {"ticket_url": "https://t.example/X-1", "issue_ids": ["999999999"]}, "issue_ids"),
    ("tickets/link", {"ticket_url": "https://t.example/X-1", "issue_ids": []}, "issue_ids"),
    ("tickets/link", {"ticket_url": "not a url", "issue_ids": ["1"]}, "ticket_url"),
    ("tickets/link", {"issue_ids": ["1"]}, "ticket_url"),
    ("tickets/unlink", {"issue_ids": ["x1"]}, "issue_ids"),
    ("tickets/unlink", {}, "issue_ids"),
])
def test_invalid_link_requests_are_400(api: httpx.Client, emulator: EmulatorProcess, path: str,
                                       body: dict[str, Any], field: str) -> None:
    assert_error(api.post(by_id(emulator, path), json=body), 400, field)


def test_deleting_an_unknown_ticket_is_404(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert_error(api.delete(by_id(emulator, "ticketing/v2/tickets/123456789")), 404)
    assert_error(api.delete(by_id(emulator, "ticketing/v2/tickets/NO-SUCH-1")), 404)
    assert_error(api.post(by_slug(emulator, "tickets/link"), json={"ticket_url": "https://t.example/X-1",
                                                                   "issue_ids": ["1"]}), 404)
