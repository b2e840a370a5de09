"""Helpers of the emulator's contract tests (paths, paging, error assertions)."""

from __future__ import annotations

from typing import Any

import httpx
from findings_emulator.testing import EmulatorProcess

NO_WEB_API_TOKEN = "token-without-web-api"
FINDINGS = 3000
#: The wire formats the emulator serves (``each_dialect`` runs a test in each).
DIALECTS = ("reference", "real")
ENVELOPES = {"sast": "sastFindings", "sca": "scaFindings", "ai_sast": "aiSastFindings"}

def by_slug(emulator: EmulatorProcess, suffix: str) -> str:
    """API path of an operation addressed by the deployment slug."""
    return f"/api/v1/deployments/{emulator.deployment_slug}/{suffix}"


def by_id(emulator: EmulatorProcess, suffix: str) -> str:
    """API path of an operation addressed by the deployment id."""
    return f"/api/v1/deployments/{emulator.deployment_id}/{suffix}"


def findings_page(api: httpx.Client, emulator: EmulatorProcess, **params: Any) -> list[dict[str, Any]]:
    """One page of findings of ``params['issue_type']`` (default sast), asserting a 200; either envelope (the
    real dialect's flat ``findings``, the reference's per-type one)."""
    response = api.get(by_slug(emulator, "findings"), params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    if "findings" in body:
        return list(body["findings"])
    return list(body[ENVELOPES[params.get("issue_type", "sast")]]["findings"])


def all_findings(api: httpx.Client, emulator: EmulatorProcess, **params: Any) -> list[dict[str, Any]]:
    """Every finding matching ``params``, paging with 3000-item pages until a short page."""
    items: list[dict[str, Any]] = []
    page = 0
    while True:
        batch = findings_page(api, emulator, page=page, page_size=3000, **params)
        items.extend(batch)
        if len(batch) < 3000:
            return items
        page += 1


def projects(api: httpx.Client, emulator: EmulatorProcess) -> list[dict[str, Any]]:
    """Every project (one page of 1000)."""
    response = api.get(by_slug(emulator, "projects"), params={"page_size": 1000})
    assert response.status_code == 200, response.text
    return list(response.json()["projects"])


def ticket_link(finding: dict[str, Any]) -> tuple[int, str, list[int]] | None:
    """A finding's ``external_ticket`` as (id, external slug, linked ids), whichever dialect it is in."""
    ticket = finding["external_ticket"]
    if ticket is None:
        return None
    return (ticket["id"], ticket.get("externalSlug", ticket.get("external_slug")),
            ticket.get("linkedIssueIds", ticket.get("linked_issue_ids")))


def assert_error(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    """Assert the standard error body with ``status`` and, when given, the offending ``field``."""
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str)
    assert body["error"]
    if field is not None:
        assert body["field"] == field, body
    return dict(body)
