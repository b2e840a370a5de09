"""Projects: list (offset pagination), managed scans (4.9), tags (4.12, 4.13), names with a slash."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import assert_error, by_slug

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
