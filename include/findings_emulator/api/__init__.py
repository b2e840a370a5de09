"""HTTP routes: the API under ``/api/v1`` (token required) and the admin routes under ``/_emulator``."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from . import dependencies, deployments, findings, policies, projects, scans, secrets, tickets, triage
from .admin import router as admin_router
from .deps import require_token


def api_router() -> APIRouter:
    """Every operation of the API reference, behind the token check."""
    router = APIRouter(prefix="/api/v1", dependencies=[Depends(require_token)])
    for module in (deployments, dependencies, scans, policies, tickets, findings, projects, triage, secrets):
        router.include_router(module.router)
    return router


__all__ = ["admin_router", "api_router"]
