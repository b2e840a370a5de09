"""Liveness: ``GET /api/v1/ping`` answers ``{}`` (no deployment in the path, no token needed)."""

from __future__ import annotations

from fastapi import APIRouter

from ..responses import OrjsonResponse

router = APIRouter()


@router.get("/ping", name="ping", operation_id="ping", summary="Liveness check")
def ping() -> OrjsonResponse:
    """``{}`` with 200 whenever the service is up. Like the real service's liveness check it proves nothing about
    a token: none is needed, and one that is sent is not checked (use an authenticated call to test a token)."""
    return OrjsonResponse({})
