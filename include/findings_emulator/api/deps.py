"""Dependencies of the API routes: the emulator, the token check and the deployment in the path."""

from __future__ import annotations

from fastapi import Depends, Request

from ..errors import NO_WEB_API, ApiError
from ..state import Emulator


def get_emulator(request: Request) -> Emulator:
    """The emulator serving this application."""
    emulator: Emulator = request.app.state.emulator
    return emulator


def require_token(request: Request, emulator: Emulator = Depends(get_emulator)) -> None:
    """Accept only ``Authorization: Bearer <token>`` with a configured token that has Web API access."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "missing API token: send the header 'Authorization: Bearer <API token>'",
                       "Authorization", {"WWW-Authenticate": "Bearer"})
    if token in emulator.config.no_web_api_tokens:
        raise ApiError(404, f"{NO_WEB_API}: enable Web API access on the token in the deployment's "
                            "token settings, or use a token that has it")
    if token not in emulator.config.tokens:
        raise ApiError(401, "invalid API token: it is not known to this deployment (revoked or mistyped?)",
                       "Authorization", {"WWW-Authenticate": "Bearer"})


def by_id(deploymentId: str, emulator: Emulator = Depends(get_emulator)) -> Emulator:
    """The emulator, if the path names its deployment by id; otherwise 404."""
    if deploymentId != emulator.config.deployment_id:
        raise ApiError(404, f"{NO_WEB_API} (deployment id {deploymentId!r})")
    return emulator


def by_slug(deploymentSlug: str, emulator: Emulator = Depends(get_emulator)) -> Emulator:
    """The emulator, if the path names its deployment by slug; otherwise 404."""
    if deploymentSlug != emulator.config.deployment_slug:
        raise ApiError(404, f"{NO_WEB_API} (deployment slug {deploymentSlug!r})")
    return emulator
