"""Every API operation: method, exact path, query, JSON body and parsing of a spec-shaped response.

Each row runs through the sync client and, unchanged, through the async client: both must build the same
request and parse the same response (they share one definition per endpoint).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from findings_provider.client.models import (
    DependenciesPage,
    Deployment,
    Finding,
    FindingsPage,
    LockfilesPage,
    PingResponse,
    Policy,
    PolicyRulesPage,
    Project,
    ProjectDeleted,
    ProjectsPage,
    RepositoriesPage,
    Rule,
    SbomDocument,
    SbomExportState,
    SbomExportTask,
    ScanDetails,
    ScansPage,
    SecretsPage,
    TicketLinkDeleted,
    TicketLinkResult,
    TicketResult,
    TicketUnlinkResult,
    TriageResult,
    UpdatePolicyResponse,
)
from findings_provider.client.vocabulary import SbomExportStatus, ScanStatus
from present import present

from . import payloads as p
from .conftest import TOKEN, Recorder, call_async
from .fixtures import operations as fx

UTC = timezone.utc
#: The three timestamp shapes of ``payloads`` as aware UTC datetimes.
T_SPACE = datetime(2020, 11, 18, 23, 28, 12, 391807, tzinfo=UTC)
T_MILLIS = datetime(2020, 11, 18, 23, 28, 12, 391000, tzinfo=UTC)
T_MICROS = datetime(2020, 11, 18, 20, 46, 25, 269650, tzinfo=UTC)

NO_BODY = object()


def assert_utc(value: Any, expected: datetime) -> None:
    assert isinstance(value, datetime)
    assert value.tzinfo is not None
    assert value.utcoffset() == timedelta(0)
    assert value == expected


@dataclass
class Op:
    id: str
    method: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    response: Any = None
    http_method: str = "GET"
    path: str = ""
    query: list[tuple[str, str]] = field(default_factory=list)
    body: Any = NO_BODY
    check: Callable[[Any], None] = lambda result: None
    host: str = "findings.example.com"
    #: False for a link the service hands out: sent without the API token.
    authenticated: bool = True


# --- checks of the parsed results ---------------------------------------------------------------------------


def check_deployments(result: Any) -> None:
    assert isinstance(result, list)
    assert len(result) == 1
    [dep] = result
    assert isinstance(dep, Deployment)
    assert (dep.id, dep.slug, dep.name) == ("42", "acme", "Acme Inc")
    assert present(dep.model_extra)["plan"] == "enterprise"


def check_dependencies(page: Any) -> None:
    assert isinstance(page, DependenciesPage)
    assert [(d.id, d.name, d.version) for d in page.items] == [
        ("d1", "lodash", "4.17.21"),
        ("d2", "left-pad", "1.3.0"),
    ]
    assert page.items[0].ecosystem == "npm"
    assert page.items[0].model_extra == {}
    assert [d.key for d in page.items] == ["d1", "d2"]  # the service's id, when it sends one
    assert page.cursor == "8"
    assert page.hasMore is True


def check_repositories(page: Any) -> None:
    assert isinstance(page, RepositoriesPage)
    [repo] = page.items
    assert (repo.id, repo.name, repo.numDependencies, repo.hasDependencyPathScan) == (7, "org/repo", 12, True)
    assert page.cursor == "10"
    assert page.hasMore is False


def check_scans(page: Any) -> None:
    assert isinstance(page, ScansPage)
    assert page.cursor == "c-next"
    first, second = page.items
    assert first.id == "9001"
    assert first.repository_id == "7"
    assert first.deployment_id == "42"
    assert_utc(first.started_at, T_SPACE)
    assert_utc(first.completed_at, T_MILLIS)
    assert first.scan_status is ScanStatus.COMPLETED
    assert first.exit_code == 1
    assert first.is_full_scan is True
    assert first.total_time == 12.5
    assert first.enabled_products == ["PRODUCT_SAST", "PRODUCT_SCA"]
    counts = present(first.findings_counts)
    assert (counts.code, counts.supply_chain, counts.total) == (
        3,
        2,
        5,
    )
    assert_utc(second.started_at, T_MICROS)
    assert second.completed_at is None
    assert second.scan_status is ScanStatus.RUNNING
    assert second.model_extra == {"trigger": "schedule"}


def check_scan_details(details: Any) -> None:
    assert isinstance(details, ScanDetails)
    assert (details.id, details.deployment_id, details.repository_id) == ("123", "42", "7")
    assert_utc(details.started_at, T_MICROS)
    assert_utc(details.completed_at, T_SPACE)
    assert details.exit_code == 0
    assert details.has_logs is True
    assert present(details.stats).findings == 4
    assert present(details.stats).total_time == 33.3
    assert details.meta.commit_title_text == "Fix the login form"
    assert details.meta.pull_request_id == 12
    assert details.meta.model_extra == {"event_kind": "push"}
    assert details.status is ScanStatus.COMPLETED  # derived: completed_at set, exit code 0


def check_policies(result: Any) -> None:
    assert isinstance(result, list)
    [policy] = result
    assert isinstance(policy, Policy)
    assert (policy.id, policy.slug, policy.isDefault, policy.productType) == (
        "9",
        "default",
        True,
        "PRODUCT_TYPE_SAST",
    )


def check_policy_rules(page: Any) -> None:
    assert isinstance(page, PolicyRulesPage)
    assert page.cursor == "c2"
    assert present(page.policy).id == "9"
    [rule] = page.items
    assert isinstance(rule, Rule)
    assert rule.vulnerabilityClass == ["Code Injection", "Other"]
    assert rule.cweCategories == []
    assert rule.languages == ["python"]
    assert rule.policyMode == "MODE_MONITOR"
    assert_utc(rule.lastChangeAt, T_MILLIS)
    assert rule.lastChangeBy is None


def check_update(result: Any) -> None:
    assert isinstance(result, UpdatePolicyResponse)
    assert result.policyId == "9"
    rule = present(result.updatedRule)
    assert rule.vulnerabilityClass == ["Code Injection"]  # a single string in the update response
    assert rule.policyMode == "MODE_BLOCK"
    assert rule.hasValidators is False
    assert rule.secretType == "none"
    assert rule.lastChangeBy == "ada@example.com"
    assert_utc(rule.lastChangeAt, T_MICROS)


def check_tickets(result: Any) -> None:
    assert isinstance(result, TicketResult)
    assert [(f.error, f.issue_ids) for f in result.failed] == [("exceeds limit", [3])]
    assert [(s.reason, s.issue_ids) for s in result.skipped] == [("already ticketed", [4])]
    [ok] = result.succeeded
    assert (ok.ticket_id, ok.ticket_url, ok.external_slug, ok.issue_ids) == (
        77,
        "https://tracker.example.com/SEC-77",
        "SEC-77",
        [1, 2],
    )


def check_sast_page(page: Any) -> None:
    assert isinstance(page, FindingsPage)
    assert [f.id for f in page.items] == [1001, 1002]
    f = page.items[0]
    assert isinstance(f, Finding)
    assert_utc(f.created_at, T_SPACE)
    assert_utc(f.relevant_since, T_MILLIS)
    assert_utc(f.state_updated_at, T_MICROS)
    assert f.triaged_at is None
    assert f.severity == "critical"
    assert f.status == "open"
    assert f.triage_state == "untriaged"
    assert present(f.repository).name == "org/repo"
    location = present(f.location)
    assert (location.filePath, location.line, location.endColumn) == ("app/views.py", 10, 20)
    assert f.ticket_id == 77
    assert present(f.external_ticket).linkedIssueIds == [1001]
    assert present(f.rule).cweNames == ["CWE-89: SQL Injection"]
    assert f.autotriage_verdict == "true_positive"
    assert f.sourcing_policy == {"id": 9, "name": "Default", "slug": "default"}
    assert f.model_extra == {"brand_new_field": {"nested": [1, 2]}}


def check_sca_page(page: Any) -> None:
    assert isinstance(page, FindingsPage)
    [f] = page.items
    assert f.id == 2001
    assert present(f.found_dependency)["transitivity"] == "direct"
    assert f.epss_score == {"percentile": 0.97, "score": 0.42}
    assert f.reachability == "reachable"
    assert f.is_malicious is False
    assert f.vulnerability_identifier == "CVE-2020-8203"
    assert f.autotriage_verdict is None
    assert_utc(f.relevant_since, T_MILLIS)


def check_project(result: Any) -> None:
    assert isinstance(result, Project)
    assert result.name == "org/repo"
    assert result.id == 31
    assert present(present(result.managed_scan_config).diff_scan).enabled is True
    assert present(present(result.managed_scan_config).full_scan).enabled is False
    assert_utc(result.created_at, T_SPACE)
    assert_utc(result.latest_scan_at, T_MICROS)


def check_tagged_project(result: Any) -> None:
    check_project(result)
    assert result.tags == ["team-a", "prod"]


def check_projects_page(page: Any) -> None:
    assert isinstance(page, ProjectsPage)
    assert [pr.name for pr in page.items] == ["org/repo", "org/other"]
    assert_utc(page.items[0].created_at, T_SPACE)


def check_triage(result: Any) -> None:
    assert isinstance(result, TriageResult)
    assert result.num_triaged == 3
    assert result.triaged_issues == [1, 2, 99]


def check_secrets(page: Any) -> None:
    assert isinstance(page, SecretsPage)
    assert page.cursor == "s2"
    [f] = page.items
    assert f.id == 3001
    assert present(f.model_extra)["secret_type"] == "aws"
    assert_utc(f.created_at, T_SPACE)


def check_ping(result: Any) -> None:
    assert isinstance(result, PingResponse)
    assert result.model_extra == {"version": "v1"}


def check_project_deleted(result: Any) -> None:
    assert isinstance(result, ProjectDeleted)
    assert result.project_name == "org/repo"


def check_lockfiles(page: Any) -> None:
    assert isinstance(page, LockfilesPage)
    assert [(f.lockfilePath, f.numDependencies) for f in page.items] == [
        ("package-lock.json", 12),
        ("services/api/poetry.lock", 0),
    ]
    assert (page.hasMore, page.cursor) == (True, "2")
    assert page.items[1].model_extra == {"ecosystem": "pypi"}


def check_sbom_task(result: Any) -> None:
    assert isinstance(result, SbomExportTask)
    assert result.taskToken == "tt-5f1c/2=="


def check_sbom_status(result: Any) -> None:
    assert isinstance(result, SbomExportState)
    assert result.export_status is SbomExportStatus.COMPLETED
    assert result.export_status.is_terminal
    assert result.downloadUrl == fx.DOWNLOAD_URL
    assert result.errorMessage is None  # "" is proto-JSON's unset string


def check_sbom_document(result: Any) -> None:
    assert isinstance(result, SbomDocument)
    assert (result.bomFormat, result.specVersion, result.version) == ("CycloneDX", "1.6", 1)
    assert [c["name"] for c in result.components] == ["pkg-0", "pkg-1"]
    assert present(result.metadata)["component"]["name"] == "org/repo"


def check_ticket_link(result: Any) -> None:
    assert isinstance(result, TicketLinkResult)
    assert (result.ticket_id, result.ticket_url, result.external_slug) == (
        12,
        "https://tracker.example.com/browse/SEC-12",
        "SEC-12",
    )
    assert (result.linked_issue_ids, result.replaced_issue_ids) == ([1001, 1002], [1002])


def check_ticket_unlink(result: Any) -> None:
    assert isinstance(result, TicketUnlinkResult)
    assert result.unlinked_issue_ids == [1001, 1002]


def check_ticket_link_deleted(result: Any) -> None:
    assert isinstance(result, TicketLinkDeleted)
    assert result.issueIds == [1001, 1002]


# --- the table ----------------------------------------------------------------------------------------------

DEP = "/api/v1/deployments/42"
SLUG = "/api/v1/deployments/acme"

OPS = [
    Op(
        "list_deployments",
        "list_deployments",
        response={"deployments": [{"id": 42, "slug": "acme", "name": "Acme Inc", "plan": "enterprise"}]},
        path="/api/v1/deployments",
        check=check_deployments,
    ),
    Op(
        "list_dependencies",
        "list_dependencies",
        kwargs={
            "cursor": "7",
            "page_size": 500,
            "dependency_filter": {
                "name": "lodash",
                "license": ["MIT"],
                "repositoryId": [7, 8],
                "packageFilters": [{"name": "lodash", "exactNameMatch": True, "versionLowerBound": "4.0.0"}],
            },
        },
        response={
            "dependencies": [
                {"id": "d1", "name": "lodash", "version": "4.17.21", "ecosystem": "npm"},
                {"id": "d2", "name": "left-pad", "version": "1.3.0"},
            ],
            "cursor": "8",
            "hasMore": True,
        },
        http_method="POST",
        path=DEP + "/dependencies",
        body={
            "cursor": "7",
            "dependencyFilter": {
                "name": "lodash",
                "license": ["MIT"],
                "repositoryId": [7, 8],
                "packageFilters": [{"name": "lodash", "exactNameMatch": True, "versionLowerBound": "4.0.0"}],
            },
            "deploymentId": "42",
            "pageSize": 500,
        },
        check=check_dependencies,
    ),
    Op(
        "list_repositories_with_dependencies",
        "list_repositories_with_dependencies",
        kwargs={"cursor": 5, "page_size": 100},
        response={
            "cursor": 10,
            "hasMore": False,
            "repositorySummaries": [
                {"hasDependencyPathScan": True, "id": 7, "name": "org/repo", "numDependencies": 12}
            ],
        },
        http_method="POST",
        path=DEP + "/dependencies/repositories",
        body={"cursor": 5, "deploymentId": "42", "pageSize": 100},
        check=check_repositories,
    ),
    Op(
        "search_scans",
        "search_scans",
        kwargs={
            "since": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
            "statuses": ["SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR"],
            "repository_id": 7,
            "branch": "main",
            "is_full_scan": True,
            "products": ["PRODUCT_SAST", "PRODUCT_SCA"],
            "total_time": {"min": 1, "max": 60},
            "limit": 50,
            "cursor": "c1",
        },
        response={
            "scans": [
                p.scan(),
                p.scan(
                    "9002",
                    started_at=p.TS_MICROS_Z,
                    completed_at=None,
                    status="SCAN_STATUS_RUNNING",
                    trigger="schedule",
                ),
            ],
            "cursor": "c-next",
        },
        http_method="POST",
        path=DEP + "/scans/search",
        body={
            "branch": "main",
            "cursor": "c1",
            "deploymentId": "42",
            "is_full_scan": 1,
            "limit": 50,
            "products": ["PRODUCT_SAST", "PRODUCT_SCA"],
            "repository_id": 7,
            "since": "2024-01-02T03:04:05.000000Z",
            "statuses": ["SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR"],
            "total_time": {"min": 1.0, "max": 60.0},
        },
        check=check_scans,
    ),
    Op(
        "get_scan",
        "get_scan",
        args=(123,),
        response=p.scan_details(),
        path=DEP + "/scan/123",
        check=check_scan_details,
    ),
    Op(
        "list_policies",
        "list_policies",
        response={"policies": [p.policy()]},
        path=DEP + "/policies",
        check=check_policies,
    ),
    Op(
        "list_policy_rules",
        "list_policy_rules",
        args=(9,),
        kwargs={"cursor": "c1", "limit": 2000},
        response={"cursor": "c2", "policy": p.policy(), "rules": [p.rule()]},
        path=DEP + "/policies/9",
        query=[("cursor", "c1"), ("limit", "2000")],
        check=check_policy_rules,
    ),
    Op(
        "update_rule_mode",
        "update_rule_mode",
        args=("9", "python.lang.security.audit.eval", "MODE_BLOCK"),
        response={
            "policyId": "9",
            "updatedRule": p.rule(
                vulnerabilityClass="Code Injection",
                policyMode="MODE_BLOCK",
                hasValidators=False,
                secretType="none",
                lastChangeBy="ada@example.com",
                lastChangeAt=p.TS_MICROS_Z,
            ),
        },
        http_method="PUT",
        path=DEP + "/policies/9",
        body={
            "deploymentId": "42",
            "policyId": "9",
            "policyMode": "MODE_BLOCK",
            "rulePath": "python.lang.security.audit.eval",
        },
        check=check_update,
    ),
    Op(
        "create_tickets",
        "create_tickets",
        kwargs={"issue_type": "sast", "issue_ids": [1, 2], "tracker_project_id": "100", "limit": 5},
        response={
            "failed": [{"error": "exceeds limit", "issue_ids": [3]}],
            "skipped": [{"reason": "already ticketed", "issue_ids": [4]}],
            "succeeded": [
                {
                    "ticket_id": 77,
                    "ticket_url": "https://tracker.example.com/SEC-77",
                    "external_slug": "SEC-77",
                    "issue_ids": [1, 2],
                }
            ],
        },
        http_method="POST",
        path=SLUG + "/tickets",
        body={
            "issue_type": "sast",
            "deploymentSlug": "acme",
            "issue_ids": ["1", "2"],
            "group_issues": True,
            "tracker_project_id": "100",
            "limit": 5,
        },
        check=check_tickets,
    ),
    Op(
        "list_findings_sast",
        "list_findings",
        args=("sast",),
        kwargs={
            "page": 2,
            "page_size": 500,
            "since": 1700000000.5,
            "dedup": True,
            "repos": ["org/a", "org/b"],
            "repository_ids": [1, 2],
            "status": "ignored",
            "triage_reasons": ["false_positive", "no_time"],
            "severities": ["high", "critical"],
            "ref": "refs/heads/main",
            "policies": ["rule-board-block", "rule-board-audit"],
            "rules": ["r.one", "r.two"],
            "categories": ["security"],
            "confidence": "high",
            "autotriage_verdict": "true_positive",
            "component_tags": ["web", "auth"],
            "click_to_fix_pr_state": ["open", "merged"],
        },
        response={"sastFindings": {"findings": [p.sast_finding(1001), p.sast_finding(1002)]}},
        path=SLUG + "/findings",
        query=sorted(
            [
                ("issue_type", "sast"),
                ("page", "2"),
                ("page_size", "500"),
                ("since", "1700000000.5"),
                ("dedup", "true"),
                ("repos", "org/a"),
                ("repos", "org/b"),
                ("repository_ids", "1"),
                ("repository_ids", "2"),
                ("status", "ignored"),
                ("triage_reasons", "false_positive"),
                ("triage_reasons", "no_time"),
                ("severities", "high"),
                ("severities", "critical"),
                ("ref", "refs/heads/main"),
                ("policies", "rule-board-block"),
                ("policies", "rule-board-audit"),
                ("rules", "r.one"),
                ("rules", "r.two"),
                ("categories", "security"),
                ("confidence", "high"),
                ("autotriage_verdict", "true_positive"),
                ("component_tags", "web"),
                ("component_tags", "auth"),
                ("click_to_fix_pr_state", "open"),
                ("click_to_fix_pr_state", "merged"),
            ]
        ),
        check=check_sast_page,
    ),
    Op(
        "list_findings_sca",
        "list_findings",
        args=("sca",),
        kwargs={
            "exposures": ["reachable", "always_reachable"],
            "transitivities": ["direct"],
            "is_malicious": False,
            "dedup": False,
        },
        response={"findings": [p.sca_finding(2001)]},
        path=SLUG + "/findings",
        query=sorted(
            [
                ("issue_type", "sca"),
                ("page", "0"),
                ("page_size", "100"),
                ("dedup", "false"),
                ("exposures", "reachable"),
                ("exposures", "always_reachable"),
                ("transitivities", "direct"),
                ("is_malicious", "false"),
            ]
        ),
        check=check_sca_page,
    ),
    Op(
        "set_managed_scans",
        "set_managed_scans",
        args=("org/repo",),
        kwargs={"diff_scan": True, "full_scan": False},
        response={"project": p.project()},
        http_method="PATCH",
        path=SLUG + "/projects/org/repo/managed-scan",
        body={
            "deploymentSlug": "acme",
            "projectName": "org/repo",
            "diff_scan": {"enabled": True},
            "full_scan": {"enabled": False},
        },
        check=check_project,
    ),
    Op(
        "bulk_triage",
        "bulk_triage",
        kwargs={
            "issue_type": "sast",
            "issue_ids": [1, 2],
            "new_triage_state": "ignored",
            "new_triage_reason": "false_positive",
            "new_note": "autotriage verdict false_positive (run r1)",
            "limit": 10,
        },
        response={"num_triaged": 3, "triaged_issues": [1, 2, 99]},
        http_method="POST",
        path=SLUG + "/triage",
        body={
            "issue_type": "sast",
            "deploymentSlug": "acme",
            "issue_ids": [1, 2],
            "limit": 10,
            "new_note": "autotriage verdict false_positive (run r1)",
            "new_triage_reason": "false_positive",
            "new_triage_state": "ignored",
        },
        check=check_triage,
    ),
    Op(
        "add_project_tags",
        "add_project_tags",
        args=("org/repo", ["team-a", "prod"]),
        response={"project": p.project(tags=["team-a", "prod"])},
        http_method="PUT",
        path=SLUG + "/projects/org/repo/tags",
        body=["team-a", "prod"],
        check=check_tagged_project,
    ),
    Op(
        "remove_project_tags",
        "remove_project_tags",
        args=("org/repo", ("old", "legacy")),
        response={"project": p.project(tags=["team-a", "prod"])},
        http_method="DELETE",
        path=SLUG + "/projects/org/repo/tags",
        query=[("tags", "legacy"), ("tags", "old")],
        check=check_tagged_project,
    ),
    Op(
        "list_projects",
        "list_projects",
        kwargs={"page": 1, "page_size": 50},
        response={"projects": [p.project(), p.project("org/other")]},
        path=SLUG + "/projects",
        query=[("page", "1"), ("page_size", "50")],
        check=check_projects_page,
    ),
    Op(
        "list_secrets",
        "list_secrets",
        kwargs={"cursor": "s1", "limit": 50},
        response={"findings": [{"id": 3001, "created_at": p.TS_SPACE, "secret_type": "aws"}], "cursor": "s2"},
        path=DEP + "/secrets",
        query=[("cursor", "s1"), ("limit", "50")],
        check=check_secrets,
    ),
    # --- the operations of api-notes beyond the reference ---
    Op("ping", "ping", response=fx.ping_real(), path="/api/v1/ping", check=check_ping),
    Op(
        "get_project",
        "get_project",
        args=("org/repo",),
        response={"project": p.project()},
        path=SLUG + "/projects/org/repo",
        check=check_project,
    ),
    Op(
        "update_project",
        "update_project",
        args=("org/repo",),
        kwargs={"tags": ("team-a", "prod"), "primary_branch": "refs/heads/develop", "diff_scan": True,
                "full_scan": False},
        response={"project": p.project(tags=["team-a", "prod"])},
        http_method="PATCH",
        path=SLUG + "/projects/org/repo",
        body={
            "tags": ["team-a", "prod"],
            "primary_branch": "refs/heads/develop",
            "managed_scan_config": {"diff_scan": {"enabled": True}, "full_scan": {"enabled": False}},
        },
        check=check_tagged_project,
    ),
    Op(
        "delete_project",
        "delete_project",
        args=("org/repo",),
        response=fx.project_deleted_real(),
        http_method="DELETE",
        path=SLUG + "/projects/org/repo",
        check=check_project_deleted,
    ),
    Op(
        "list_lockfiles",
        "list_lockfiles",
        args=(7,),
        kwargs={"cursor": "3", "page_size": 50},
        response=fx.lockfiles_real(),
        http_method="POST",
        path=DEP + "/dependencies/repositories/7/lockfiles",
        body={"cursor": 3, "pageSize": 50},
        check=check_lockfiles,
    ),
    Op(
        "start_sbom_export",
        "start_sbom_export",
        args=(123456,),
        kwargs={
            "cyclonedx_version": "1.5",
            "ref": "refs/heads/main",
            "metadata_component_type": "library",
            "metadata_supplier": {"name": "Acme", "url": "https://acme.example.com",
                                  "contact": {"name": "Ada", "email": "sec@acme.example.com"}},
        },
        response=fx.sbom_task_real(),
        http_method="POST",
        path=DEP + "/sbom/export",
        body={
            "repositoryId": "123456",
            "ref": "refs/heads/main",
            "formatVersion": {"format": "SBOM_FORMAT_CYCLONEDX", "cyclonedxVersion": "SBOM_CYCLONE_DX_VERSION_V1_5"},
            "metadataComponentType": "SBOM_METADATA_COMPONENT_TYPE_CYCLONE_DX_V15_LIBRARY",
            "metadataSupplier": {"name": "Acme", "url": "https://acme.example.com",
                                 "contact": {"name": "Ada", "email": "sec@acme.example.com"}},
        },
        check=check_sbom_task,
    ),
    Op(
        "get_sbom_export",
        "get_sbom_export",
        args=("tt-5f1c/2==",),
        response=fx.sbom_status_real(),
        path=DEP + "/sbom/export/tt-5f1c%2F2%3D%3D",
        check=check_sbom_status,
    ),
    Op(
        "download_sbom",
        "download_sbom",
        args=(fx.DOWNLOAD_URL,),
        response=fx.cyclonedx(),
        host="downloads.example.net",
        path="/sbom/7f3a.json",
        query=[("X-Signature", "abc+def"), ("expires", "1700000600")],
        authenticated=False,
        check=check_sbom_document,
    ),
    Op(
        "link_ticket",
        "link_ticket",
        args=("https://tracker.example.com/browse/SEC-12", [1001, 1002]),
        response=fx.ticket_link_real(),
        http_method="POST",
        path=DEP + "/tickets/link",
        body={"ticket_url": "https://tracker.example.com/browse/SEC-12", "issue_ids": ["1001", "1002"]},
        check=check_ticket_link,
    ),
    Op(
        "unlink_tickets",
        "unlink_tickets",
        args=([1001, "1002"],),
        response=fx.ticket_unlink_real(),
        http_method="POST",
        path=DEP + "/tickets/unlink",
        body={"issue_ids": ["1001", "1002"]},
        check=check_ticket_unlink,
    ),
    Op(
        "delete_ticket_link",
        "delete_ticket_link",
        args=(12,),
        response=fx.ticket_link_deleted_real(),
        http_method="DELETE",
        path=DEP + "/ticketing/v2/tickets/12",
        check=check_ticket_link_deleted,
    ),
]


def assert_request(rec: Recorder, op: Op) -> None:
    assert rec.count == 1, [str(r.url) for r in rec.requests]
    request = rec.last
    assert request.method == op.http_method
    assert request.url.scheme == "https"
    assert request.url.host == op.host
    raw_path = request.url.raw_path.decode().split("?")[0]
    assert raw_path == op.path
    assert sorted(request.url.params.multi_items()) == op.query
    if op.authenticated:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    else:  # a link the service handed out: the token never goes there
        assert "Authorization" not in request.headers
        assert TOKEN not in str(request.headers) + str(request.url)
    if op.body is NO_BODY:
        assert request.content == b""
    else:
        assert request.headers["Content-Type"] == "application/json"
        assert json.loads(request.content) == op.body


@pytest.mark.parametrize("op", OPS, ids=[op.id for op in OPS])
def test_operation_sync(op: Op, make_client) -> None:
    rec = Recorder(op.response)
    result = getattr(make_client(rec), op.method)(*op.args, **op.kwargs)
    assert_request(rec, op)
    op.check(result)


@pytest.mark.parametrize("op", OPS, ids=[op.id for op in OPS])
def test_operation_async(op: Op, make_async_client) -> None:
    rec = Recorder(op.response)
    result = call_async(make_async_client(rec), op.method, *op.args, **op.kwargs)
    assert_request(rec, op)
    op.check(result)


def test_every_endpoint_has_a_row() -> None:
    """The table covers every endpoint definition (a new endpoint needs a row)."""
    from findings_provider.client import ENDPOINTS

    covered = {
        "list_deployments": "deployments",
        "list_dependencies": "dependencies",
        "list_repositories_with_dependencies": "dependency_repositories",
        "search_scans": "scans_search",
        "get_scan": "scan_get",
        "list_policies": "policies_list",
        "list_policy_rules": "policy_rules",
        "update_rule_mode": "policy_update",
        "create_tickets": "tickets",
        "list_findings": "findings",
        "set_managed_scans": "managed_scan",
        "bulk_triage": "triage",
        "add_project_tags": "tags_add",
        "remove_project_tags": "tags_remove",
        "list_projects": "projects",
        "list_secrets": "secrets",
        "ping": "ping",
        "get_project": "project_get",
        "update_project": "project_update",
        "delete_project": "project_delete",
        "list_lockfiles": "lockfiles",
        "start_sbom_export": "sbom_export",
        "get_sbom_export": "sbom_export_status",
        "download_sbom": "sbom_download",
        "link_ticket": "ticket_link",
        "unlink_tickets": "ticket_unlink",
        "delete_ticket_link": "ticket_link_delete",
    }
    assert {covered[op.method] for op in OPS} == set(ENDPOINTS)


# --- paths: deployment id vs slug, and project names --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw_path"),
    [
        ("org/repo", SLUG + "/projects/org/repo/tags"),
        ("org/sub/repo", SLUG + "/projects/org/sub/repo/tags"),
        ("org/my repo#1", SLUG + "/projects/org/my%20repo%231/tags"),
    ],
)
def test_project_names_keep_slashes_and_encode_the_rest(name: str, raw_path: str, make_client) -> None:
    rec = Recorder({"project": p.project(name)})
    make_client(rec).add_project_tags(name, ["x"])
    assert rec.last.url.raw_path.decode() == raw_path


def test_slug_is_percent_encoded_in_paths(make_client) -> None:
    rec = Recorder({"findings": []})
    make_client(rec, deployment_slug="a b/c").list_findings()
    assert rec.last.url.raw_path.decode().split("?")[0] == "/api/v1/deployments/a%20b%2Fc/findings"


def test_base_url_path_prefix_is_kept(make_client) -> None:
    rec = Recorder({"policies": []})
    make_client(rec, base_url="https://findings.example.com/prefix/").list_policies()
    assert rec.last.url.raw_path.decode() == "/prefix/api/v1/deployments/42/policies"


def test_ticket_tracker_field_renamed(make_client) -> None:
    rec = Recorder({"failed": [], "skipped": [], "succeeded": []})
    make_client(rec, tracker_project_field="brandtracker_project_id").create_tickets(
        issue_type="sca", repos=["org/repo"], tracker_project_id="55"
    )
    body = rec.json()
    assert body["brandtracker_project_id"] == "55"
    assert "tracker_project_id" not in body
    assert body["repos"] == ["org/repo"]
    assert "issue_ids" not in body


def test_bulk_triage_with_filters_sends_them_and_epoch_string_since(make_client) -> None:
    from findings_provider.client import TriageRequest

    rec = Recorder({"num_triaged": 0, "triaged_issues": []})
    request = TriageRequest(
        issue_type="sast",
        autotriage_verdict="false_positive",
        status="open",
        since=datetime(2024, 1, 1, tzinfo=UTC),
        new_triage_state="reviewing",
    )
    result = make_client(rec).bulk_triage(request)
    assert result.num_triaged == 0
    assert rec.json() == {
        "issue_type": "sast",
        "deploymentSlug": "acme",
        "autotriage_verdict": "false_positive",
        "status": "open",
        "since": "1704067200",
        "limit": 3000,
        "new_triage_state": "reviewing",
    }


def test_missing_deployment_slug_is_resolved_from_the_deployment_list(make_client) -> None:
    rec = Recorder(
        {"deployments": [{"deploymentId": "41", "deploymentSlug": "other"}, {"id": 42, "slug": "acme"}]},
        {"findings": []},
    )
    client = make_client(rec, deployment_slug=None)
    client.list_findings()
    assert [r.url.path for r in rec.requests] == ["/api/v1/deployments", "/api/v1/deployments/acme/findings"]
    assert client.deployment_slug == "acme"


def test_missing_deployment_id_is_resolved_by_the_async_client(make_async_client) -> None:
    rec = Recorder({"deployments": [{"id": 42, "slug": "acme"}]}, {"policies": []})
    client = make_async_client(rec, deployment_id=None)
    assert call_async(client, "list_policies") == []
    assert [r.url.path for r in rec.requests] == ["/api/v1/deployments", "/api/v1/deployments/42/policies"]
    assert client.deployment_id == "42"


def test_unresolvable_deployment_is_a_configuration_error(make_client) -> None:
    from findings_provider.client import ConfigurationError

    rec = Recorder({"deployments": [{"id": 1, "slug": "one"}, {"id": 2, "slug": "two"}]})
    with pytest.raises(ConfigurationError, match=r"cannot resolve the deployment.*1/one, 2/two"):
        make_client(rec, deployment_id=None, deployment_slug="acme").get_scan(5)
    assert rec.count == 1


def test_every_response_model_keeps_unknown_fields() -> None:
    """Every endpoint answers into an ``ApiModel`` (unknown fields kept, never an error: the API is experimental)."""
    from findings_provider.client import ENDPOINTS
    from findings_provider.client.models import ApiModel

    assert [name for name, endpoint in ENDPOINTS.items() if not issubclass(endpoint.response, ApiModel)] == []
