"""One error body shape for every failure: ``{"error": "<message>", "field": "<name or null>"}``."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .responses import OrjsonResponse

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The real service's answer to an unknown route.
REAL_NOT_FOUND = ("The requested URL was not found on the server. If you entered the URL manually please check "
                  "your spelling and try again.")
NO_WEB_API = "deployment not found, or the API token does not have Web API access enabled"


class ApiError(Exception):
    """An error answered to the client with ``status`` and the standard body."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers
        #: The real service's error code, when it sends one (``DEPLOYMENT_MIGRATED``); added to the body.
        self.code = code


def invalid(field: str, message: str) -> ApiError:
    """A 400 naming ``field``."""
    return ApiError(400, f"invalid {field}: {message}", field)


def not_found(what: str) -> ApiError:
    """A 404 for an unknown resource."""
    return ApiError(404, f"{what} not found")


def error_response(status: int, message: str, field: str | None = None,
                   headers: dict[str, str] | None = None, code: str | None = None) -> OrjsonResponse:
    """The standard error body as a response (with ``code`` when the real service sends one)."""
    body = {"error": message, "field": field, **({"code": code} if code else {})}
    return OrjsonResponse(body, status_code=status, headers=headers)


def _describe_input(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _validation_field(location: tuple[Any, ...]) -> str:
    """The field a validation error is about: the names along its location, without list indexes or the
    tags pydantic adds for union members (``("body", "statuses", "list[...]", 0)`` -> ``statuses``)."""
    names = [str(part) for part in location[1:] if isinstance(part, str) and _NAME.match(part)]
    return ".".join(names) or "body"


def _where(location: tuple[Any, ...]) -> str:
    """The location as a path with indexes, e.g. ``issue_ids[2]``."""
    text = ""
    for part in location[1:]:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.match(str(part)):
            text += f".{part}" if text else str(part)
    return text or "body"


async def _on_api_error(_request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.field, exc.headers, exc.code)


async def _on_validation_error(_request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    location = tuple(first.get("loc", ("body",)))
    if first.get("type") == "json_invalid":
        return error_response(400, "invalid body: not valid JSON", "body")
    if location == ("body",) and isinstance(first.get("input"), bytes):
        return error_response(400, "invalid body: send JSON with the header 'Content-Type: application/json'",
                              "body")
    field = _validation_field(location)
    message = f"invalid {_where(location)}: {first.get('msg', 'invalid value')}"
    if first.get("type") != "missing" and "input" in first:
        message += f"; got {_describe_input(first['input'])}"
    return error_response(400, message, field)


async def _on_http_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers) if exc.headers else None
    emulator = getattr(request.app.state, "emulator", None)
    if exc.status_code == 404 and emulator is not None and emulator.config.dialect == "real":
        return OrjsonResponse({"error": REAL_NOT_FOUND}, status_code=404, headers=headers)
    return error_response(exc.status_code, str(exc.detail), None, headers)


def install_error_handlers(app: FastAPI) -> None:
    """Make every error, including FastAPI's own validation and routing ones, use the standard body."""
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
