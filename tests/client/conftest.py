"""Shared helpers of the client tests: a recording mock transport, a fake clock and client factories.

Everything is mocked at the network boundary (``httpx.MockTransport``); nothing sleeps: the clock that the
client's retry loop reads and sleeps on is replaced by a fake one that records every requested wait.
"""

from __future__ import annotations

import asyncio
import json
import random
import types
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest
from findings_provider.client import AsyncFindingsClient, FindingsClient, RetryPolicy
from findings_provider.client import client as client_module
from findings_provider.client import transport as transport_module

TOKEN = "tok-SECRET-123"
BASE_URL = "https://findings.example.com"
DEPLOYMENT_ID = "42"
DEPLOYMENT_SLUG = "acme"

Answer = httpx.Response | Exception | dict | list | Callable[[httpx.Request], Any]


def ok(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    """A JSON response."""
    return httpx.Response(status, content=json.dumps(body).encode(), headers=headers or {})


def raw(content: bytes | str, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    """A response with exactly these body bytes."""
    if isinstance(content, str):
        content = content.encode()
    return httpx.Response(status, content=content, headers=headers or {})


class Recorder:
    """A ``MockTransport`` handler that stores every request and answers from a script.

    Each answer is a response, an exception (raised, as a transport failure), a dict/list (a 200 JSON body)
    or a callable of the request. Answers are used in order; the last one repeats when ``repeat_last`` is set,
    otherwise one request too many fails the test.
    """

    def __init__(self, *answers: Answer, repeat_last: bool = False) -> None:
        self.requests: list[httpx.Request] = []
        self.answers = list(answers)
        self.repeat_last = repeat_last

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.answers:
            raise AssertionError(f"unexpected request #{len(self.requests)}: {request.method} {request.url}")
        answer = self.answers[0] if self.repeat_last and len(self.answers) == 1 else self.answers.pop(0)
        if callable(answer) and not isinstance(answer, (httpx.Response, Exception)):
            answer = answer(request)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, (dict, list)):
            return ok(answer)
        return answer

    def add(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def json(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)

    def query(self, index: int = -1) -> list[tuple[str, str]]:
        return sorted(self.requests[index].url.params.multi_items())


class FakeClock:
    """Monotonic and wall clock that only move when the client sleeps; records every requested wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.epoch = 1_700_000_000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.epoch + self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Replace the clock of the retry loop: ``time`` and ``asyncio.sleep`` of the client modules."""
    fake = FakeClock()
    fake_time = types.SimpleNamespace(monotonic=fake.monotonic, sleep=fake.sleep, time=fake.time)
    monkeypatch.setattr(client_module, "time", fake_time)
    monkeypatch.setattr(transport_module, "time", fake_time)
    monkeypatch.setattr(client_module, "asyncio", types.SimpleNamespace(sleep=fake.asleep))
    return fake


def fast_policy(max_retries: int = 3, **kwargs: Any) -> RetryPolicy:
    """A retry policy with tiny, reproducible backoffs."""
    kwargs.setdefault("backoff_base", 0.001)
    kwargs.setdefault("backoff_max", 0.01)
    kwargs.setdefault("max_total_seconds", 60.0)
    kwargs.setdefault("rng", random.Random(1234))
    return RetryPolicy(max_retries=max_retries, **kwargs)


def client_kwargs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "base_url": BASE_URL,
        "token": TOKEN,
        "deployment_id": DEPLOYMENT_ID,
        "deployment_slug": DEPLOYMENT_SLUG,
        "retry_policy": fast_policy(),
    }
    kwargs.update(overrides)
    return kwargs


@pytest.fixture
def make_client() -> Iterable[Callable[..., FindingsClient]]:
    """Factory: ``make_client(handler, **client_kwargs)`` -> a sync client on a mock transport."""
    made: list[FindingsClient] = []

    def make(handler: Callable[[httpx.Request], httpx.Response], **overrides: Any) -> FindingsClient:
        client = FindingsClient(transport=httpx.MockTransport(handler), **client_kwargs(**overrides))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def make_async_client() -> Callable[..., AsyncFindingsClient]:
    """Factory: ``make_async_client(handler, **client_kwargs)`` -> an async client on a mock transport."""

    def make(handler: Callable[[httpx.Request], httpx.Response], **overrides: Any) -> AsyncFindingsClient:
        return AsyncFindingsClient(transport=httpx.MockTransport(handler), **client_kwargs(**overrides))

    return make


def run(coro: Any) -> Any:
    """Run a coroutine to completion (the suite does not depend on an async pytest plugin)."""
    return asyncio.run(coro)


def call_async(client: AsyncFindingsClient, method: str, *args: Any, **kwargs: Any) -> Any:
    """Await one operation of the async client and close it."""

    async def go() -> Any:
        async with client:
            return await getattr(client, method)(*args, **kwargs)

    return run(go())


def collect_async(aiter_factory: Callable[[], Any], client: AsyncFindingsClient) -> list[Any]:
    """Drain an async iterator built by ``aiter_factory`` and close the client."""

    async def go() -> list[Any]:
        async with client:
            return [item async for item in aiter_factory()]

    return run(go())


class ClockedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body in chunks, each arriving ``gap`` seconds of the fake clock after the one before: a server
    dripping its answer, without a real wait."""

    def __init__(self, clock: FakeClock, chunks: Iterable[bytes], gap: float) -> None:
        self.clock = clock
        self.chunks = list(chunks)
        self.gap = gap

    def __iter__(self):
        for chunk in self.chunks:
            self.clock.now += self.gap
            yield chunk

    async def __aiter__(self):
        for chunk in self.chunks:
            self.clock.now += self.gap
            yield chunk


def dripped(clock: FakeClock, body: bytes, pieces: int, gap: float, status: int = 200) -> httpx.Response:
    """A response whose ``body`` arrives in ``pieces`` chunks, ``gap`` fake seconds apart (no Content-Length)."""
    size = -(-len(body) // pieces)
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    return httpx.Response(status, stream=ClockedStream(clock, chunks, gap))
