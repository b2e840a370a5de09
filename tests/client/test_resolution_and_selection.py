"""Deployment resolution, selection guards and request-model errors."""

from __future__ import annotations

import pytest
from findings_provider.client import ConfigurationError, FindingsApiError, TriageRequest, ValidationError

from .conftest import Recorder

DEPLOYMENTS = {"deployments": [{"id": "42", "slug": "acme"}, {"id": "43", "slug": "other"}]}


def test_wrong_slug_for_the_configured_id_is_refused(make_client):
    rec = Recorder(DEPLOYMENTS)
    client = make_client(rec, deployment_id="42", deployment_slug="not-acme")
    with pytest.raises(ConfigurationError, match="cannot resolve the deployment"):
        client.resolve_deployment()


def test_missing_slug_is_resolved_from_the_id(make_client):
    rec = Recorder(DEPLOYMENTS, {"sastFindings": {"findings": []}, "scaFindings": {"findings": []}})
    client = make_client(rec, deployment_id="43", deployment_slug=None)
    client.list_findings("sast")
    assert rec.requests[1].url.path == "/api/v1/deployments/other/findings"


def test_only_deployment_is_adopted_when_none_is_configured(make_client):
    rec = Recorder({"deployments": [{"deploymentId": "7", "deploymentSlug": "solo"}]})
    client = make_client(rec, deployment_id=None, deployment_slug=None)
    assert client.resolve_deployment().slug == "solo"
    assert (client.deployment_id, client.deployment_slug) == ("7", "solo")


def test_two_deployments_and_none_configured_is_ambiguous(make_client):
    client = make_client(Recorder(DEPLOYMENTS), deployment_id=None, deployment_slug=None)
    with pytest.raises(ConfigurationError, match="42/acme, 43/other"):
        client.resolve_deployment()


@pytest.mark.parametrize("flags", [{"include_historical": True}, {"pro_only": False}])
def test_neutral_flags_alone_are_not_a_selection(make_client, flags):
    rec = Recorder()
    client = make_client(rec)
    with pytest.raises(ValidationError, match="neither issue_ids nor any filter"):
        client.bulk_triage(issue_type="secrets", new_triage_state="reviewing", **flags)
    assert rec.count == 0


@pytest.mark.parametrize("flags", [{"include_historical": False}, {"pro_only": True}])
def test_narrowing_flags_are_a_selection(make_client, flags):
    rec = Recorder({"num_triaged": 0, "triaged_issues": []})
    make_client(rec).bulk_triage(issue_type="sast", new_triage_state="reviewing", **flags)
    assert rec.json() == {"issue_type": "sast", "limit": 3000, "new_triage_state": "reviewing",
                          "deploymentSlug": "acme", **flags}


def test_request_model_built_directly_raises_the_client_error():
    with pytest.raises(FindingsApiError) as info:
        TriageRequest(issue_type="sast", issue_ids=[1], new_triage_state="ignored", limit=3001)
    assert isinstance(info.value, ValidationError)
    assert info.value.field == "limit"
    assert "3001" in str(info.value)


def test_typed_secrets_page_follows_next_cursor_with_findings_key(make_client):
    rec = Recorder(
        {"findings": [{"id": 1}], "nextCursor": "c2"},
        {"findings": [{"id": 2}], "nextCursor": ""},
    )
    client = make_client(rec)
    ids = [f.id for f in client.items(client.list_secrets)]
    assert ids == [1, 2]
    assert ("cursor", "c2") in rec.query(1)
