"""SBOM export: jobs that finish after several polls or fail, and the CycloneDX document behind a download link
that needs no token and refuses a wrong, missing or expired key."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import httpx
import pytest
from findings_emulator.cli import build_parser, config_from_args
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import assert_error, by_id

Json = dict[str, Any]
V16 = {"format": "SBOM_FORMAT_CYCLONEDX", "cyclonedxVersion": "SBOM_CYCLONE_DX_VERSION_V1_6"}
STATUS_KEYS = {"status", "downloadUrl", "errorMessage"}


def start(api: httpx.Client, emu: EmulatorProcess, repository_id: int, **body: Any) -> str:
    response = api.post(by_id(emu, "sbom/export"),
                        json={"repositoryId": str(repository_id), "formatVersion": V16, **body})
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"taskToken"}
    return str(response.json()["taskToken"])


def poll(api: httpx.Client, emu: EmulatorProcess, token: str) -> Json:
    response = api.get(by_id(emu, f"sbom/export/{token}"))
    assert response.status_code == 200, response.text
    assert set(response.json()) == STATUS_KEYS
    return dict(response.json())


def poll_until_done(api: httpx.Client, emu: EmulatorProcess, token: str) -> tuple[Json, int]:
    """The finishing answer and how many polls it took."""
    for polls in range(1, 50):
        answer = poll(api, emu, token)
        if answer["status"] != "SBOM_EXPORT_STATUS_IN_PROGRESS":
            return answer, polls
    raise AssertionError("the export never finished")


def dependencies_of(api: httpx.Client, emu: EmulatorProcess, repository_id: int) -> list[Json]:
    response = api.post(by_id(emu, "dependencies"),
                        json={"pageSize": 10000, "dependencyFilter": {"repositoryId": [repository_id]}})
    assert response.status_code == 200, response.text
    return list(response.json()["dependencies"])


def repository_with_dependencies(api: httpx.Client, emu: EmulatorProcess, index: int = 0) -> int:
    summaries = api.post(by_id(emu, "dependencies/repositories"), json={"pageSize": 100}).json()
    return int(summaries["repositorySummaries"][index]["id"])


@pytest.mark.parametrize("version", ["1.4", "1.5", "1.6", "1.7"])
def test_export_takes_its_polls_and_serves_cyclonedx_without_a_token(api: httpx.Client,
                                                                      each_dialect: EmulatorProcess,
                                                                      version: str) -> None:
    emu = each_dialect
    repo_id = repository_with_dependencies(api, emu)
    unset = "" if emu.dialect == "real" else None
    token = start(api, emu, repo_id, formatVersion={
        "format": "SBOM_FORMAT_CYCLONEDX", "cyclonedxVersion": f"SBOM_CYCLONE_DX_VERSION_V{version.replace('.', '_')}"})
    expected_polls = emu.sbom()["polls"]
    assert expected_polls > 1
    answer, polls = poll_until_done(api, emu, token)
    assert polls == expected_polls
    assert answer["status"] == "SBOM_EXPORT_STATUS_COMPLETED"
    assert answer["errorMessage"] == unset
    url = answer["downloadUrl"]
    assert urlsplit(url).hostname == "127.0.0.1"
    seq = max(r["seq"] for r in emu.requests())
    response = httpx.get(url)  # no token
    assert response.status_code == 200, response.text
    (logged,) = [r for r in emu.requests(seq) if r["operation"] == "sbom_download"]
    assert logged["authorization_sent"] is False
    document = response.json()
    assert document["bomFormat"] == "CycloneDX"
    assert document["specVersion"] == version
    assert document["serialNumber"].startswith("urn:uuid:")
    assert document["version"] == 1
    project = next(p for p in api.get(f"/api/v1/deployments/{emu.deployment_slug}/projects").json()["projects"]
                   if p["id"] == repo_id)
    assert document["metadata"]["component"]["name"] == project["name"]
    assert document["metadata"]["component"]["version"] == project["primary_branch"]
    assert document["metadata"]["component"]["type"] == "application"
    deps = dependencies_of(api, emu, repo_id)
    assert deps
    wanted: dict[tuple[str, str], set[str]] = {}
    for dep in deps:
        name = dep["name"] if "name" in dep else dep["package"]["name"]
        dep_version = dep["version"] if "version" in dep else dep["package"]["versionSpecifier"]
        wanted.setdefault((name, dep_version), set()).update(dep["licenses"])
    components = document["components"]
    assert {(c["name"], c["version"]): {lic["license"]["id"] for lic in c["licenses"]} for c in components} == wanted
    assert len(components) == len(wanted)
    for component in components:
        assert component["purl"].startswith("pkg:")
        assert component["purl"].endswith(f"@{component['version']}")
        assert component["bom-ref"] == component["purl"]
    assert len({c["bom-ref"] for c in components}) == len(components)


def test_download_refuses_a_wrong_missing_or_expired_key(api: httpx.Client, fresh: EmulatorProcess) -> None:
    repo_id = repository_with_dependencies(api, fresh)
    fresh.sbom(polls=1, url_ttl=1.5)
    answer, polls = poll_until_done(api, fresh, start(api, fresh, repo_id))
    assert polls == 1
    url = urlsplit(answer["downloadUrl"])
    query = parse_qs(url.query)
    key = query["signature"][0]

    def with_query(text: str) -> str:
        return urlunsplit(url._replace(query=text))

    assert httpx.get(answer["downloadUrl"]).status_code == 200
    wrong = key[:-1] + ("y" if key.endswith("x") else "x")  # another last character, whatever the key's was
    assert_error(httpx.get(with_query(f"expires={query['expires'][0]}&signature={wrong}")), 403, "signature")
    assert_error(httpx.get(with_query("")), 401, "signature")
    other = urlsplit(answer["downloadUrl"])._replace(path=url.path.rsplit("/", 1)[0] + "/no-such-task")
    assert_error(httpx.get(urlunsplit(other)), 404)
    time.sleep(2.0)
    assert_error(httpx.get(answer["downloadUrl"]), 403, "signature")


def test_jobs_fail_when_told_to(api: httpx.Client, each_dialect: EmulatorProcess) -> None:
    emu = each_dialect
    unset = "" if emu.dialect == "real" else None
    first, second = repository_with_dependencies(api, emu, 0), repository_with_dependencies(api, emu, 1)
    emu.sbom(polls=4, fail_next=1, error_message="disk full")
    failing = start(api, emu, first)
    passing = start(api, emu, first)
    answer, polls = poll_until_done(api, emu, failing)
    assert polls == 4
    assert answer == {"status": "SBOM_EXPORT_STATUS_FAILED", "downloadUrl": unset, "errorMessage": "disk full"}
    assert poll_until_done(api, emu, passing)[0]["status"] == "SBOM_EXPORT_STATUS_COMPLETED"
    emu.sbom(fail_repositories=[second])
    assert poll_until_done(api, emu, start(api, emu, second))[0]["status"] == "SBOM_EXPORT_STATUS_FAILED"
    assert poll_until_done(api, emu, start(api, emu, first))[0]["status"] == "SBOM_EXPORT_STATUS_COMPLETED"
    unknown_ref, _ = poll_until_done(api, emu, start(api, emu, first, ref="no/such-branch"))
    assert unknown_ref["status"] == "SBOM_EXPORT_STATUS_FAILED"
    assert "no/such-branch" in unknown_ref["errorMessage"]
    jobs = emu.sbom()["jobs"]
    assert [j["status"] for j in jobs] == ["SBOM_EXPORT_STATUS_FAILED", "SBOM_EXPORT_STATUS_COMPLETED",
                                           "SBOM_EXPORT_STATUS_FAILED", "SBOM_EXPORT_STATUS_COMPLETED",
                                           "SBOM_EXPORT_STATUS_FAILED"]


def test_metadata_of_the_request_is_in_the_document(api: httpx.Client, emulator: EmulatorProcess) -> None:
    repo_id = repository_with_dependencies(api, emulator)
    token = start(api, emulator, repo_id,
                  metadataComponentType="SBOM_METADATA_COMPONENT_TYPE_CYCLONE_DX_V15_LIBRARY",
                  metadataSupplier={"name": "Acme", "url": "https://acme.example",
                                    "contact": {"name": "Sec Team", "email": "sec@acme.example"}})
    document = httpx.get(poll_until_done(api, emulator, token)[0]["downloadUrl"]).json()
    assert document["metadata"]["component"]["type"] == "library"
    assert document["metadata"]["supplier"] == {"name": "Acme", "url": ["https://acme.example"],
                                                "contact": [{"name": "Sec Team", "email": "sec@acme.example"}]}


def test_polls_come_from_the_command_line_and_a_reset(api: httpx.Client, fresh: EmulatorProcess) -> None:
    assert config_from_args(build_parser().parse_args(["--sbom-polls", "5"])).sbom_polls == 5
    fresh.reset(sbom_polls=2)
    try:
        assert fresh.sbom()["polls"] == 2
        assert poll_until_done(api, fresh, start(api, fresh, repository_with_dependencies(api, fresh)))[1] == 2
    finally:
        fresh.reset(sbom_polls=3)


@pytest.mark.parametrize(("body", "field"), [
    ({"repositoryId": "40001"}, "formatVersion"),
    ({"repositoryId": "40001", "formatVersion": {**V16, "cyclonedxVersion": "SBOM_CYCLONE_DX_VERSION_V2_0"}},
     "formatVersion.cyclonedxVersion"),
    ({"repositoryId": "40001", "formatVersion": {**V16, "format": "SBOM_FORMAT_SPDX"}}, "formatVersion.format"),
    ({"repositoryId": "abc", "formatVersion": V16}, "repositoryId"),
    ({"repositoryId": "40001", "formatVersion": V16, "metadataComponentType": "APPLICATION"},
     "metadataComponentType"),
])
def test_invalid_export_requests_are_400(api: httpx.Client, emulator: EmulatorProcess, body: Json,
                                         field: str) -> None:
    assert_error(api.post(by_id(emulator, "sbom/export"), json=body), 400, field)


def test_unknown_repository_or_task_is_404(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert_error(api.post(by_id(emulator, "sbom/export"), json={"repositoryId": "999999", "formatVersion": V16}),
                 404)
    assert_error(api.get(by_id(emulator, "sbom/export/no-such-task")), 404)
