"""Helpers of the emulator's contract tests (paths, paging, error assertions)."""

from __future__ import annotations

from typing import Any

import httpx
from findings_emulator.testing import EmulatorProcess

NO_WEB_API_TOKEN = "token-without-web-api"
FINDINGS = 3000

def by_slug(emulator: EmulatorProcess, suffix: str) -> str:
    """API path of an operation addressed by the deployment slug."""
    return f"/api/v1/deployments/{emulator.deployment_slug}/{suffix}"


def by_id(emulator: EmulatorProcess, suffix: str) -> str:
    """API path of an operation addressed by the deployment id."""
    return f"/api/v1/deployments/{emulator.deployment_id}/{suffix}"


def findings_page(api: httpx.Client, emulator: EmulatorProcess, **params: Any) -> list[dict[str, Any]]:
    """One page of findings of ``params['issue_type']`` (default sast), asserting a 200."""
    response = api.get(by_slug(emulator, "findings"), params=params)
    assert response.status_code == 200, response.text
    key = "scaFindings" if params.get("issue_type") == "sca" else "sastFindings"
    return list(response.json()[key]["findings"])


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


def assert_error(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    """Assert the standard error body with ``status`` and, when given, the offending ``field``."""
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str)
    assert body["error"]
    if field is not None:
        assert body["field"] == field, body
    return dict(body)
