"""Authentication, deployments, routing, error shape and the OpenAPI document."""

from __future__ import annotations

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import NO_WEB_API_TOKEN, assert_error, by_id, by_slug

SPEC_OPERATIONS = {
    ("post", "/api/v1/deployments/{deploymentId}/dependencies"),
    ("post", "/api/v1/deployments/{deploymentId}/dependencies/repositories"),
    ("post", "/api/v1/deployments/{deploymentId}/scans/search"),
    ("get", "/api/v1/deployments/{deploymentId}/scan/{scanId}"),
    ("get", "/api/v1/deployments/{deploymentId}/policies/{policyId}"),
    ("put", "/api/v1/deployments/{deploymentId}/policies/{policyId}"),
    ("post", "/api/v1/deployments/{deploymentSlug}/tickets"),
    ("get", "/api/v1/deployments/{deploymentSlug}/findings"),
    ("patch", "/api/v1/deployments/{deploymentSlug}/projects/{projectName}/managed-scan"),
    ("post", "/api/v1/deployments/{deploymentSlug}/triage"),
    ("put", "/api/v1/deployments/{deploymentSlug}/projects/{projectName}/tags"),
    ("delete", "/api/v1/deployments/{deploymentSlug}/projects/{projectName}/tags"),
    ("get", "/api/v1/deployments/{deploymentId}/secrets"),
    ("get", "/api/v1/deployments"),
    ("get", "/api/v1/deployments/{deploymentId}/policies"),
    ("get", "/api/v1/deployments/{deploymentSlug}/projects"),
    # the real service's operations beyond the reference
    ("get", "/api/v1/ping"),
    ("get", "/api/v1/deployments/{deploymentSlug}/projects/{projectName}"),
    ("patch", "/api/v1/deployments/{deploymentSlug}/projects/{projectName}"),
    ("delete", "/api/v1/deployments/{deploymentSlug}/projects/{projectName}"),
    ("post", "/api/v1/deployments/{deploymentId}/dependencies/repositories/{repositoryId}/lockfiles"),
    ("post", "/api/v1/deployments/{deploymentId}/sbom/export"),
    ("get", "/api/v1/deployments/{deploymentId}/sbom/export/{taskToken}"),
    ("post", "/api/v1/deployments/{deploymentId}/tickets/link"),
    ("post", "/api/v1/deployments/{deploymentId}/tickets/unlink"),
    ("delete", "/api/v1/deployments/{deploymentId}/ticketing/v2/tickets/{externalTicketId}"),
}


def test_openapi_lists_every_spec_operation(emulator: EmulatorProcess) -> None:
    document = httpx.get(f"{emulator.base_url}/openapi.json").json()
    served = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert served >= SPEC_OPERATIONS, SPEC_OPERATIONS - served
    assert not any(path.startswith("/_emulator") for path in document["paths"])


def test_deployments_lists_the_served_deployment(api: httpx.Client, emulator: EmulatorProcess) -> None:
    response = api.get("/api/v1/deployments")
    assert response.status_code == 200
    assert response.json() == {"deployments": [{
        "id": emulator.deployment_id, "deploymentId": emulator.deployment_id, "name": "Acme",
        "slug": emulator.deployment_slug, "deploymentSlug": emulator.deployment_slug}]}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic abc"},
                                     {"Authorization": "Bearer"}])
def test_missing_or_unknown_token_is_401(emulator: EmulatorProcess, headers: dict[str, str]) -> None:
    response = httpx.get(f"{emulator.base_url}{by_slug(emulator, 'findings')}", headers=headers)
    assert_error(response, 401, "Authorization")
    assert response.headers["www-authenticate"] == "Bearer"


def test_token_without_web_api_access_is_404_with_an_actionable_message(emulator: EmulatorProcess) -> None:
    response = httpx.get(f"{emulator.base_url}/api/v1/deployments",
                         headers={"Authorization": f"Bearer {NO_WEB_API_TOKEN}"})
    body = assert_error(response, 404)
    assert "Web API access" in body["error"]


def test_token_never_appears_in_the_request_log(api: httpx.Client, emulator: EmulatorProcess) -> None:
    api.get("/api/v1/deployments")
    assert emulator.token not in str(emulator.requests())


@pytest.mark.parametrize("path", [
    "/api/v1/deployments/acme/scan/5000001",  # the slug where the id belongs
    "/api/v1/deployments/2/policies",
    "/api/v1/deployments/1/findings",  # the id where the slug belongs
    "/api/v1/deployments/other/projects",
])
def test_wrong_deployment_in_path_is_404(api: httpx.Client, path: str) -> None:
    assert_error(api.get(path), 404)


def test_unknown_route_uses_the_error_shape(api: httpx.Client) -> None:
    assert_error(api.get("/api/v1/nothing-here"), 404)


def test_invalid_json_body_is_400_naming_the_body(api: httpx.Client, emulator: EmulatorProcess) -> None:
    response = api.post(by_id(emulator, "scans/search"), content=b"{not json",
                        headers={"Content-Type": "application/json"})
    assert_error(response, 400, "body")


def test_wrong_type_is_400_naming_the_field(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert_error(api.get(by_slug(emulator, "findings"), params={"page": "first"}), 400, "page")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"},
                                     {"Authorization": "Bearer test-token"}],
                         ids=["no-token", "unknown-token", "token"])
def test_ping_answers_empty_with_or_without_a_token(each_dialect: EmulatorProcess, headers: dict[str, str]) -> None:
    """A liveness check: ``{}`` whatever the token (none needed, one sent is not checked)."""
    seq = max((r["seq"] for r in each_dialect.requests()), default=0)
    response = httpx.get(f"{each_dialect.base_url}/api/v1/ping", headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {}
    (logged,) = [r for r in each_dialect.requests(seq) if r["operation"] == "ping"]
    assert logged["authorization_sent"] is bool(headers)
    # no deployment in its path: under a deployment there is no such route
    assert_error(httpx.get(f"{each_dialect.base_url}{by_slug(each_dialect, 'ping')}", headers=headers), 404)
