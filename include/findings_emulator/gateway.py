"""The outermost ASGI layer: admin routes for loopback clients only, request log and fault injection.

It wraps the FastAPI application directly under uvicorn, so it receives uvicorn's own ``send`` and can cut a
connection the way a failing network or proxy would.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode

import orjson
from starlette.routing import Match

from . import timefmt
from .faults import Fault, FaultBook
from .requestlog import RequestLog

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


#: Array query parameters per operation: production clients send them comma-joined (``severities=high,critical``),
#: the schema says repeated keys; both are accepted.
ARRAY_PARAMETERS = {
    "findings": frozenset({"repos", "repository_ids", "triage_reasons", "severities", "policies", "rules",
                           "categories", "component_tags", "exposures", "transitivities", "click_to_fix_pr_state"}),
    "secrets": frozenset({"validationState", "severity", "repo"}),
}


def split_comma_arrays(query: bytes, names: frozenset[str]) -> bytes:
    """The query string with comma-joined values of the array parameters ``names`` as repeated keys."""
    if b"," not in query and b"%2C" not in query.upper():
        return query
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    split = [(key, part) for key, value in pairs
             for part in (value.split(",") if key in names else [value]) if part or key not in names]
    return urlencode(split).encode("latin-1")


def is_loopback(host: str | None) -> bool:
    """Whether a client address is a loopback address (IPv4, IPv6 or IPv4-mapped IPv6)."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


async def _send_json(send: Send, status: int, content: Any, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await _send_bytes(send, status, orjson.dumps(content), b"application/json", headers)


async def _send_bytes(send: Send, status: int, body: bytes, content_type: bytes,
                      headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", content_type), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


#: The page a misconfigured proxy or login portal answers with ``200 OK`` (fault kind ``act_html``).
HTML_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Maintenance</title></head><body><h1>We'll be right back</h1>"
             b"<p>The service is under maintenance.</p></body></html>\n")
#: Pieces of the body ``act_drip`` sends, spread evenly over the fault's ``latency``.
DRIP_PIECES = 20


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _abort(send: Send) -> None:
    """Close the client connection without a (complete) response."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("cannot drop the connection: the server does not expose its transport")
    transport.abort()
    for _ in range(3):  # let the server notice the disconnect before the application returns
        await asyncio.sleep(0)


def _parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


class Gateway:
    """ASGI application wrapping ``app`` (the FastAPI application)."""

    def __init__(self, app: Any, requests: RequestLog, faults: FaultBook) -> None:
        self.app = app
        self.requests = requests
        self.faults = faults

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope."""
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(("/_emulator", "/api/", "/downloads/")):
            await self.app(scope, receive, send)
        elif path.startswith("/_emulator"):
            client = scope.get("client")
            if is_loopback(client[0] if client else None):
                await self.app(scope, receive, send)
            else:
                await _send_json(send, 403, {"error": "admin routes answer loopback clients only",
                                             "field": None})
        else:
            await self._api(scope, receive, send)

    def operation(self, scope: Scope) -> str | None:
        """The operation name (the route's name) a request is for, if any route matches it fully."""
        for route in self.app.router.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(route.name)
        return None

    async def _api(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        operation = self.operation(scope)
        method = scope["method"]
        fault = self.faults.next_fault(operation, method) if operation else None
        entry: dict[str, Any] = {
            "time": timefmt.iso_z(time.time()), "method": method, "path": scope["path"],
            "operation": operation,
            "query": parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True),
            "body": _parse_json(body), "status": None, "fault": fault.kind if fault else None,
            # whether the request carried credentials (never their value): the SBOM download must come without
            "authorization_sent": any(k.lower() == b"authorization" for k, _ in scope.get("headers", [])),
        }
        if operation in ARRAY_PARAMETERS:
            scope = {**scope, "query_string": split_comma_arrays(scope.get("query_string", b""),
                                                                  ARRAY_PARAMETERS[operation])}
        try:
            entry["status"] = await self._serve(scope, replay, send, fault)
        finally:
            self.requests.record(entry)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, fault: Fault | None) -> int | None:
        """Answer the request, applying ``fault``; returns the status the client saw (None: no response)."""
        if fault is None:
            return await self._pass(scope, receive, send)
        if fault.status is not None:
            headers = []
            if fault.status == 429 and fault.retry_after is not None:
                headers.append((b"retry-after", f"{fault.retry_after:g}".encode()))
            body: dict[str, Any] = {"error": f"injected fault: HTTP {fault.status}", "field": None}
            if fault.echo:  # a misbehaving server or proxy that echoes the request, token included
                body["request_headers"] = {k.decode("latin-1"): v.decode("latin-1")
                                           for k, v in scope.get("headers", [])}
            await _send_json(send, fault.status, body, headers)
            return fault.status
        if fault.kind == "latency":
            await asyncio.sleep(fault.latency)
            return await self._pass(scope, receive, send)
        if fault.kind == "drop":
            await _abort(send)
            return None
        start, answer = await self._capture(scope, receive)
        return await self._answer_after_acting(fault, start, answer, send)

    async def _answer_after_acting(self, fault: Fault, start: Message, body: bytes, send: Send) -> int | None:
        """Misanswer a request the application has fully carried out (``start``, ``body``: its real answer)."""
        kind = fault.kind
        status = int(start["status"])
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        if kind == "drop_after":
            await _abort(send)
            return None
        if kind == "truncate":  # half the JSON, with a Content-Length that matches it
            cut = body[: len(body) // 2]
            await send({**start, "headers": [*headers, (b"content-length", str(len(cut)).encode())]})
            await send({"type": "http.response.body", "body": cut})
            return status
        if kind == "act_500":
            await _send_json(send, 500, {"error": "injected fault: HTTP 500 after carrying the request out",
                                         "field": None})
            return 500
        if kind == "act_html":
            await _send_bytes(send, 200, HTML_PAGE, b"text/html; charset=utf-8")
            return 200
        if kind == "act_wrong_shape":  # the real answer inside an envelope the API does not use
            await _send_bytes(send, 200, b'{"data":' + (body or b"null") + b"}", b"application/json")
            return 200
        if kind == "act_redirect":
            await _send_bytes(send, 302, b"", b"text/plain", [(b"location", b"/moved-elsewhere")])
            return 302
        if kind == "act_slow":
            await asyncio.sleep(fault.latency)
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return status
        # act_drip: the real answer, its body in pieces spread over ``latency`` seconds
        await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        size = -(-len(body) // DRIP_PIECES) or 1
        for offset in range(0, len(body), size):
            await asyncio.sleep(fault.latency / DRIP_PIECES)
            await send({"type": "http.response.body", "body": body[offset:offset + size], "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return status

    async def _pass(self, scope: Scope, receive: Receive, send: Send) -> int | None:
        """Let the application answer; returns its status."""
        status: list[int] = []

        async def observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        await self.app(scope, receive, observed)
        return status[0] if status else None

    async def _capture(self, scope: Scope, receive: Receive) -> tuple[Message, bytes]:
        """Run the application to the end, keeping its response instead of sending it."""
        start: Message = {}
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, keep)
        return start, b"".join(chunks)
