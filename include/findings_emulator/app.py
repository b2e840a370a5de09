"""The ASGI application: FastAPI routes wrapped in the gateway (admin guard, request log, faults)."""

from __future__ import annotations

from fastapi import FastAPI

from . import __version__
from .api import admin_router, api_router, download_router
from .errors import install_error_handlers
from .gateway import Gateway
from .state import Emulator

DESCRIPTION = (
    "Local emulator of the security findings management API, serving generated data. "
    "Authenticate with `Authorization: Bearer <token>`. Admin routes under `/_emulator` (loopback only) are "
    "described in the package README."
)


def create_fastapi(emulator: Emulator) -> FastAPI:
    """The FastAPI application (its OpenAPI document lists every API operation)."""
    app = FastAPI(title="Findings API emulator", version=__version__, description=DESCRIPTION)
    app.state.emulator = emulator
    install_error_handlers(app)
    app.include_router(api_router())
    app.include_router(download_router)
    app.include_router(admin_router)
    return app


def create_app(emulator: Emulator) -> Gateway:
    """The application to serve: give it to uvicorn as is (the gateway needs uvicorn's own ``send``)."""
    return Gateway(create_fastapi(emulator), emulator.requests, emulator.faults)
