"""The findings API client: the operations of ``operations``, executed by a sync and an async transport.

``FindingsClient._call`` returns the parsed result; ``AsyncFindingsClient._call`` returns an awaitable of it; their
``pages``, ``items`` and ``raw_pages`` drive the one pager (``pagination.Walk``) through any paginated operation.
Checks and redaction (``security``), the judgement of each attempt (``base``), retries, error mapping and parsing
(``transport``, ``endpoints``) are shared.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import httpx

from findings_provider.client.endpoints import Call, Endpoint, RawFindingsPage
from findings_provider.client.models import Deployment, FindingsPage, SecretsPage
from findings_provider.client.operations import DependencyFilterArg, _Operations
from findings_provider.client.pagination import P, Page, Walk
from findings_provider.client.security import (
    LOOPBACK_NAMES,
    MIN_TOKEN_LENGTH,
    check_base_url,
    check_download_url,
    check_token,
    is_loopback,
    token_forms,
)
from findings_provider.client.transport import Outcome

#: What other code imported from this module before it was split: the checks live in ``security`` now.
__all__ = [
    "LOOPBACK_NAMES",
    "MIN_TOKEN_LENGTH",
    "AsyncFindingsClient",
    "DependencyFilterArg",
    "FindingsClient",
    "check_base_url",
    "check_download_url",
    "check_token",
    "is_loopback",
    "token_forms",
]

T = TypeVar("T")
U = TypeVar("U")
I = TypeVar("I")  # noqa: E741  an item of a page
#: The arguments of a paginated operation, passed through ``pages``, ``items`` and ``raw_pages``.
Args = ParamSpec("Args")


class FindingsClient(_Operations):
    """Synchronous client: one pooled ``httpx.Client``. Use as a context manager or call ``close()``."""

    def __init__(self, base_url: str, token: str, **kwargs: Any) -> None:
        super().__init__(base_url, token, **kwargs)
        self._http = httpx.Client(**self._http_options)
        self._plain_http: httpx.Client | None = None

    def __enter__(self) -> FindingsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()
        if self._plain_http is not None:
            self._plain_http.close()
            self._plain_http = None

    def _http_for(self, endpoint: Endpoint[Any]) -> httpx.Client:
        """The pooled API client, or (built on first use) the plain one that never sends the token."""
        if endpoint.authenticated:
            return self._http
        if self._plain_http is None:
            self._plain_http = httpx.Client(**self._download_options, event_hooks={"request": [self._check_hop]})
        return self._plain_http

    def resolve_deployment(self) -> Deployment:
        """Fill in the deployment id or slug that is not configured, from the deployment list."""
        return self._adopt_deployment(self.list_deployments())

    @overload
    def _call(self, call: Call[T]) -> T: ...

    @overload
    def _call(self, call: Call[T], post: Callable[[T], U]) -> U: ...

    def _call(self, call: Call[Any], post: Callable[[Any], Any] | None = None) -> Any:
        if self._needs_deployment(call.endpoint):
            self.resolve_deployment()
        args = self._request_args(call)
        started = time.monotonic()
        attempt = 0
        http = self._http_for(call.endpoint)
        while True:
            attempt += 1
            step = self._judge(call, self._attempt(http, call, http.build_request(**args)), attempt, started)
            if step.wait is None:
                return post(step.result) if post else step.result
            time.sleep(step.wait)

    def _attempt(self, http: httpx.Client, call: Call[Any], request: httpx.Request) -> Outcome:
        """Send once and stream the body through the attempt's reader; any failure becomes the outcome's error."""
        reader = self._reader(call)
        try:
            response = http.send(request, stream=True)
            try:
                reader.start(response)
                for chunk in response.iter_bytes():
                    reader.feed(chunk)
            finally:
                response.close()
        except Exception as exc:  # judged by ``_judge``: retried, ambiguous, or raised as it is
            return Outcome(error=exc)
        return reader.outcome(response)

    # -- the one pager (``pagination.Walk``), walked by blocking calls ---------------------------------------------

    def pages(self, operation: Callable[Args, P], /, *args: Args.args, **kwargs: Args.kwargs) -> Iterator[P]:
        """Every page of a paginated operation, lazily, from the page or cursor its arguments name (or the first)
        to the last: ``client.pages(client.search_scans, branch="main")``. The first request is planned (and its
        arguments validated) now; each is sent when the page is wanted."""
        return self._pages(Walk(self, operation, args, kwargs))

    def items(self, operation: Callable[Args, Page[I]], /, *args: Args.args, **kwargs: Args.kwargs) -> Iterator[I]:
        """Every item of a paginated operation, lazily (one page held at a time); where the operation names what
        identifies an item (findings, secrets, scans, projects), each once: ``client.items(client.list_findings,
        "sca", page_size=3000)``."""
        walk: Walk[Page[I]] = Walk(self, operation, args, kwargs)
        return (item for page in self._pages(walk) for item in walk.new_items(page))

    def raw_pages(
        self, operation: Callable[Args, FindingsPage | SecretsPage], /, *args: Args.args, **kwargs: Args.kwargs
    ) -> Iterator[RawFindingsPage]:
        """Every page of findings or secrets as ``RawFindingsPage``s, whose ``items`` are the exact bytes of each
        finding (the extraction fast path): ``client.raw_pages(client.list_findings, "sast", page_size=3000)``."""
        return self._pages(Walk(self, operation, args, kwargs, raw=True))

    def _pages(self, walk: Walk[P]) -> Iterator[P]:
        call: Call[P] | None = walk.first
        while call is not None:
            page = self._call(call)
            yield page
            call = walk.next(page)

if TYPE_CHECKING:
    # What type checkers see as the async client's base: ``_Operations`` with each result awaitable, generated from
    # it (``devtools/client_surface.py``; ``tests/client/test_typed_surface.py`` fails when it is out of date).
    from findings_provider.client._async_surface import AsyncOperations as _AsyncBase
else:
    _AsyncBase = _Operations


class AsyncFindingsClient(_AsyncBase):
    """Asynchronous client for triggers: the same operations, awaited. Use ``async with`` or ``aclose()``."""

    def __init__(self, base_url: str, token: str, **kwargs: Any) -> None:
        super().__init__(base_url, token, **kwargs)
        self._http = httpx.AsyncClient(**self._http_options)
        self._plain_http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> AsyncFindingsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._plain_http is not None:
            await self._plain_http.aclose()
            self._plain_http = None

    async def _acheck_hop(self, request: httpx.Request) -> None:
        self._check_hop(request)

    def _http_for(self, endpoint: Endpoint[Any]) -> httpx.AsyncClient:
        """The pooled API client, or (built on first use) the plain one that never sends the token."""
        if endpoint.authenticated:
            return self._http
        if self._plain_http is None:
            self._plain_http = httpx.AsyncClient(
                **self._download_options, event_hooks={"request": [self._acheck_hop]}
            )
        return self._plain_http

    async def resolve_deployment(self) -> Deployment:
        """Fill in the deployment id or slug that is not configured, from the deployment list."""
        return self._adopt_deployment(await self.list_deployments())

    @overload
    async def _call(self, call: Call[T]) -> T: ...

    @overload
    async def _call(self, call: Call[T], post: Callable[[T], U]) -> U: ...

    async def _call(self, call: Call[Any], post: Callable[[Any], Any] | None = None) -> Any:
        if self._needs_deployment(call.endpoint):
            await self.resolve_deployment()
        args = self._request_args(call)
        started = time.monotonic()
        attempt = 0
        http = self._http_for(call.endpoint)
        while True:
            attempt += 1
            outcome = await self._attempt(http, call, http.build_request(**args))
            step = self._judge(call, outcome, attempt, started)
            if step.wait is None:
                return post(step.result) if post else step.result
            await asyncio.sleep(step.wait)

    async def _attempt(self, http: httpx.AsyncClient, call: Call[Any], request: httpx.Request) -> Outcome:
        """Send once and stream the body through the attempt's reader; any failure becomes the outcome's error."""
        reader = self._reader(call)
        try:
            response = await http.send(request, stream=True)
            try:
                reader.start(response)
                async for chunk in response.aiter_bytes():
                    reader.feed(chunk)
            finally:
                await response.aclose()
        except Exception as exc:  # judged by ``_judge``: retried, ambiguous, or raised as it is
            return Outcome(error=exc)
        return reader.outcome(response)

    # -- the one pager (``pagination.Walk``), walked by awaited calls ----------------------------------------------

    def pages(
        self, operation: Callable[Args, Awaitable[P]], /, *args: Args.args, **kwargs: Args.kwargs
    ) -> AsyncIterator[P]:
        """Every page of a paginated operation, lazily (``async for``); as ``FindingsClient.pages``."""
        return self._pages(Walk(self, operation, args, kwargs))

    def items(
        self, operation: Callable[Args, Awaitable[Page[I]]], /, *args: Args.args, **kwargs: Args.kwargs
    ) -> AsyncIterator[I]:
        """Every item of a paginated operation, lazily (``async for``); as ``FindingsClient.items``."""
        walk: Walk[Page[I]] = Walk(self, operation, args, kwargs)
        return (item async for page in self._pages(walk) for item in walk.new_items(page))

    def raw_pages(
        self,
        operation: Callable[Args, Awaitable[FindingsPage | SecretsPage]],
        /,
        *args: Args.args,
        **kwargs: Args.kwargs,
    ) -> AsyncIterator[RawFindingsPage]:
        """Every page of findings or secrets as ``RawFindingsPage``s (``async for``); as
        ``FindingsClient.raw_pages``."""
        return self._pages(Walk(self, operation, args, kwargs, raw=True))

    async def _pages(self, walk: Walk[P]) -> AsyncIterator[P]:
        call: Call[P] | None = walk.first
        while call is not None:
            page = await self._call(call)
            yield page
            call = walk.next(page)
