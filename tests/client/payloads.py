"""Spec-shaped response bodies (api-reference sections 2 and 4), one builder per resource."""

from __future__ import annotations

import copy
from typing import Any

#: The three timestamp shapes the service sends (api-notes), all meaning a moment in UTC.
TS_SPACE = "2020-11-18 23:28:12.391807+00:00"
TS_MILLIS_Z = "2020-11-18T23:28:12.391Z"
TS_MICROS_Z = "2020-11-18T20:46:25.269650Z"


def sast_finding(finding_id: int = 1001, **overrides: Any) -> dict[str, Any]:
    """A code finding with the common fields (2.11) and the code-only ones (2.12), plus an unknown field."""
    body: dict[str, Any] = {
        "id": finding_id,
        "categories": ["security"],
        "confidence": "high",
        "severity": "critical",
        "created_at": TS_SPACE,
        "relevant_since": TS_MILLIS_Z,
        "first_seen_scan_id": 555,
        "match_based_id": "mb-1",
        "syntactic_id": "syn-1",
        "ref": "refs/heads/main",
        "repository": {"name": "org/repo", "url": "https://git.example.com/org/repo"},
        "location": {"filePath": "app/views.py", "line": 10, "column": 4, "endLine": 12, "endColumn": 20},
        "line_of_code_url": "https://git.example.com/org/repo/blob/main/app/views.py#L10",
        "external_ticket": {
            "id": 77,
            "externalSlug": "SEC-77",
            "url": "https://tracker.example.com/SEC-77",
            "linkedIssueIds": [finding_id],
        },
        "review_comments": [{"externalDiscussionId": "d1", "externalNoteId": 3}],
        "rule": {
            "category": "security",
            "confidence": "HIGH",
            "cweNames": ["CWE-89: SQL Injection"],
            "message": "Possible SQL injection",
            "name": "python.django.security.sqli",
            "owaspNames": ["A03:2021 - Injection"],
            "subcategories": ["vuln"],
            "vulnerabilityClasses": ["SQL Injection"],
        },
        "rule_name": "python.django.security.sqli",
        "rule_message": None,
        "state": "unresolved",
        "state_updated_at": TS_MICROS_Z,
        "status": "open",
        "triage_state": "untriaged",
        "triage_reason": "",
        "triage_comment": "",
        "triaged_at": None,
        "sourcing_policy": {"id": 9, "name": "Default", "slug": "default"},
        "click_to_fix_prs": [{"created_at": TS_MICROS_Z, "url": "https://git.example.com/pr/1"}],
        "click_to_fix_failures": [{"created_at": TS_MILLIS_Z, "reason": "conflict"}],
        "assistant": {
            "autofix": {"explanation": None, "fix_code": "cursor.execute(q, params)"},
            "autotriage": {"reason": "user input reaches the query", "verdict": "true_positive"},
            "component": {"risk": "high", "tag": "web"},
            "guidance": {"instructions": None, "summary": "parametrise"},
            "rule_explanation": {"explanation": "...", "summary": "..."},
        },
        "brand_new_field": {"nested": [1, 2]},
    }
    body.update(overrides)
    return body


def sca_finding(finding_id: int = 2001, **overrides: Any) -> dict[str, Any]:
    """A supply-chain finding (2.11 and 2.13)."""
    body = sast_finding(finding_id)
    for key in (
        "sourcing_policy",
        "click_to_fix_prs",
        "click_to_fix_failures",
        "assistant",
        "brand_new_field",
    ):
        body.pop(key)
    body.update(
        {
            "epss_score": {"percentile": 0.97, "score": 0.42},
            "fix_recommendations": [{"package": "lodash", "version": "4.17.21"}],
            "found_dependency": {
                "ecosystem": "npm",
                "package": "lodash",
                "version": "4.17.15",
                "transitivity": "direct",
                "lockfile_line_url": "https://git.example.com/org/repo/blob/main/package-lock.json#L5",
            },
            "is_malicious": False,
            "reachability": "reachable",
            "reachable_condition": "",
            "usage": {
                "location": {"filePath": "src/a.js", "line": 3, "column": 1, "endLine": 3, "endColumn": 9},
                "external_ticket": {"id": 78, "externalSlug": "SEC-78", "url": "u", "linkedIssueIds": []},
            },
            "vulnerability_identifier": "CVE-2020-8203",
        }
    )
    body.update(overrides)
    return body


def scan(scan_id: str | int = "9001", **overrides: Any) -> dict[str, Any]:
    """A scan search item (2.5)."""
    body: dict[str, Any] = {
        "id": scan_id,
        "deployment_id": "42",
        "repository_id": "7",
        "branch": "main",
        "commit": "0123abcd",
        "started_at": TS_SPACE,
        "completed_at": TS_MILLIS_Z,
        "status": "SCAN_STATUS_COMPLETED",
        "exit_code": 1,
        "is_full_scan": True,
        "enabled_products": ["PRODUCT_SAST", "PRODUCT_SCA"],
        "findings_counts": {"code": 3, "secrets": 0, "supply_chain": 2, "total": 5},
        "total_time": 12.5,
    }
    body.update(overrides)
    return body


def scan_details(**overrides: Any) -> dict[str, Any]:
    """Scan details (2.6): integer ids, no status, loosely typed titles."""
    body: dict[str, Any] = {
        "id": 123,
        "deployment_id": 42,
        "repository_id": 7,
        "started_at": TS_MICROS_Z,
        "completed_at": TS_SPACE,
        "enabled_products": ["PRODUCT_SAST"],
        "exit_code": 0,
        "has_logs": True,
        "stats": {"findings": 4, "total_time": 33.3},
        "meta": {
            "branch": "main",
            "commit": "0123abcd",
            "repository": "org/repo",
            "commit_title": {"value": "Fix the login form"},
            "pull_request_id": 12,
            "pull_request_title": {"value": "Login fixes"},
            "commit_author_name": "Ada",
            "event_kind": "push",
        },
    }
    body.update(overrides)
    return body


def rule(**overrides: Any) -> dict[str, Any]:
    """A rule of a policy (2.8), as in the list response (vulnerabilityClass is a list)."""
    body: dict[str, Any] = {
        "id": "r-1",
        "path": "python.lang.security.audit.eval",
        "category": "security",
        "confidence": "CONFIDENCE_HIGH",
        "severity": "SEVERITY_HIGH",
        "source": "SOURCE_PRO",
        "policyMode": "MODE_MONITOR",
        "languages": ["python"],
        "technologies": ["django"],
        "cweCategories": [],
        "owaspCategories": ["A03:2021 - Injection"],
        "vulnerabilityClass": ["Code Injection", "Other"],
        "rulesets": [],
        "registryMaintainer": "vendor",
        "lastChangeAt": TS_MILLIS_Z,
        "url": "https://rules.example.com/python.lang.security.audit.eval",
    }
    body.update(overrides)
    return body


def policy() -> dict[str, Any]:
    return {
        "id": "9",
        "name": "Default",
        "slug": "default",
        "isDefault": True,
        "productType": "PRODUCT_TYPE_SAST",
    }


def project(name: str = "org/repo", **overrides: Any) -> dict[str, Any]:
    """A project (2.14)."""
    body: dict[str, Any] = {
        "id": 31,
        "name": name,
        "tags": ["team-a"],
        "created_at": TS_SPACE,
        "default_branch": "refs/heads/main",
        "primary_branch": "refs/heads/main",
        "latest_scan_at": TS_MICROS_Z,
        "url": f"https://findings.example.com/projects/{name}",
        "managed_scan_config": {"diff_scan": {"enabled": True}, "full_scan": {"enabled": False}},
    }
    body.update(overrides)
    return body


def copy_of(body: Any) -> Any:
    return copy.deepcopy(body)
