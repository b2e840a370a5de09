"""Projects: list (offset pagination), managed scans (4.9), tags (4.12, 4.13), names with a slash."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import all_findings, assert_error, by_id, by_slug

PROJECT_FIELDS = {"id", "name", "tags", "created_at", "default_branch", "primary_branch", "latest_scan_at", "url",
                  "managed_scan_config"}


def projects(api: httpx.Client, emulator: EmulatorProcess, **params: Any) -> list[dict[str, Any]]:
    response = api.get(by_slug(emulator, "projects"), params=params)
    assert response.status_code == 200, response.text
    return list(response.json()["projects"])


def test_offset_pagination_reaches_the_end(api: httpx.Client, emulator: EmulatorProcess) -> None:
    everything = projects(api, emulator)
    assert len(everything) == 12
    assert all(PROJECT_FIELDS <= p.keys() for p in everything)
    paged: list[dict[str, Any]] = []
    page = 0
    while True:
        batch = projects(api, emulator, page=page, page_size=5)
        paged.extend(batch)
        if len(batch) < 5:
            break
        page += 1
    assert [p["name"] for p in paged] == [p["name"] for p in everything]
    assert all("/" in p["name"] for p in paged)


@pytest.mark.parametrize("params", [{"page_size": 0}, {"page_size": 1001}, {"page": -1}])
def test_invalid_paging_is_400(api: httpx.Client, emulator: EmulatorProcess, params: dict[str, Any]) -> None:
    assert_error(api.get(by_slug(emulator, "projects"), params=params), 400, next(iter(params)))


@pytest.mark.parametrize("encode", [False, True], ids=["raw-slash", "percent-encoded"])
def test_tags_are_added_and_removed(api: httpx.Client, fresh: EmulatorProcess, encode: bool) -> None:
    name = projects(api, fresh)[0]["name"]
    path = by_slug(fresh, f"projects/{quote(name, safe='') if encode else name}/tags")
    added = api.put(path, json=["pci", "team:payments", "pci"])
    assert added.status_code == 200, added.text
    tags = added.json()["project"]["tags"]
    assert tags.count("pci") == 1
    assert "team:payments" in tags
    removed = api.delete(path, params=[("tags", "pci"), ("tags", "absent")])
    assert removed.status_code == 200, removed.text
    assert "pci" not in removed.json()["project"]["tags"]
    assert next(p for p in projects(api, fresh) if p["name"] == name)["tags"] == removed.json()["project"]["tags"]


def test_managed_scans_toggle_persists(api: httpx.Client, fresh: EmulatorProcess) -> None:
    project = projects(api, fresh)[1]
    path = by_slug(fresh, f"projects/{project['name']}/managed-scan")
    before = project["managed_scan_config"]
    wanted = not before["diff_scan"]["enabled"]
    response = api.patch(path, json={"diff_scan": {"enabled": wanted}})
    assert response.status_code == 200, response.text
    config = response.json()["project"]["managed_scan_config"]
    assert config == {"diff_scan": {"enabled": wanted}, "full_scan": before["full_scan"]}
    assert next(p for p in projects(api, fresh) if p["name"] == project["name"])["managed_scan_config"] == config


def test_invalid_project_requests(api: httpx.Client, emulator: EmulatorProcess) -> None:
    name = projects(api, emulator)[0]["name"]
    assert_error(api.put(by_slug(emulator, "projects/acme/no-such-repo/tags"), json=["x"]), 404)
    assert_error(api.patch(by_slug(emulator, "projects/acme/no-such-repo/managed-scan"),
                           json={"full_scan": {"enabled": True}}), 404)
    assert_error(api.put(by_slug(emulator, f"projects/{name}/tags"), json={"labels": ["x"]}), 400)
    assert_error(api.delete(by_slug(emulator, f"projects/{name}/tags")), 400, "tags")
    assert_error(api.patch(by_slug(emulator, f"projects/{name}/managed-scan"), json={}), 400, "diff_scan")
    assert_error(api.patch(by_slug(emulator, f"projects/{name}/managed-scan"),
                           json={"diff_scan": {"enabled": "yes"}}), 400, "diff_scan.enabled")


# --- one project: get, patch, delete (both dialects) -----------------------------------------------------------

def test_list_items_carry_an_independent_default_branch(api: httpx.Client, each_dialect: EmulatorProcess) -> None:
    listed = projects(api, each_dialect)
    wanted = PROJECT_FIELDS - ({"managed_scan_config"} if each_dialect.dialect == "real" else set())
    assert all(set(p) == wanted for p in listed)
    differing = [p for p in listed if p["default_branch"] != p["primary_branch"]]
    assert differing
    assert len(differing) < len(listed)
    each_dialect.reset()
    assert [(p["name"], p["primary_branch"], p["default_branch"]) for p in projects(api, each_dialect)] == [
        (p["name"], p["primary_branch"], p["default_branch"]) for p in listed]


@pytest.mark.parametrize("encode", [False, True], ids=["raw-slash", "percent-encoded"])
def test_get_a_project(api: httpx.Client, each_dialect: EmulatorProcess, encode: bool) -> None:
    listed = projects(api, each_dialect)[3]
    name = quote(listed["name"], safe="") if encode else listed["name"]
    response = api.get(by_slug(each_dialect, f"projects/{name}"))
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"project"}
    project = response.json()["project"]
    assert set(project) == PROJECT_FIELDS
    assert {k: v for k, v in project.items() if k in listed} == listed
    assert_error(api.get(by_slug(each_dialect, "projects/acme/no-such-repo")), 404)


@pytest.mark.parametrize("encode", [False, True], ids=["raw-slash", "percent-encoded"])
def test_patch_a_project(api: httpx.Client, each_dialect: EmulatorProcess, encode: bool) -> None:
    before = projects(api, each_dialect)[2]
    path = by_slug(each_dialect, f"projects/{quote(before['name'], safe='') if encode else before['name']}")
    wanted = not before["managed_scan_config"]["full_scan"]["enabled"] if "managed_scan_config" in before \
        else True
    response = api.patch(path, json={"tags": ["pci", "tier-1", "pci"], "primary_branch": "release/next",
                                     "managed_scan_config": {"full_scan": {"enabled": wanted}}})
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"project"}
    project = response.json()["project"]
    assert set(project) == PROJECT_FIELDS
    assert project["tags"] == ["pci", "tier-1"]
    assert project["primary_branch"] == "release/next"
    assert project["default_branch"] == before["default_branch"]
    assert project["managed_scan_config"]["full_scan"] == {"enabled": wanted}
    assert api.get(path).json()["project"] == project
    assert next(p for p in projects(api, each_dialect) if p["name"] == before["name"])["tags"] == ["pci", "tier-1"]
    only_tags = api.patch(path, json={"tags": []}).json()["project"]
    assert only_tags["tags"] == []
    assert only_tags["primary_branch"] == "release/next"
    assert_error(api.patch(path, json={}), 400, "body")
    assert_error(api.patch(path, json={"primary_branch": ""}), 400, "primary_branch")
    assert_error(api.patch(by_slug(each_dialect, "projects/acme/no-such-repo"), json={"tags": []}), 404)


def test_delete_a_project_takes_its_findings_with_it(api: httpx.Client, each_dialect: EmulatorProcess) -> None:
    emu = each_dialect
    victim = projects(api, emu)[4]
    counts = {t: emu.stats()["counts"]["findings"][t] for t in ("sast", "sca", "secrets")}
    own = {t: [f["id"] for f in all_findings(api, emu, issue_type=t) if f["repository"]["name"] == victim["name"]]
           for t in ("sast", "sca")}
    assert own["sast"]
    assert own["sca"]
    response = api.delete(by_slug(emu, f"projects/{victim['name']}"))
    assert response.status_code == 200, response.text
    assert response.json() == {"project_name": victim["name"]}
    assert_error(api.get(by_slug(emu, f"projects/{victim['name']}")), 404)
    assert victim["name"] not in {p["name"] for p in projects(api, emu)}
    for issue_type in ("sast", "sca"):
        left = all_findings(api, emu, issue_type=issue_type)
        assert not {f["id"] for f in left} & set(own[issue_type])
        assert len(left) == counts[issue_type] - len(own[issue_type])
    assert emu.stats()["counts"]["findings"]["secrets"] <= counts["secrets"]
    assert_error(api.post(by_id(emu, f"dependencies/repositories/{victim['id']}/lockfiles"), json={}), 404)
    assert_error(api.delete(by_slug(emu, f"projects/{victim['name']}")), 404)


def test_tag_removal_takes_a_bare_array_body_and_ignores_a_stray_one(api: httpx.Client,
                                                                     fresh: EmulatorProcess) -> None:
    name = projects(api, fresh)[0]["name"]
    path = by_slug(fresh, f"projects/{name}/tags")
    api.put(path, json={"tags": ["a1", "b1", "c1"]})
    tags = api.request("DELETE", path, json=["a1"]).json()["project"]["tags"]
    assert "a1" not in tags
    assert {"b1", "c1"} <= set(tags)
    response = api.request("DELETE", path, params={"tags": "b1"}, content=b"not json",
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    assert "b1" not in response.json()["project"]["tags"]
    assert_error(api.request("DELETE", path, content=b"not json", headers={"Content-Type": "application/json"}),
                 400, "tags")
