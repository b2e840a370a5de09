"""The real service's dialect (api-notes, "The real service's dialect") of dependencies, repository summaries, scans,
policies, projects and deployments parses to the same canonical values as the reference's shape.

Each test reads a reference-shaped fixture and a real-dialect fixture of the same resource and asserts the same
canonical values from both; the warehouse rows built from either agree too.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from findings_provider.client import ConfigurationError, FindingsClient
from findings_provider.client.dependency_identity import canonical_transitivity, dependency_key
from findings_provider.client.models import (
    Dependency,
    LockfilesPage,
    PingResponse,
    Project,
    SbomExportState,
    TicketLinkResult,
    TicketUnlinkResult,
)
from findings_provider.client.vocabulary import SbomExportStatus, ScanStatus, UnknownSbomExportStatusError
from findings_provider.warehouse.rows import (
    DEPENDENCY_COLUMNS,
    DEPENDENCY_REPOSITORY_COLUMNS,
    POLICY_RULE_COLUMNS,
    SCAN_COLUMNS,
    dependency_repository_rows,
    dependency_rows,
    policy_rule_rows,
    scan_rows,
)
from pydantic import ValidationError as PydanticValidationError

from . import payloads as p
from .conftest import Recorder, call_async, client_kwargs
from .fixtures import operations as fx

UTC = timezone.utc
SLUG = "/api/v1/deployments/acme"


# --- dependencies -------------------------------------------------------------------------------------------


def code_location(path: str, line: str) -> dict[str, Any]:
    return {
        "path": path,
        "url": f"https://git.example.com/org/repo/blob/main/{path}#L{line}",
        "committedAt": "1970-01-01T00:00:00Z",
        "startLine": line,
        "endLine": line,
        "startCol": "3",
        "endCol": "20",
    }


def reference_dependency(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "d1",
        "name": "lodash",
        "version": "4.17.21",
        "ecosystem": "npm",
        "transitivity": "direct",
        "licenses": ["MIT", "Apache-2.0"],
        "repositoryId": 123456,
        "lockfilePath": "package-lock.json",
    }
    body.update(overrides)
    return body


def real_dependency(**overrides: Any) -> dict[str, Any]:
    """A dependency as the real service sends it: no id, no top-level name or version, digit strings."""
    body: dict[str, Any] = {
        "repositoryId": "123456",
        "package": {"name": "lodash", "versionSpecifier": "4.17.21"},
        "ecosystem": "npm",
        "transitivity": "DIRECT",
        "licenses": ["MIT", "Apache-2.0"],
        "definedAt": code_location("package-lock.json", "1207"),
        "manifestDefinition": code_location("package.json", "14"),
        "resolvedUrl": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
        "pathToTransitivity": [],
    }
    body.update(overrides)
    return body


REAL_KEY = "123456|package-lock.json|npm|lodash|4.17.21"


def canonical(dep: Dependency) -> tuple:
    return (dep.name, dep.version, dep.ecosystem, dep.transitivity, dep.licenses, dep.repositoryId, dep.lockfile_path)


def test_a_real_dependency_page_parses_to_the_reference_values(make_client) -> None:
    rec = Recorder(
        {"dependencies": [reference_dependency()], "cursor": "8", "hasMore": True},
        {"dependencies": [real_dependency()], "hasMore": True, "cursor": "123456789"},
    )
    client = make_client(rec)
    reference = client.list_dependencies()
    real = client.list_dependencies()

    [ref_dep], [real_dep] = reference.items, real.items
    expected = ("lodash", "4.17.21", "npm", "direct", ["MIT", "Apache-2.0"], "123456", "package-lock.json")
    assert canonical(ref_dep) == canonical(real_dep) == expected
    assert ref_dep.key == "d1"
    assert real_dep.id is None
    assert real_dep.key == REAL_KEY
    assert (real.cursor, real.hasMore) == ("123456789", True)
    location = real_dep.definedAt
    assert (location.startLine, location.endLine, location.startCol, location.endCol) == (1207, 1207, 3, 20)
    assert location.committedAt is None  # the epoch placeholder means "not set"
    assert real_dep.manifestDefinition.path == "package.json"
    assert real_dep.model_extra["pathToTransitivity"] == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("DIRECT", "direct"),
        ("TRANSITIVE", "transitive"),
        ("UNKNOWN_TRANSITIVITY", "unknown"),
        ("direct", "direct"),
        ("transitive", "transitive"),
        ("unknown", "unknown"),
        ("TRANSITIVITY_DIRECT", "direct"),
        ("SOMETHING_NEW", "something_new"),  # an unknown value is kept, never an error
        (3, "3"),
        (None, None),
    ],
)
def test_transitivity_is_canonical_lower_case(given: str | None, expected: str | None) -> None:
    assert canonical_transitivity(given) == expected
    assert Dependency.model_validate(real_dependency(transitivity=given)).transitivity == expected


def test_dependency_key_format_escapes_the_separator() -> None:
    assert dependency_key("7", "a|b/go.mod", "GOMOD", "x%y", "v1") == "7|a%7Cb/go.mod|gomod|x%25y|v1"
    assert dependency_key(7, None, None, "x", None) == "7|||x|"
    assert dependency_key(None, "go.mod", "gomod", "x", "1") is None  # no repository: no identity
    assert dependency_key("7", "go.mod", "gomod", "", "1") is None  # no package name: no identity


def test_real_dependencies_are_iterated_with_digit_string_cursors(make_client) -> None:
    rec = Recorder(
        {"dependencies": [real_dependency()], "hasMore": True, "cursor": "123456789"},
        {
            "dependencies": [real_dependency(package={"name": "left-pad", "versionSpecifier": "1.3.0"}, licenses=[])],
            "hasMore": False,
            "cursor": "123456790",
        },
    )
    client = make_client(rec)
    deps = list(client.items(client.list_dependencies))
    assert [(d.key, d.licenses) for d in deps] == [
        (REAL_KEY, ["MIT", "Apache-2.0"]),
        ("123456|package-lock.json|npm|left-pad|1.3.0", []),
    ]
    assert "cursor" not in rec.json(0)
    assert rec.json(1)["cursor"] == "123456789"


def test_dependency_filter_takes_the_real_fields(make_client) -> None:
    rec = Recorder({"dependencies": [], "hasMore": False})
    make_client(rec).list_dependencies(
        dependency_filter={
            "ecosystem": ["npm", "gomod"],
            "transitivity": ["direct", "UNKNOWN"],
            "includeArchived": False,
            "licensePolicySettings": ["LICENSE_POLICY_SETTING_BLOCK"],
        }
    )
    assert rec.json()["dependencyFilter"] == {
        "ecosystem": ["npm", "gomod"],
        "transitivity": ["DIRECT", "UNKNOWN_TRANSITIVITY"],
        "includeArchived": False,
        "licensePolicySettings": ["LICENSE_POLICY_SETTING_BLOCK"],
    }


def test_dependency_rows_from_either_dialect_hold_the_same_values() -> None:
    ref_row, real_row = (
        dict(zip(DEPENDENCY_COLUMNS, row, strict=True))
        for row in dependency_rows([reference_dependency(), json.dumps(real_dependency()).encode()])
    )
    columns = ("name", "version", "ecosystem", "license", "lockfile_path", "repository_id")
    assert (
        [ref_row[c] for c in columns]
        == [real_row[c] for c in columns]
        == [
            "lodash",
            "4.17.21",
            "npm",
            "MIT, Apache-2.0",
            "package-lock.json",
            "123456",
        ]
    )
    assert (ref_row["id"], real_row["id"]) == ("d1", REAL_KEY)
    assert json.loads(real_row["raw"]) == real_dependency()


def test_the_row_key_is_the_model_key_also_after_the_model_is_dumped() -> None:
    """The inventory stores ``model_dump`` of the parsed model: the row's id must still be the model's key."""
    for body in (real_dependency(), real_dependency(package={"name": "a|b", "versionSpecifier": None})):
        dep = Dependency.model_validate(body)
        dumped = dep.model_dump(mode="json", by_alias=True, exclude_unset=True)
        [row] = dependency_rows([dumped])
        [raw_row] = dependency_rows([body])
        assert row[0] == raw_row[0] == dep.key


def test_a_dependency_with_no_id_and_no_identity_is_still_an_error() -> None:
    with pytest.raises(ValueError, match="has no usable id"):
        dependency_rows([real_dependency(repositoryId=None)])


# --- repositories with dependencies -------------------------------------------------------------------------


def test_real_repository_summaries_start_at_cursor_zero(make_client) -> None:
    summary = {"id": 123456, "name": "org/repo", "numDependencies": 12, "hasDependencyPathScan": True}
    rec = Recorder(
        {"repositorySummaries": [summary], "hasMore": True, "cursor": 1},
        {"repositorySummaries": [{**summary, "id": "123457", "numDependencies": "3"}], "hasMore": False, "cursor": 2},
    )
    client = make_client(rec)
    repos = list(client.items(client.list_repositories_with_dependencies, cursor=0))
    assert [(r.id, r.name, r.numDependencies, r.hasDependencyPathScan) for r in repos] == [
        (123456, "org/repo", 12, True),
        (123457, "org/repo", 3, True),
    ]
    assert [rec.json(i)["cursor"] for i in (0, 1)] == [0, 1]  # numbers, as the real service takes them
    rows = [dict(zip(DEPENDENCY_REPOSITORY_COLUMNS, r, strict=True)) for r in dependency_repository_rows([summary])]
    assert (rows[0]["id"], rows[0]["num_dependencies"]) == (123456, 12)


# --- scans ----------------------------------------------------------------------------------------------------


def real_scan(**overrides: Any) -> dict[str, Any]:
    """A scan search item of the real service: int64 as digit strings."""
    body = p.scan(
        exit_code="1",
        deployment_id="42",
        repository_id="7",
        findings_counts={"code": "3", "secrets": "0", "supply_chain": "2", "total": "5"},
        enabled_products=["code", "supply_chain"],
    )
    body.update(overrides)
    return body


def test_a_real_scan_search_page_parses_to_the_reference_values(make_client) -> None:
    rec = Recorder(
        {"scans": [p.scan(deployment_id=42, repository_id=7)], "cursor": "c2"},
        {"scans": [real_scan()], "cursor": "c2"},
    )
    client = make_client(rec)
    [ref], [real] = client.search_scans().items, client.search_scans().items

    def values(scan: Any) -> tuple:
        counts = scan.findings_counts
        return (
            scan.id,
            scan.deployment_id,
            scan.repository_id,
            scan.exit_code,
            scan.scan_status,
            (counts.code, counts.secrets, counts.supply_chain, counts.total),
            scan.started_at,
        )

    assert (
        values(ref)
        == values(real)
        == (
            "9001",
            "42",
            "7",
            1,
            ScanStatus.COMPLETED,
            (3, 0, 2, 5),
            datetime(2020, 11, 18, 23, 28, 12, 391807, tzinfo=UTC),
        )
    )
    ref_row, real_row = scan_rows([p.scan(), real_scan()])
    assert ref_row[:-1] == real_row[:-1]
    assert dict(zip(SCAN_COLUMNS, real_row, strict=True))["exit_code"] == 1


@pytest.mark.parametrize(
    ("status", "expected", "terminal", "success"),
    [
        ("SCAN_STATUS_PENDING", ScanStatus.PENDING, False, False),
        ("SCAN_STATUS_CANCELLED", ScanStatus.CANCELLED, True, False),
    ],
)
def test_real_scan_statuses_are_mapped(make_client, status, expected, terminal, success) -> None:
    rec = Recorder({"scans": [real_scan(status=status, completed_at=None)]})
    [scan] = make_client(rec).search_scans().items
    assert scan.scan_status is expected
    assert (scan.scan_status.is_terminal, scan.scan_status.is_success) == (terminal, success)


def test_real_scan_details_parse_like_the_reference(make_client) -> None:
    rec = Recorder(p.scan_details(), p.scan_details(meta={"on": "pull_request", "pull_request_id": "12"}))
    client = make_client(rec)
    ref, real = client.get_scan(123), client.get_scan(123)
    for details in (ref, real):
        assert (details.id, details.deployment_id, details.repository_id, details.exit_code) == ("123", "42", "7", 0)
        assert details.status is ScanStatus.COMPLETED
    assert real.meta.pull_request_id == 12
    assert real.meta.model_extra["on"] == "pull_request"


# --- policies -------------------------------------------------------------------------------------------------


def test_real_policies_and_rules_parse_like_the_reference(make_client) -> None:
    real_policy = {**p.policy(), "id": "1"}
    real_rule = p.rule(id="5012", severity="SEVERITY_CRITICAL", vulnerabilityClass=["Code Injection"])
    rec = Recorder(
        {"policies": [{**p.policy(), "id": 1}]},
        {"policies": [real_policy, {**real_policy, "id": "2", "productType": "PRODUCT_TYPE_SECRETS"}]},
        {"cursor": "", "policy": {**p.policy(), "id": 1}, "rules": [p.rule(id=5012)]},
        {"cursor": "", "policy": real_policy, "rules": [real_rule]},
    )
    client = make_client(rec)
    [ref_policy], real_policies = client.list_policies(), client.list_policies()
    assert (ref_policy.id, ref_policy.productType) == (real_policies[0].id, real_policies[0].productType)
    assert [(x.id, x.productType) for x in real_policies] == [("1", "PRODUCT_TYPE_SAST"), ("2", "PRODUCT_TYPE_SECRETS")]
    ref_page, real_page = client.list_policy_rules(1), client.list_policy_rules("1")
    assert ref_page.policy.id == real_page.policy.id == "1"
    [ref_rule], [rule] = ref_page.items, real_page.items
    assert ref_rule.id == rule.id == "5012"
    assert rule.severity == "SEVERITY_CRITICAL"
    assert rule.vulnerabilityClass == ["Code Injection"]
    rows = [dict(zip(POLICY_RULE_COLUMNS, r, strict=True)) for r in policy_rule_rows("1", [p.rule(id=5012), real_rule])]
    assert [(r["policy_id"], r["id"]) for r in rows] == [("1", "5012"), ("1", "5012")]
    assert rows[1]["severity"] == "SEVERITY_CRITICAL"


# --- projects and deployments ---------------------------------------------------------------------------------


def test_real_project_list_items_parse_like_the_reference(make_client) -> None:
    real = p.project()
    real.pop("managed_scan_config")  # list items of the real service carry none
    rec = Recorder({"projects": [p.project()]}, {"projects": [real, {**real, "id": "32", "name": "org/other"}]})
    client = make_client(rec)
    [ref], real_items = client.list_projects().items, client.list_projects().items
    assert [(x.id, x.name, x.tags) for x in real_items] == [(31, "org/repo", ["team-a"]), (32, "org/other", ["team-a"])]
    assert (ref.id, ref.created_at, ref.latest_scan_at) == (
        real_items[0].id,
        real_items[0].created_at,
        real_items[0].latest_scan_at,
    )
    assert real_items[0].managed_scan_config is None


def test_real_deployments_parse_like_the_reference(make_client) -> None:
    rec = Recorder(
        {"deployments": [{"id": "120", "slug": "acme", "name": "Acme"}]},
        {"deployments": [{"id": 120, "name": "Acme", "slug": "acme", "findings": {"url": "https://x/findings"}}]},
    )
    client = make_client(rec)
    [ref], [real] = client.list_deployments(), client.list_deployments()
    assert (ref.id, ref.slug) == (real.id, real.slug) == ("120", "acme")
    assert real.model_extra["findings"] == {"url": "https://x/findings"}


# --- write bodies: project tags and the tracker field ---------------------------------------------------------


def test_tags_bodies_default_to_the_reference(make_client) -> None:
    rec = Recorder({"project": p.project()}, {"project": p.project()})
    client = make_client(rec)
    client.add_project_tags("org/repo", ["a", "b"])
    client.remove_project_tags("org/repo", ["a"])
    assert rec.json(0) == ["a", "b"]
    assert rec.requests[1].content == b""
    assert rec.query(1) == [("tags", "a")]


def test_tags_bodies_as_the_real_service_takes_them(make_client) -> None:
    rec = Recorder({"project": p.project()}, {"project": p.project()})
    client = make_client(rec, tags_body="object")
    project = client.add_project_tags("org/repo", ["a", "b"])
    client.remove_project_tags("org/repo", ["a"])
    assert project.name == "org/repo"
    assert (rec.requests[0].method, rec.requests[0].url.path) == ("PUT", SLUG + "/projects/org/repo/tags")
    assert rec.json(0) == {"tags": ["a", "b"]}
    assert rec.requests[1].method == "DELETE"
    assert rec.query(1) == [("tags", "a")]
    assert rec.requests[1].content == b""  # the tags are query keys only: a DELETE never carries a body


@pytest.mark.parametrize("tags_body", ["array", "object"])
def test_removing_tags_sends_repeated_query_keys_and_no_body(make_client, make_async_client, tags_body) -> None:
    """Whatever the tags-body form, a DELETE of tags has no body, no Content-Type, and one ``tags`` key per tag."""
    rec = Recorder({"project": p.project(tags=[])}, {"project": p.project(tags=[])})
    make_client(rec, tags_body=tags_body).remove_project_tags("org/repo", ["team a", "prod/eu", "x&y"])
    call_async(make_async_client(rec, tags_body=tags_body), "remove_project_tags", "org/repo", ["team a", "x&y"])
    for request, tags in zip(rec.requests, (["team a", "prod/eu", "x&y"], ["team a", "x&y"]), strict=True):
        assert (request.method, request.url.path) == ("DELETE", SLUG + "/projects/org/repo/tags")
        assert request.url.params.get_list("tags") == tags
        assert [key for key, _ in request.url.params.multi_items()] == ["tags"] * len(tags)
        assert request.content == b""
        assert "Content-Type" not in request.headers
        assert request.headers.get("Content-Length", "0") == "0"


def test_an_unknown_tags_body_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"tags_body 'json' is not allowed; expected 'array' .* or 'object'"):
        FindingsClient(**client_kwargs(tags_body="json"))


def test_tracker_field_as_the_real_service_names_it(make_client) -> None:
    rec = Recorder({"failed": [], "skipped": [], "succeeded": [{"ticket_id": 5, "issue_ids": [1]}]})
    result = make_client(rec, tracker_project_field="jira_project_id").create_tickets(
        issue_type="sast", issue_ids=[1], tracker_project_id="10001"
    )
    body = rec.json()
    assert body["jira_project_id"] == "10001"
    assert "tracker_project_id" not in body
    assert result.succeeded[0].ticket_id == 5


# --- the operations beyond the reference (api-notes), in both dialects -----------------------------------------
# Each test runs once per dialect with the same assertions: both answers must give the same canonical values.

DIALECTS = ["reference", "real"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_one_project_reads_the_same_from_either_dialect(make_client, dialect) -> None:
    rec = Recorder(fx.answer("project", dialect), fx.answer("project", dialect))
    client = make_client(rec)
    for project in (client.get_project("org/repo"), client.update_project("org/repo", tags=["team-a", "prod"])):
        assert (project.id, project.name, project.tags) == (31, "org/repo", ["team-a", "prod"])
        assert project.created_at == datetime(2020, 11, 18, 23, 28, 12, 391807, tzinfo=UTC)
        assert project.latest_scan_at == datetime(2020, 11, 18, 20, 46, 25, 269650, tzinfo=UTC)
        assert project.default_branch is None  # absent in one dialect, null in the other
        assert project.primary_branch == "refs/heads/main"
        config = project.managed_scan_config
        assert (config.diff_scan.enabled, config.full_scan.enabled) == (True, False)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_deleted_project_reads_the_same_from_either_dialect(make_client, dialect) -> None:
    rec = Recorder(fx.answer("project_deleted", dialect))
    assert make_client(rec).delete_project("org/repo").project_name == "org/repo"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lockfiles_read_the_same_from_either_dialect(make_client, dialect) -> None:
    last = {"lockfileSummaries": [], "hasMore": False} if dialect == "real" else {"has_more": False}
    rec = Recorder(fx.answer("lockfiles", dialect))
    client = make_client(rec)
    page = client.list_lockfiles("7")
    assert [(f.lockfilePath, f.numDependencies) for f in page.items] == [
        ("package-lock.json", 12),
        ("services/api/poetry.lock", 0),
    ]
    assert (page.hasMore, page.cursor) == (True, "2")
    rec.add(fx.answer("lockfiles", dialect), last)
    assert [f.lockfilePath for f in client.items(client.list_lockfiles, 7, page_size=2)] == [
        "package-lock.json",
        "services/api/poetry.lock",
    ]
    # the first body is {} (the supply-chain endpoints need one); a digit cursor goes back as a number
    assert [rec.json(i) for i in range(3)] == [{}, {"pageSize": 2}, {"pageSize": 2, "cursor": 2}]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sbom_export_answers_read_the_same_from_either_dialect(make_client, dialect) -> None:
    rec = Recorder(fx.answer("sbom_task", dialect), fx.answer("sbom_status", dialect))
    client = make_client(rec)
    assert client.start_sbom_export(123456).taskToken == "tt-5f1c/2=="
    state = client.get_sbom_export("tt-5f1c/2==")
    assert state.export_status is SbomExportStatus.COMPLETED
    assert (state.downloadUrl, state.errorMessage) == (fx.DOWNLOAD_URL, None)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("SBOM_EXPORT_STATUS_IN_PROGRESS", SbomExportStatus.IN_PROGRESS),
        ("in_progress", SbomExportStatus.IN_PROGRESS),
        ("SBOM_EXPORT_STATUS_FAILED", SbomExportStatus.FAILED),
        ("failed", SbomExportStatus.FAILED),
    ],
)
def test_sbom_export_statuses_of_either_dialect(status, expected) -> None:
    state = SbomExportState.model_validate({"status": status, "errorMessage": "x" if "FAIL" in status.upper() else ""})
    assert state.export_status is expected
    assert state.export_status.is_terminal is (expected is not SbomExportStatus.IN_PROGRESS)


def test_an_unknown_sbom_export_status_is_an_error_naming_it() -> None:
    state = SbomExportState.model_validate({"status": "SBOM_EXPORT_STATUS_QUEUED", "brandNew": 1})
    assert state.model_extra == {"brandNew": 1}  # the answer itself parses
    with pytest.raises(UnknownSbomExportStatusError, match="SBOM_EXPORT_STATUS_QUEUED"):
        state.export_status  # noqa: B018


@pytest.mark.parametrize("dialect", DIALECTS)
def test_ticket_link_answers_read_the_same_from_either_dialect(make_client, dialect) -> None:
    rec = Recorder(
        fx.answer("ticket_link", dialect),
        fx.answer("ticket_unlink", dialect),
        fx.answer("ticket_link_deleted", dialect),
    )
    client = make_client(rec)
    link = client.link_ticket("https://tracker.example.com/browse/SEC-12", [1001, 1002])
    assert (link.ticket_id, link.ticket_url, link.external_slug) == (
        12,
        "https://tracker.example.com/browse/SEC-12",
        "SEC-12",
    )
    assert (link.linked_issue_ids, link.replaced_issue_ids) == ([1001, 1002], [1002])
    assert client.unlink_tickets([1001, 1002]).unlinked_issue_ids == [1001, 1002]
    assert client.delete_ticket_link(12).issueIds == [1001, 1002]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_ping_reads_from_either_dialect(make_client, dialect) -> None:
    rec = Recorder(fx.answer("ping", dialect))
    assert isinstance(make_client(rec).ping(), PingResponse)
    assert (rec.last.method, rec.last.url.path) == ("GET", "/api/v1/ping")


def test_null_and_empty_values_of_the_new_answers_read_as_unset() -> None:
    """``null`` for an optional field or list, and proto-JSON's omitted empty lists, never fail a parse."""
    assert TicketLinkResult.model_validate({"ticket_id": 5, "ticket_url": None, "linked_issue_ids": None}).model_dump(
        include={"ticket_id", "ticket_url", "linked_issue_ids", "replaced_issue_ids"}
    ) == {"ticket_id": 5, "ticket_url": None, "linked_issue_ids": [], "replaced_issue_ids": []}
    assert TicketUnlinkResult.model_validate({}).unlinked_issue_ids == []
    assert LockfilesPage.model_validate({"lockfileSummaries": None, "cursor": ""}).items == []
    assert LockfilesPage.model_validate({"cursor": ""}).cursor is None
    assert Project.model_validate({"name": "org/repo", "tags": None, "id": None}).tags == []
    with pytest.raises(PydanticValidationError):
        TicketLinkResult.model_validate({"ticket_id": True})  # a boolean is never an id
