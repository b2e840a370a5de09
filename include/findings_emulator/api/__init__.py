"""HTTP routes: the API under ``/api/v1`` (token required) and the admin routes under ``/_emulator``."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from . import (
    dependencies,
    deployments,
    findings,
    ping,
    policies,
    projects,
    sbom,
    scans,
    secrets,
    ticket_links,
    tickets,
    triage,
)
from .admin import router as admin_router
from .deps import require_token
from .sbom import download_router


def api_router() -> APIRouter:
    """Every operation of the API reference and the real service's others: the liveness check without a token,
    the rest behind the token check (the SBOM download link is ``download_router``'s, outside ``/api``)."""
    router = APIRouter(prefix="/api/v1")
    router.include_router(ping.router)
    protected = APIRouter(dependencies=[Depends(require_token)])
    for module in (deployments, dependencies, scans, policies, tickets, ticket_links, findings, projects, triage,
                   secrets, sbom):
        protected.include_router(module.router)
    router.include_router(protected)
    return router


__all__ = ["admin_router", "api_router", "download_router"]
