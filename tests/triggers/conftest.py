"""Fixtures of the trigger tests: an async client over a MockTransport that answers from a script."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from findings_provider.client import AsyncFindingsClient, RetryPolicy
from findings_provider.hooks.findings_api import FindingsApiHook

from .helpers import ScriptedApi


@pytest.fixture
def mock_api(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, list[Any]]], ScriptedApi]:
    """Make the trigger's hook (connection ``my_conn``) hand out an async client over a :class:`ScriptedApi` with
    that script (no retries, no sleeping between them)."""

    def install(script: dict[str, list[Any]]) -> ScriptedApi:
        api = ScriptedApi(script)

        async def get_async_client(self: FindingsApiHook) -> AsyncFindingsClient:
            assert self.findings_conn_id == "my_conn"
            return AsyncFindingsClient("https://api.test", "t0ken-value", deployment_slug="acme",
                                       transport=httpx.MockTransport(api), retry_policy=RetryPolicy(max_retries=0))

        monkeypatch.setattr(FindingsApiHook, "get_async_client", get_async_client)
        return api

    return install
