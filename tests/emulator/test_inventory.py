"""Dependencies (4.1), repositories with dependencies (4.2), both in mixed pagination, and secrets (4.15)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import assert_error, by_id

Item = dict[str, Any]


def mixed_pages(api: httpx.Client, path: str, key: str, **body: Any) -> tuple[list[Item], int]:
    """Every item of a mixed-pagination listing, and how many requests it took."""
    items: list[Item] = []
    cursor: Any = None
    requests = 0
    while True:
        page = api.post(path, json={**body, **({"cursor": cursor} if cursor is not None else {})})
        assert page.status_code == 200, page.text
        requests += 1
        items.extend(page.json()[key])
        cursor = page.json()["cursor"]
        if not page.json()["hasMore"]:
            return items, requests


def test_dependencies_default_page_and_pagination_to_the_end(api: httpx.Client, emulator: EmulatorProcess) -> None:
    path = by_id(emulator, "dependencies")
    first = api.post(path, json={}).json()
    assert len(first["dependencies"]) == 300
    assert first["hasMore"] is False
    assert {"id", "name", "version", "ecosystem", "lockfilePath", "licenses"} <= first["dependencies"][0].keys()
    paged, requests = mixed_pages(api, path, "dependencies", pageSize=40)
    assert requests == 8
    assert [d["id"] for d in paged] == [d["id"] for d in first["dependencies"]]


def test_dependency_filters(api: httpx.Client, emulator: EmulatorProcess) -> None:
    path = by_id(emulator, "dependencies")
    everything = api.post(path, json={}).json()["dependencies"]
    sample = everything[3]
    cases = [
        ({"name": sample["name"]}, lambda d: d["name"] == sample["name"]),
        ({"license": ["MIT", "ISC"]}, lambda d: {"MIT", "ISC"} & set(d["licenses"])),
        ({"lockfilePath": sample["lockfilePath"]}, lambda d: d["lockfilePath"] == sample["lockfilePath"]),
        ({"repositoryId": [sample["repositoryId"]]}, lambda d: d["repositoryId"] == sample["repositoryId"]),
        ({"packageFilters": [{"name": "lodash", "exactNameMatch": True, "versionUpperBound": "4.17.20"}]},
         lambda d: d["name"] == "lodash" and d["version"] <= "4.17.20"),
    ]
    for flt, predicate in cases:
        got = api.post(path, json={"dependencyFilter": flt}).json()["dependencies"]
        expected = [d for d in everything if predicate(d)]
        assert got == expected, flt
        assert 0 < len(got) < len(everything), flt


@pytest.mark.parametrize(("suffix", "body", "field"), [
    ("dependencies", {"pageSize": 10001}, "pageSize"), ("dependencies", {"pageSize": 0}, "pageSize"),
    ("dependencies", {"cursor": "abc"}, "cursor"),
    ("dependencies/repositories", {"pageSize": 101}, "pageSize"),
    ("dependencies/repositories", {"page_size": 101}, "page_size"),
])
def test_dependency_limits(api: httpx.Client, emulator: EmulatorProcess, suffix: str, body: dict[str, Any],
                           field: str) -> None:
    assert_error(api.post(by_id(emulator, suffix), json=body), 400, field)


def test_repositories_with_dependencies(api: httpx.Client, emulator: EmulatorProcess) -> None:
    path = by_id(emulator, "dependencies/repositories")
    first = api.post(path, json={}).json()
    assert len(first["repositorySummaries"]) == 5
    assert first["hasMore"] is True
    paged, requests = mixed_pages(api, path, "repositorySummaries", page_size=2)
    assert requests == 6
    assert len({r["id"] for r in paged}) == 12
    assert sum(r["numDependencies"] for r in paged) == 300
    lodash = api.post(path, json={"pageSize": 100, "dependencyFilter": {"name": "lodash"}}).json()
    assert 0 < len(lodash["repositorySummaries"]) < 12


def test_secrets_cursor_pagination_reaches_the_end(api: httpx.Client, emulator: EmulatorProcess) -> None:
    path = by_id(emulator, "secrets")
    default = api.get(path).json()
    assert len(default["findings"]) == 100
    assert default["cursor"]
    items: list[Item] = []
    cursor = ""
    while True:
        page = api.get(path, params={"cursor": cursor, "limit": 33}).json()
        items.extend(page["findings"])
        cursor = page["cursor"]
        if not cursor:
            break
    ids = [s["id"] for s in items]
    assert len(ids) == len(set(ids)) == 200
    assert ids[:100] == [s["id"] for s in default["findings"]]
    assert {"secret_type", "validation_state", "repository_visibility", "historical", "status",
            "triage_state", "relevant_since", "external_ticket", "location"} <= items[0].keys()
    assert {s["validation_state"] for s in items} == {"valid", "invalid"}


@pytest.mark.parametrize(("params", "field"), [({"limit": 1001}, "limit"), ({"limit": 0}, "limit"),
                                               ({"cursor": "%%%"}, "cursor")])
def test_secrets_invalid_query_is_400(api: httpx.Client, emulator: EmulatorProcess, params: dict[str, Any],
                                      field: str) -> None:
    assert_error(api.get(by_id(emulator, "secrets"), params=params), 400, field)


# --- lockfiles of one repository ---------------------------------------------------------------------------------

def _lockfile_of(dependency: Item) -> str:
    """A listed dependency's lockfile, in either dialect."""
    return str(dependency["lockfilePath"] if "lockfilePath" in dependency else dependency["definedAt"]["path"])


def test_lockfiles_count_the_dependencies_listed(api: httpx.Client, each_dialect: EmulatorProcess) -> None:
    emu = each_dialect
    summaries, _ = mixed_pages(api, by_id(emu, "dependencies/repositories"), "repositorySummaries", pageSize=100)
    dependencies, _ = mixed_pages(api, by_id(emu, "dependencies"), "dependencies", pageSize=10000)
    assert summaries
    for summary in summaries:
        path = by_id(emu, f"dependencies/repositories/{summary['id']}/lockfiles")
        first = api.post(path, json={"pageSize": 2, "cursor": 0})
        assert first.status_code == 200, first.text
        assert set(first.json()) == {"lockfileSummaries", "hasMore", "cursor"}
        lockfiles, requests = mixed_pages(api, path, "lockfileSummaries", pageSize=2)
        assert all(set(lf) == {"lockfilePath", "numDependencies"} for lf in lockfiles)
        own = [d for d in dependencies if int(d["repositoryId"]) == summary["id"]]
        counted: dict[str, int] = {}
        for dep in own:
            counted[_lockfile_of(dep)] = counted.get(_lockfile_of(dep), 0) + 1
        assert {lf["lockfilePath"]: lf["numDependencies"] for lf in lockfiles} == counted
        assert [lf["lockfilePath"] for lf in lockfiles] == sorted(counted)
        assert sum(lf["numDependencies"] for lf in lockfiles) == summary["numDependencies"]
        assert requests == max(1, -(-len(counted) // 2))


def test_lockfiles_take_the_dependency_filter(api: httpx.Client, emulator: EmulatorProcess) -> None:
    dependencies, _ = mixed_pages(api, by_id(emulator, "dependencies"), "dependencies", pageSize=10000)
    repo = dependencies[0]["repositoryId"]
    ecosystem = dependencies[0]["ecosystem"]
    response = api.post(by_id(emulator, f"dependencies/repositories/{repo}/lockfiles"),
                        json={"dependencyFilter": {"ecosystem": [ecosystem]}})
    assert response.status_code == 200, response.text
    counted: dict[str, int] = {}
    for dep in dependencies:
        if dep["repositoryId"] == repo and dep["ecosystem"] == ecosystem:
            counted[dep["lockfilePath"]] = counted.get(dep["lockfilePath"], 0) + 1
    assert {lf["lockfilePath"]: lf["numDependencies"] for lf in response.json()["lockfileSummaries"]} == counted
    assert response.json()["hasMore"] is False


def test_lockfiles_of_an_unknown_repository_are_404(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert_error(api.post(by_id(emulator, "dependencies/repositories/999999/lockfiles"), json={}), 404)
    assert_error(api.post(by_id(emulator, "dependencies/repositories/40001/lockfiles"), json={"pageSize": 0}),
                 400, "pageSize")
