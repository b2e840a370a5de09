"""The real service's dialect (``--dialect real``): its wire format on every endpoint, the same generated data as
the reference dialect, comma-joined array query values in both dialects, and null for unset listed keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import assert_error, by_id, by_slug

FINDINGS = 1500
AI_FINDINGS = 60
ENVELOPES = {"sast": "sastFindings", "sca": "scaFindings", "ai_sast": "aiSastFindings"}
REACHABILITY = {"always_reachable": "always reachable", "conditionally_reachable": "conditionally reachable",
                "unknown": "no reachability analysis"}
Json = dict[str, Any]


@pytest.fixture(scope="module")
def real() -> Iterator[EmulatorProcess]:
    """An emulator in the real dialect."""
    with EmulatorProcess(findings=FINDINGS, dialect="real", extra_args=("--ai-findings", str(AI_FINDINGS))) as emu:
        yield emu


@pytest.fixture(scope="module")
def ref() -> Iterator[EmulatorProcess]:
    """An emulator in the reference dialect with the same seed and volumes."""
    with EmulatorProcess(findings=FINDINGS, extra_args=("--ai-findings", str(AI_FINDINGS))) as emu:
        yield emu


@pytest.fixture(scope="module")
def real_api(real: EmulatorProcess) -> Iterator[httpx.Client]:
    with real.client(timeout=30.0) as client:
        yield client


@pytest.fixture(scope="module")
def ref_api(ref: EmulatorProcess) -> Iterator[httpx.Client]:
    with ref.client(timeout=30.0) as client:
        yield client


def _findings(api: httpx.Client, emu: EmulatorProcess, query: str = "") -> list[Json]:
    """Every finding of one listing (``query``: the raw query string), either envelope."""
    items: list[Json] = []
    page = 0
    while True:
        response = api.get(by_slug(emu, f"findings?page_size=3000&page={page}&{query}"))
        assert response.status_code == 200, response.text
        body = response.json()
        if emu.dialect == "real":
            assert set(body) == {"findings"}
            batch = body["findings"]
        else:
            issue_type = query.split("issue_type=")[1].split("&")[0]
            batch = body[ENVELOPES[issue_type]]["findings"]
        items.extend(batch)
        if len(batch) < 3000:
            return items
        page += 1


def _without_times(value: Any) -> Any:
    """``value`` without timestamps (they hang off each emulator's start time)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items()
                if not k.endswith("_at") and k not in ("relevant_since", "createdAt", "updatedAt",
                                                       "gitCommitTimestamp")}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _renamed(obj: Json | None, keys: dict[str, str]) -> Json | None:
    return None if obj is None else {keys.get(k, k): v for k, v in obj.items()}


def _reference_as_real(finding: Json) -> Json:
    """A reference-dialect finding normalised the way the dialect section of the notes describes."""
    f = dict(finding)
    f["location"] = _renamed(f["location"], {"filePath": "file_path", "endLine": "end_line",
                                             "endColumn": "end_column"})
    f["rule"] = _renamed(f["rule"], {"cweNames": "cwe_names", "owaspNames": "owasp_names",
                                     "vulnerabilityClasses": "vulnerability_classes"})
    ticket_keys = {"externalSlug": "external_slug", "linkedIssueIds": "linked_issue_ids"}
    f["external_ticket"] = _renamed(f["external_ticket"], ticket_keys)
    f["review_comments"] = [{"external_discussion_id": c["externalDiscussionId"],
                             "external_note_id": str(c["externalNoteId"])} for c in f["review_comments"]]
    if f.get("assistant") and "component" in f["assistant"]:
        component = f["assistant"]["component"]
        f["assistant"] = {**f["assistant"], "component": {
            **component, "risk": "neutral" if component["risk"] == "medium" else component["risk"]}}
    if "usage" in f:
        loc = f["usage"]["location"]
        f["usage"] = {"external_ticket": _renamed(f["usage"]["external_ticket"], ticket_keys),
                      "location": {"path": loc["filePath"], "start_line": loc["line"], "start_col": loc["column"],
                                   "end_line": loc["endLine"], "end_col": loc["endColumn"]}}
        f["reachability"] = REACHABILITY.get(f["reachability"], f["reachability"])
        f["reachable_condition"] = f["reachable_condition"] or None
    return f


def _real_comparable(finding: Json) -> Json:
    f = dict(finding)
    if "usage" in f:
        f["usage"] = {**f["usage"], "location": {k: v for k, v in f["usage"]["location"].items() if k != "url"}}
    return f


# --- the same data in both dialects ---------------------------------------------------------------------------

@pytest.mark.parametrize("issue_type", ["sast", "sca", "ai_sast"])
def test_findings_carry_the_same_data_in_both_dialects(ref_api: httpx.Client, ref: EmulatorProcess,
                                                       real_api: httpx.Client, real: EmulatorProcess,
                                                       issue_type: str) -> None:
    reference = {f["id"]: f for f in _findings(ref_api, ref, f"issue_type={issue_type}")}
    served = {f["id"]: f for f in _findings(real_api, real, f"issue_type={issue_type}")}
    assert len(reference) >= AI_FINDINGS
    assert served.keys() == reference.keys()
    for finding_id, finding in reference.items():
        assert _without_times(_real_comparable(served[finding_id])) == _without_times(_reference_as_real(finding))


def test_real_findings_wire_format(real_api: httpx.Client, real: EmulatorProcess) -> None:
    sast = _findings(real_api, real, "issue_type=sast")
    sca = _findings(real_api, real, "issue_type=sca")
    ai = _findings(real_api, real, "issue_type=ai_sast")
    assert len(ai) == AI_FINDINGS
    for finding in ai:
        assert finding["rule_name"].startswith("ai.detection.")
        assert finding["rule"]["name"] == finding["rule_name"]
        assert finding["ai_impact"]
        assert "assistant" in finding
    for finding in sast + sca + ai:
        assert isinstance(finding["id"], int)
        assert set(finding["location"]) == {"file_path", "line", "column", "end_line", "end_column"}
        assert {"cwe_names", "owasp_names", "vulnerability_classes"} <= set(finding["rule"])
        assert finding["state"] in ("fixed", "muted", "unresolved")
        for key in ("external_ticket", "triaged_at", "triage_reason", "triage_comment"):
            assert key in finding
        ticket = finding["external_ticket"]
        assert ticket is None or (set(ticket) == {"id", "external_slug", "url", "linked_issue_ids"}
                                  and isinstance(ticket["id"], int))
        for comment in finding["review_comments"]:
            assert set(comment) == {"external_discussion_id", "external_note_id"}
    assert any(f["external_ticket"] for f in sast)
    risks = {f["assistant"]["component"]["risk"] for f in sast + ai if f["assistant"]}
    assert risks == {"high", "low", "neutral"}
    assert any(f["review_comments"] for f in sast + sca)
    reachability = {f["reachability"] for f in sca}
    assert {"always reachable", "conditionally reachable", "no reachability analysis"} <= reachability
    assert reachability <= {"no reachability analysis", "reachable", "always reachable", "conditionally reachable",
                            "unreachable", None}
    for finding in sca:
        assert isinstance(finding["found_dependency"]["package"], str)
        assert set(finding["usage"]["location"]) == {"path", "start_line", "start_col", "end_line", "end_col", "url"}
        assert finding["usage"]["location"]["url"].endswith(f"#L{finding['usage']['location']['start_line']}")
        assert (finding["reachable_condition"] is None) == (finding["reachability"] != "conditionally reachable")


@pytest.mark.parametrize("dialect", ["ref", "real"])
def test_assistant_is_listed_as_null_when_off(request: pytest.FixtureRequest, dialect: str) -> None:
    emu: EmulatorProcess = request.getfixturevalue(dialect)
    api: httpx.Client = request.getfixturevalue(f"{dialect}_api")
    sast = _findings(api, emu, "issue_type=sast")
    assert all("assistant" in f for f in sast)
    assert any(f["assistant"] is None for f in sast)
    assert any(f["assistant"] for f in sast)


@pytest.mark.parametrize("dialect", ["ref", "real"])
@pytest.mark.parametrize(("issue_type", "key", "values"), [
    ("sast", "severities", ["high", "critical"]),
    ("sca", "exposures", ["reachable", "always_reachable"]),
    ("sast", "repos", None),
])
def test_comma_joined_array_values_filter_like_repeated_keys(request: pytest.FixtureRequest, dialect: str,
                                                             issue_type: str, key: str,
                                                             values: list[str] | None) -> None:
    emu: EmulatorProcess = request.getfixturevalue(dialect)
    api: httpx.Client = request.getfixturevalue(f"{dialect}_api")
    everything = _findings(api, emu, f"issue_type={issue_type}")
    if values is None:
        values = sorted({f["repository"]["name"] for f in everything})[:2]
    repeated = _findings(api, emu, f"issue_type={issue_type}&" + "&".join(f"{key}={v}" for v in values))
    joined = _findings(api, emu, f"issue_type={issue_type}&{key}={','.join(values)}")
    assert [f["id"] for f in joined] == [f["id"] for f in repeated]
    assert 0 < len(joined) < len(everything)
    single = _findings(api, emu, f"issue_type={issue_type}&{key}={values[0]}")
    assert len(single) < len(joined)


# --- other endpoints --------------------------------------------------------------------------------------------

def test_deployments(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client) -> None:
    (deployment,) = real_api.get("/api/v1/deployments").json()["deployments"]
    assert deployment["id"] == int(real.deployment_id)
    assert deployment["slug"] == real.deployment_slug
    assert deployment["findings"]["url"] == f"{real.base_url}{by_slug(real, 'findings')}"
    assert ref_api.get("/api/v1/deployments").json()["deployments"][0]["id"] == real.deployment_id


def _secrets(api: httpx.Client, emu: EmulatorProcess, **params: Any) -> list[Json]:
    items: list[Json] = []
    cursor = ""
    while True:
        body = api.get(by_id(emu, "secrets"), params={"limit": 70, "cursor": cursor, **params}).json()
        items.extend(body["findings"])
        if emu.dialect == "real":
            assert body["previous"] == cursor
        cursor = body["cursor"]
        if not cursor:
            return items


def test_secrets(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client,
                 ref: EmulatorProcess) -> None:
    reference = {f["id"]: f for f in _secrets(ref_api, ref)}
    served = _secrets(real_api, real)
    assert len(served) == len(reference) == 200
    for item in served:
        source = reference[int(item["id"])]
        assert item["findingPath"] == f"{source['location']['filePath']}:{source['location']['line']}"
        assert item["severity"] == f"SEVERITY_{source['severity'].upper()}"
        assert item["confidence"] == f"CONFIDENCE_{source['confidence'].upper()}"
        assert item["validationState"] == {"valid": "VALIDATION_STATE_CONFIRMED_VALID",
                                           "invalid": "VALIDATION_STATE_CONFIRMED_INVALID"}[source["validation_state"]]
        assert item["status"].startswith("FINDING_STATUS_")
        assert item["mode"].startswith("MODE_")
        assert item["repository"]["name"] == source["repository"]["name"]
        assert item["repository"]["visibility"].startswith("REPOSITORY_VISIBILITY_")
        assert item["repository"]["scmType"] == "SCM_TYPE_GITHUB"
        assert item["autotriage"]["verdict"].startswith("VERDICT_")
        assert {"createdAt", "updatedAt"} <= set(item)
        assert "relevant_since" not in item
        ticket = item.get("externalTicket")
        assert (ticket is None) == (source["external_ticket"] is None)
        if ticket:
            assert ticket["id"] == str(source["external_ticket"]["id"])
            assert ticket["linkedIssueIds"] == [str(i) for i in source["external_ticket"]["linkedIssueIds"]]
    valid = _secrets(real_api, real, validationState="VALIDATION_STATE_CONFIRMED_VALID",
                     severity=["SEVERITY_CRITICAL", "SEVERITY_HIGH"])
    assert valid
    assert all(s["validationState"] == "VALIDATION_STATE_CONFIRMED_VALID" for s in valid)
    expected = sum(f["validation_state"] == "valid" for f in reference.values())
    assert len(valid) == expected
    assert len(_secrets(real_api, real, since="2999-01-01T00:00:00Z")) == 0
    fixed = _secrets(real_api, real, status="FINDING_STATUS_FIXED")
    assert fixed
    assert all(s["status"] == "FINDING_STATUS_FIXED" for s in fixed)


def test_dependencies(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client,
                      ref: EmulatorProcess) -> None:
    reference = ref_api.post(by_id(ref, "dependencies"), json={"pageSize": 10000}).json()["dependencies"]
    served: list[Json] = []
    cursor: str | None = None
    while True:
        body = real_api.post(by_id(real, "dependencies"), json={"pageSize": 120, "cursor": cursor}).json()
        assert body["cursor"].isdigit()
        served.extend(body["dependencies"])
        if not body["hasMore"]:
            break
        cursor = body["cursor"]
    assert len(served) == len(reference) == 300
    for dep, source in zip(served, reference, strict=True):
        assert "id" not in dep
        assert "name" not in dep
        assert "version" not in dep
        assert dep["package"] == {"name": source["name"], "versionSpecifier": source["version"]}
        assert dep["repositoryId"] == str(source["repositoryId"])
        assert dep["ecosystem"] == source["ecosystem"] == source["ecosystem"].lower()
        assert dep["transitivity"] == source["transitivity"].upper()
        assert dep["licenses"] == source["licenses"]
        assert dep["definedAt"]["path"] == source["lockfilePath"]
        for location in (dep["definedAt"], dep["manifestDefinition"]):
            assert all(location[k].isdigit() for k in ("startLine", "endLine", "startCol", "endCol"))
            assert location["committedAt"]
        assert dep["pathToTransitivity"] == []
        assert dep["resolvedUrl"]
    # without an id, the place tells dependencies apart: a lockfile lists a package version once
    places = [(d["repositoryId"], d["definedAt"]["path"], d["ecosystem"], d["package"]["name"],
               d["package"]["versionSpecifier"]) for d in served]
    assert len(set(places)) == len(places)
    npm = real_api.post(by_id(real, "dependencies"),
                        json={"pageSize": 1000, "dependencyFilter": {"ecosystem": ["npm"],
                                                                     "transitivity": ["DIRECT"]}}).json()
    expected = [d for d in served if d["ecosystem"] == "npm" and d["transitivity"] == "DIRECT"]
    assert npm["dependencies"] == expected
    assert expected


def test_dependency_repositories(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client,
                                 ref: EmulatorProcess) -> None:
    def pull(api: httpx.Client, emu: EmulatorProcess) -> list[Json]:
        items: list[Json] = []
        cursor = 0
        while True:
            body = api.post(by_id(emu, "dependencies/repositories"), json={"pageSize": 5, "cursor": cursor}).json()
            assert isinstance(body["cursor"], int)
            items.extend(body["repositorySummaries"])
            if not body["hasMore"]:
                return items
            cursor = body["cursor"]

    served = pull(real_api, real)
    assert served == pull(ref_api, ref)
    assert len(served) > 5
    assert all(isinstance(r["id"], int) for r in served)


def test_scans(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client, ref: EmulatorProcess) -> None:
    served = real_api.post(by_id(real, "scans/search"), json={"limit": 500}).json()["scans"]
    reference = {s["id"]: s for s in ref_api.post(by_id(ref, "scans/search"), json={"limit": 500}).json()["scans"]}
    assert {s["id"] for s in served} == set(reference)
    for scan in served:
        source = reference[scan["id"]]
        assert scan["id"].isdigit()
        assert scan["deployment_id"].isdigit()
        assert scan["repository_id"].isdigit()
        assert scan["findings_counts"] == {k: str(v) for k, v in source["findings_counts"].items()}
        assert scan["exit_code"] == (None if source["exit_code"] is None else str(source["exit_code"]))
    completed = next(s for s in served if s["status"] == "SCAN_STATUS_COMPLETED")
    details = real_api.get(by_id(real, f"scan/{completed['id']}")).json()
    assert details["id"] == int(completed["id"])
    assert isinstance(details["exit_code"], int)
    assert details["meta"]["on"] in ("push", "pull_request")
    assert isinstance(details["meta"]["commit_title"], str)
    for scan in served:
        meta = real_api.get(by_id(real, f"scan/{scan['id']}")).json()["meta"]
        reference_meta = ref_api.get(by_id(ref, f"scan/{scan['id']}")).json()["meta"]
        pr_id = reference_meta["pull_request_id"]
        assert meta["pull_request_id"] == (None if pr_id is None else str(pr_id))
        assert pr_id is None or isinstance(pr_id, int)
    assert any(s["is_full_scan"] is False for s in served)


@pytest.mark.parametrize("dialect", ["ref", "real"])
def test_a_running_scan_lists_its_unset_values_as_null(request: pytest.FixtureRequest, dialect: str) -> None:
    emu: EmulatorProcess = request.getfixturevalue(dialect)
    api: httpx.Client = request.getfixturevalue(f"{dialect}_api")
    created = emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=600)
    assert created["completed_at"] is None
    assert created["exit_code"] is None
    assert created["total_time"] is None
    listed = next(s for s in api.post(by_id(emu, "scans/search"), json={"limit": 500}).json()["scans"]
                  if s["id"] == created["id"])
    assert {k: listed[k] for k in ("completed_at", "exit_code", "total_time")} == dict.fromkeys(
        ("completed_at", "exit_code", "total_time"))
    details = api.get(by_id(emu, f"scan/{created['id']}")).json()
    assert details["completed_at"] is None
    assert details["exit_code"] is None


def test_policies(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client,
                  ref: EmulatorProcess) -> None:
    policies = real_api.get(by_id(real, "policies")).json()["policies"]
    assert policies == ref_api.get(by_id(ref, "policies")).json()["policies"]
    assert all(p["id"].isdigit() and set(p) == {"id", "name", "slug", "isDefault", "productType"} for p in policies)
    rules = real_api.get(by_id(real, f"policies/{policies[0]['id']}")).json()["rules"]
    assert all(r["id"].isdigit() and r["severity"].startswith("SEVERITY_") for r in rules)
    assert all(isinstance(r["vulnerabilityClass"], list) for r in rules)
    change = {"rulePath": rules[0]["path"], "policyMode": rules[0]["policyMode"]}
    updated = real_api.put(by_id(real, f"policies/{policies[0]['id']}"), json=change).json()["updatedRule"]
    assert isinstance(updated["vulnerabilityClass"], list)
    reference = ref_api.put(by_id(ref, f"policies/{policies[0]['id']}"), json=change).json()["updatedRule"]
    assert isinstance(reference["vulnerabilityClass"], str)


def test_project_list_items(real_api: httpx.Client, real: EmulatorProcess, ref_api: httpx.Client,
                            ref: EmulatorProcess) -> None:
    served = real_api.get(by_slug(real, "projects")).json()["projects"]
    reference = ref_api.get(by_slug(ref, "projects")).json()["projects"]
    assert all(isinstance(p["id"], int) and "managed_scan_config" not in p for p in served)
    assert _without_times(served) == _without_times(
        [{k: v for k, v in p.items() if k != "managed_scan_config"} for p in reference])


@pytest.mark.parametrize("dialect", ["ref", "real"])
def test_tags_in_every_accepted_form(request: pytest.FixtureRequest, dialect: str) -> None:
    emu: EmulatorProcess = request.getfixturevalue(dialect)
    api: httpx.Client = request.getfixturevalue(f"{dialect}_api")
    name = api.get(by_slug(emu, "projects")).json()["projects"][0]["name"]
    path = by_slug(emu, f"projects/{name}/tags")
    assert {"a1", "b1"} <= set(api.put(path, json={"tags": ["a1", "b1"]}).json()["project"]["tags"])
    assert "c1" in api.put(path, json=["c1"]).json()["project"]["tags"]
    tags = api.request("DELETE", path, json={"tags": ["a1"]}).json()["project"]["tags"]
    assert "a1" not in tags
    assert {"b1", "c1"} <= set(tags)
    tags = api.delete(path, params={"tags": ["b1", "c1"]}).json()["project"]["tags"]
    assert not {"a1", "b1", "c1"} & set(tags)
    assert_error(api.delete(path), 400, "tags")


def test_tickets_take_the_branded_tracker_field_and_link_in_snake_case(real_api: httpx.Client,
                                                                       real: EmulatorProcess) -> None:
    open_ids = [f["id"] for f in _findings(real_api, real, "issue_type=sast&status=open")
                if f["external_ticket"] is None][:2]
    response = real_api.post(by_slug(real, "tickets"), json={
        "issue_type": "sast", "issue_ids": [str(i) for i in open_ids], "group_issues": False,
        "jira_project_id": "4711"})
    assert response.status_code == 200, response.text
    succeeded = response.json()["succeeded"]
    assert sorted(i for t in succeeded for i in t["issue_ids"]) == sorted(open_ids)
    assert all(isinstance(t["ticket_id"], int) for t in succeeded)
    assert {t["tracker_project_id"] for t in real.tickets()} == {"4711"}
    ticketed = {f["id"]: f for f in _findings(real_api, real, "issue_type=sast&status=open") if f["id"] in open_ids}
    for finding in ticketed.values():
        assert set(finding["external_ticket"]) == {"id", "external_slug", "url", "linked_issue_ids"}
        assert set(finding["location"]) == {"file_path", "line", "column", "end_line", "end_column"}


def test_selections_accept_the_real_value_sets(real_api: httpx.Client, real: EmulatorProcess,
                                               ref_api: httpx.Client, ref: EmulatorProcess) -> None:
    for api, emu in ((real_api, real), (ref_api, ref)):
        triage = by_slug(emu, "triage")
        confirmed = api.post(triage, json={"issue_type": "secrets", "validation_state": ["confirmed_valid"],
                                           "new_note": "checked"}).json()
        valid = api.post(triage, json={"issue_type": "secrets", "validation_state": ["valid"],
                                       "new_note": "checked"}).json()
        assert confirmed["num_triaged"] > 0
        assert sorted(confirmed["triaged_issues"]) == sorted(valid["triaged_issues"])
        for selection in ({"status": "provisionally_ignored"}, {"triage_reasons": ["duplicate"]},
                          {"validation_state": ["no_validator"]}):
            issue_type = "secrets" if "validation_state" in selection else "sast"
            response = api.post(triage, json={"issue_type": issue_type, "new_note": "n", **selection})
            assert response.status_code == 200, response.text


def test_unknown_routes(real_api: httpx.Client, ref_api: httpx.Client) -> None:
    body = assert_error(real_api.get("/api/v1/no-such-route"), 404)
    assert body["error"].startswith("The requested URL was not found on the server.")
    assert "field" not in body
    assert assert_error(ref_api.get("/api/v1/no-such-route"), 404)["field"] is None


def test_reset_switches_the_dialect(ref_api: httpx.Client, ref: EmulatorProcess) -> None:
    ref.reset(dialect="real")
    try:
        body = ref_api.get(by_slug(ref, "findings")).json()
        assert set(body) == {"findings"}
        assert "file_path" in body["findings"][0]["location"]
    finally:
        ref.reset(dialect="reference")
    assert "sastFindings" in ref_api.get(by_slug(ref, "findings")).json()


def test_changed_findings_stay_in_the_real_dialect(real_api: httpx.Client, real: EmulatorProcess) -> None:
    before = {f["id"]: f for f in _findings(real_api, real, "issue_type=sca")}
    chosen = next(f for f in before.values() if f["external_ticket"] is None and f["status"] == "open"
                  and f["reachability"] == "always reachable")
    real.person_acts(chosen["id"], ticket="create")
    response = real_api.post(by_slug(real, "triage"), json={"issue_type": "sca", "issue_ids": [chosen["id"]],
                                                            "new_triage_state": "reviewing"})
    assert response.status_code == 200, response.text
    after = next(f for f in _findings(real_api, real, "issue_type=sca") if f["id"] == chosen["id"])
    ticket = after["external_ticket"]
    assert set(ticket) == {"id", "external_slug", "url", "linked_issue_ids"}
    assert after["usage"]["external_ticket"] == ticket
    assert after["status"] == "reviewing"
    assert after["reachability"] == "always reachable"
    assert set(after["usage"]["location"]) == {"path", "start_line", "start_col", "end_line", "end_col", "url"}
    assert set(after["location"]) == {"file_path", "line", "column", "end_line", "end_column"}
