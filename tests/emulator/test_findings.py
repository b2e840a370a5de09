"""List code or supply-chain findings (4.8): defaults, limits, fields, ordering, every filter, pagination."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_id, by_slug, findings_page
from .emulator_helpers import projects as emu_projects

Finding = dict[str, Any]
COMMON = {"id", "categories", "confidence", "severity", "created_at", "relevant_since", "first_seen_scan_id",
          "match_based_id", "syntactic_id", "ref", "repository", "location", "line_of_code_url", "external_ticket",
          "review_comments", "rule", "rule_name", "rule_message", "state", "state_updated_at", "status",
          "triage_state", "triage_reason", "triage_comment", "triaged_at"}
SAST = {"sourcing_policy", "click_to_fix_prs", "click_to_fix_failures"}
SCA = {"epss_score", "fix_recommendations", "found_dependency", "is_malicious", "reachability",
       "reachable_condition", "usage", "vulnerability_identifier"}


def epoch(timestamp: str) -> float:
    """Parse any of the service's timestamp formats."""
    return datetime.fromisoformat(timestamp).timestamp()


@pytest.fixture(scope="module")
def sast(api: httpx.Client, emulator: EmulatorProcess) -> list[Finding]:
    return all_findings(api, emulator, issue_type="sast")


@pytest.fixture(scope="module")
def sca(api: httpx.Client, emulator: EmulatorProcess) -> list[Finding]:
    return all_findings(api, emulator, issue_type="sca")


def test_defaults_are_sast_first_page_of_100(api: httpx.Client, emulator: EmulatorProcess,
                                              sast: list[Finding]) -> None:
    body = api.get(by_slug(emulator, "findings")).json()
    assert body["scaFindings"] == {"findings": []}
    assert [f["id"] for f in body["sastFindings"]["findings"]] == [f["id"] for f in sast[:100]]


@pytest.mark.parametrize(("params", "field"), [
    ({"page_size": 99}, "page_size"), ({"page_size": 3001}, "page_size"), ({"page": -1}, "page"),
    ({"issue_type": "secrets"}, "issue_type"), ({"severities": "urgent"}, "severities"),
    ({"status": "closed"}, "status"), ({"since": "yesterday"}, "since"),
])
def test_invalid_parameters_are_400_naming_them(api: httpx.Client, emulator: EmulatorProcess,
                                                params: dict[str, Any], field: str) -> None:
    assert_error(api.get(by_slug(emulator, "findings"), params=params), 400, field)


@pytest.mark.parametrize(("issue_type", "field"), [("sca", "autotriage_verdict"), ("sca", "rules"),
                                                   ("sast", "exposures"), ("sast", "is_malicious")])
def test_filters_of_the_other_issue_type_are_400(api: httpx.Client, emulator: EmulatorProcess, issue_type: str,
                                                 field: str) -> None:
    values = {"autotriage_verdict": "true_positive", "rules": "x", "exposures": "reachable", "is_malicious": "true"}
    response = api.get(by_slug(emulator, "findings"), params={"issue_type": issue_type, field: values[field]})
    assert_error(response, 400, field)


def test_page_size_3000_is_the_maximum(api: httpx.Client, emulator: EmulatorProcess, sast: list[Finding]) -> None:
    assert len(findings_page(api, emulator, page_size=3000)) == min(3000, len(sast))


def test_offset_pagination_reaches_the_end_without_gaps_or_duplicates(
        api: httpx.Client, emulator: EmulatorProcess, sast: list[Finding]) -> None:
    ids: list[int] = []
    page = 0
    while True:
        batch = findings_page(api, emulator, page=page, page_size=100)
        ids.extend(f["id"] for f in batch)
        if len(batch) < 100:
            break
        page += 1
    assert len(ids) == len(set(ids)) == emulator.stats()["counts"]["findings"]["sast"]
    assert ids == [f["id"] for f in sast]
    assert findings_page(api, emulator, page=page + 1, page_size=100) == []


def test_ordered_by_relevant_since_descending_then_id(sast: list[Finding], sca: list[Finding]) -> None:
    for items in (sast, sca):
        keys = [(-epoch(f["relevant_since"]), f["id"]) for f in items]
        assert keys == sorted(keys)


def test_every_field_is_present(sast: list[Finding], sca: list[Finding]) -> None:
    assert all(COMMON | SAST <= f.keys() for f in sast)
    assert all(COMMON | SCA <= f.keys() for f in sca)
    assert {f["status"] for f in sast} == {"open", "fixed", "ignored", "reviewing", "fixing"}
    assert {f["severity"] for f in sast + sca} == {"low", "medium", "high", "critical"}
    assert {f["reachability"] for f in sca} == {"reachable", "always_reachable", "conditionally_reachable",
                                                "unreachable", "unknown"}
    verdicts = [(f.get("assistant") or {}).get("autotriage", {}).get("verdict") for f in sast]
    assert {v for v in verdicts if v} == {"true_positive", "false_positive"}
    assert None in verdicts
    assert any(f["external_ticket"] for f in sast)
    assert any(not f["external_ticket"] for f in sast)
    assert all("/" in f["repository"]["name"] for f in sast)


def test_timestamps_come_in_the_three_formats(sast: list[Finding]) -> None:
    stamps = [f[key] for f in sast[:30] for key in ("created_at", "relevant_since", "state_updated_at")]
    assert any(" " in s and s.endswith("+00:00") for s in stamps)
    assert any("T" in s and s.endswith("Z") and len(s.split(".")[1]) == 4 for s in stamps)
    assert any("T" in s and s.endswith("Z") and len(s.split(".")[1]) == 7 for s in stamps)


def test_same_fingerprint_appears_on_several_refs(sast: list[Finding]) -> None:
    refs: dict[str, set[str]] = {}
    for f in sast:
        refs.setdefault(f["match_based_id"], set()).add(f["ref"])
    shared = sum(1 for r in refs.values() if len(r) > 1)
    assert 0.05 < shared / len(refs) < 0.3


def _repo_ids(api: httpx.Client, emulator: EmulatorProcess) -> dict[str, int]:
    projects = api.get(by_slug(emulator, "projects"), params={"page_size": 1000}).json()["projects"]
    return {p["name"]: p["id"] for p in projects}


def _block_rules(api: httpx.Client, emulator: EmulatorProcess) -> set[str]:
    rules = api.get(by_id(emulator, "policies/2101"), params={"limit": 2000}).json()["rules"]
    return {r["path"] for r in rules if r["policyMode"] == "MODE_BLOCK"}


def _verdict(f: Finding) -> str | None:
    return (f.get("assistant") or {}).get("autotriage", {}).get("verdict")


def _component(f: Finding) -> str | None:
    return (f.get("assistant") or {}).get("component", {}).get("tag")


def _filter_cases(api: httpx.Client, emulator: EmulatorProcess, sast: list[Finding], sca: list[Finding],
                  ) -> list[tuple[str, dict[str, Any], Callable[[Finding], bool]]]:
    repo_ids = _repo_ids(api, emulator)
    two_repos = sorted({f["repository"]["name"] for f in sast})[:2]
    since = statistics.median(epoch(f["relevant_since"]) for f in sast)
    feature_ref = next(f["ref"] for f in sast if f["ref"] not in ("main", "master"))
    rule = sast[0]["rule_name"]
    block = _block_rules(api, emulator)
    return [
        ("sast", {"since": since}, lambda f: epoch(f["relevant_since"]) >= since),
        ("sast", {"repos": two_repos}, lambda f: f["repository"]["name"] in two_repos),
        ("sca", {"repository_ids": [repo_ids[r] for r in two_repos]}, lambda f: f["repository"]["name"] in two_repos),
        ("sast", {"status": "ignored"}, lambda f: f["status"] == "ignored"),
        ("sast", {"status": "ignored", "triage_reasons": ["false_positive", "no_time"]},
         lambda f: f["status"] == "ignored" and f["triage_reason"] in ("false_positive", "no_time")),
        ("sca", {"severities": ["high", "critical"]}, lambda f: f["severity"] in ("high", "critical")),
        ("sast", {"ref": feature_ref}, lambda f: f["ref"] == feature_ref),
        ("sast", {"policies": ["rule-board-block"]}, lambda f: f["rule_name"] in block),
        ("sast", {"rules": [rule]}, lambda f: f["rule_name"] == rule),
        ("sast", {"categories": ["best-practice"]}, lambda f: "best-practice" in f["categories"]),
        ("sast", {"confidence": "low"}, lambda f: f["confidence"] == "low"),
        ("sast", {"autotriage_verdict": "false_positive"}, lambda f: _verdict(f) == "false_positive"),
        ("sast", {"component_tags": ["payments", "test code"]}, lambda f: _component(f) in ("payments", "test code")),
        ("sca", {"exposures": ["reachable", "always_reachable"]},
         lambda f: f["reachability"] in ("reachable", "always_reachable")),
        ("sca", {"transitivities": ["direct"]}, lambda f: f["found_dependency"]["transitivity"] == "direct"),
        ("sca", {"is_malicious": "true"}, lambda f: f["is_malicious"] is True),
        ("sca", {"is_malicious": "false"}, lambda f: f["is_malicious"] is False),
        ("sast", {"click_to_fix_pr_state": ["merged"]},
         lambda f: any(pr.get("state") == "merged" for pr in f["click_to_fix_prs"])),
    ]


def test_every_filter_selects_exactly_the_matching_findings(api: httpx.Client, emulator: EmulatorProcess,
                                                            sast: list[Finding], sca: list[Finding]) -> None:
    for issue_type, params, predicate in _filter_cases(api, emulator, sast, sca):
        everything = sast if issue_type == "sast" else sca
        expected = [f["id"] for f in everything if predicate(f)]
        got = [f["id"] for f in all_findings(api, emulator, issue_type=issue_type, **params)]
        assert got == expected, params
        assert 0 < len(got) < len(everything), params


def test_dedup_keeps_one_finding_per_fingerprint_preferring_the_primary_branch(
        api: httpx.Client, emulator: EmulatorProcess, sast: list[Finding]) -> None:
    deduped = all_findings(api, emulator, dedup="true")
    fingerprints = [f["match_based_id"] for f in deduped]
    assert len(fingerprints) == len(set(fingerprints)) == len({f["match_based_id"] for f in sast})
    assert len(deduped) < len(sast)
    on_primary = {f["match_based_id"] for f in sast if f["ref"] in ("main", "master")}
    assert all(f["ref"] in ("main", "master") for f in deduped if f["match_based_id"] in on_primary)


# --- dedup, ref (and _default), exposures: what a direct computation over the served data selects --------------

#: ``exposures`` values (underscores) and the ``reachability`` each selects, per dialect (spaces in the real one;
#: ``unknown`` is "no analysis": the real dialect's ``no reachability analysis`` or null).
EXPOSURE_REACHABILITY: dict[str, dict[str, set[str | None]]] = {
    "reference": {"reachable": {"reachable"}, "always_reachable": {"always_reachable"},
                  "conditionally_reachable": {"conditionally_reachable"}, "unreachable": {"unreachable"},
                  "unknown": {"unknown", None}},
    "real": {"reachable": {"reachable"}, "always_reachable": {"always reachable"},
             "conditionally_reachable": {"conditionally reachable"}, "unreachable": {"unreachable"},
             "unknown": {"no reachability analysis", None}},
}


def expected_dedup(findings: list[Finding], primary: dict[str, str]) -> list[int]:
    """Ids ``dedup=true`` keeps of ``findings`` (in their order): per repository and ``match_based_id`` the one on
    the project's primary branch, else the latest ``relevant_since``, ties to the highest id."""
    best: dict[tuple[str, str], Finding] = {}
    for f in findings:
        key = (f["repository"]["name"], f["match_based_id"])

        def rank(x: Finding) -> tuple[bool, float, int]:
            return x["ref"] == primary[x["repository"]["name"]], epoch(x["relevant_since"]), x["id"]

        if key not in best or rank(f) > rank(best[key]):
            best[key] = f
    kept = {f["id"] for f in best.values()}
    return [f["id"] for f in findings if f["id"] in kept]


def _served(api: httpx.Client, emulator: EmulatorProcess, query: str) -> list[int]:
    """Ids of every finding a raw query string selects, pages of 3000."""
    ids: list[int] = []
    page = 0
    while True:
        response = api.get(by_slug(emulator, f"findings?page={page}&{query}"))
        assert response.status_code == 200, response.text
        body = response.json()
        batch = body["findings"] if "findings" in body else [f for v in body.values() for f in v["findings"]]
        ids.extend(f["id"] for f in batch)
        if len(batch) < 3000:
            return ids
        page += 1


def test_dedup_ref_default_and_exposures_select_what_the_data_says(api: httpx.Client,
                                                                  each_dialect: EmulatorProcess) -> None:
    emu = each_dialect
    projects = {p["name"]: p for p in emu_projects(api, emu)}
    primary = {name: p["primary_branch"] for name, p in projects.items()}
    default = {name: p["default_branch"] for name, p in projects.items()}
    assert any(default[n] != primary[n] for n in projects), "some project's default branch must differ"
    sast = all_findings(api, emu, issue_type="sast")
    sca = all_findings(api, emu, issue_type="sca")

    def on_default(f: Finding) -> bool:
        return f["ref"] == default[f["repository"]["name"]]

    cases: list[tuple[str, list[int]]] = [
        ("issue_type=sast&dedup=true", expected_dedup(sast, primary)),
        ("issue_type=sca&dedup=true", expected_dedup(sca, primary)),
        ("issue_type=sast&ref=_default", [f["id"] for f in sast if on_default(f)]),
        ("issue_type=sca&dedup=true&severities=high,critical",
         expected_dedup([f for f in sca if f["severity"] in ("high", "critical")], primary)),
        ("issue_type=sast&ref=develop&dedup=true", [f["id"] for f in sast if f["ref"] == "develop"]),
    ]
    reachability = EXPOSURE_REACHABILITY[emu.dialect]
    for exposure, values in reachability.items():
        cases.append((f"issue_type=sca&exposures={exposure}", [f["id"] for f in sca if f["reachability"] in values]))
    for query, expected in cases:
        assert expected, query
        assert _served(api, emu, f"page_size=3000&{query}") == expected, query
    # dedup changes something, and _default is not the primary branch
    assert expected_dedup(sast, primary) != [f["id"] for f in sast]
    assert [f["id"] for f in sast if on_default(f)] != [f["id"] for f in sast if f["ref"] == primary[
        f["repository"]["name"]]]


def test_a_real_clients_request_selects_what_its_filters_say(api: httpx.Client,
                                                             each_dialect: EmulatorProcess) -> None:
    """``ref=_default&dedup=true&exposures=reachable,always_reachable&page_size=3000``, as a production client
    sends it (code findings without ``exposures``, which is supply-chain only)."""
    emu = each_dialect
    projects = emu_projects(api, emu)
    primary = {p["name"]: p["primary_branch"] for p in projects}
    default = {p["name"]: p["default_branch"] for p in projects}
    reachable = EXPOSURE_REACHABILITY[emu.dialect]["reachable"] | EXPOSURE_REACHABILITY[emu.dialect][
        "always_reachable"]
    for issue_type, extra, keep in (
            ("sast", "", lambda f: True),
            ("sca", "&exposures=reachable,always_reachable", lambda f: f["reachability"] in reachable)):
        everything = all_findings(api, emu, issue_type=issue_type)
        selected = [f for f in everything if f["ref"] == default[f["repository"]["name"]] and keep(f)]
        expected = expected_dedup(selected, primary)
        served = _served(api, emu, f"issue_type={issue_type}&ref=_default&dedup=true{extra}&page_size=3000")
        assert served == expected, issue_type
        assert served, issue_type
        if issue_type == "sast":  # projects whose default branch is not the primary one contribute
            chosen = {f["id"]: f for f in everything if f["id"] in set(served)}
            assert any(f["ref"] != primary[f["repository"]["name"]] for f in chosen.values())


def test_dedup_follows_a_new_primary_branch(api: httpx.Client, fresh: EmulatorProcess) -> None:
    sast = all_findings(api, fresh, issue_type="sast")
    projects = emu_projects(api, fresh)
    # a repository with findings of one fingerprint on its primary branch and on another one
    refs: dict[tuple[str, str], set[str]] = {}
    for f in sast:
        refs.setdefault((f["repository"]["name"], f["match_based_id"]), set()).add(f["ref"])
    name, other = next((repo, sorted(r - {p["primary_branch"]})[0]) for (repo, _), r in refs.items()
                       for p in projects if p["name"] == repo and len(r) > 1)
    response = api.patch(by_slug(fresh, f"projects/{name}"), json={"primary_branch": other})
    assert response.status_code == 200, response.text
    primary = {p["name"]: p["primary_branch"] for p in emu_projects(api, fresh)}
    assert primary[name] == other
    expected = expected_dedup(sast, primary)
    assert _served(api, fresh, "issue_type=sast&dedup=true&page_size=3000") == expected
    kept = {f["id"] for f in sast if f["id"] in set(expected) and f["repository"]["name"] == name}
    assert any(f["ref"] == other for f in sast if f["id"] in kept)
