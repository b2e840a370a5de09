"""List deployments (where clients find the deployment id and slug)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from ..dialect import REAL
from ..responses import OrjsonResponse
from ..state import Emulator
from .deps import get_emulator

router = APIRouter()


@router.get("/deployments", name="deployments", operation_id="deployments",
            summary="List the deployments the token can access")
def list_deployments(request: Request, emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """The single deployment this emulator serves, under both spellings of its keys (the real dialect: a
    numeric ``id`` and the findings endpoint's URL)."""
    config = emulator.config
    if config.dialect == REAL:
        url = str(request.url_for("findings", deploymentSlug=config.deployment_slug))
        return OrjsonResponse({"deployments": [{
            "id": int(config.deployment_id), "name": config.deployment_name, "slug": config.deployment_slug,
            "findings": {"url": url}}]})
    return OrjsonResponse({"deployments": [{
        "id": config.deployment_id, "deploymentId": config.deployment_id, "name": config.deployment_name,
        "slug": config.deployment_slug, "deploymentSlug": config.deployment_slug,
    }]})
