"""Airflow hook: turns a ``findings_api`` connection into a findings API client."""

from __future__ import annotations

import json
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from findings_provider.client.errors import (
    AuthenticationError,
    DeploymentNotFoundError,
    FindingsApiError,
    NotFoundError,
    TransportError,
)
from findings_provider.client.security import check_token
from findings_provider.values import as_bool

if TYPE_CHECKING:
    from findings_provider.client.client import AsyncFindingsClient, FindingsClient

CONNECTION_TYPE = "findings_api"
DEFAULT_CONN_ID = "findings_api_default"


def _number(name: str, value: Any, kind: type) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"connection extra '{name}' = {value!r} is not {what}") from None


def client_options(host: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """Client keyword arguments from a connection's host and extras (everything but the token)."""
    if not host:
        raise ValueError(
            "the connection has no host: set it to the API base URL, e.g. https://findings.example.com"
        )
    opts: dict[str, Any] = {
        "base_url": host if "://" in host else f"https://{host}",
        "deployment_id": extra.get("deployment_id") or None,
        "deployment_slug": extra.get("deployment_slug") or None,
    }
    for name, kind in (("timeout", float), ("total_timeout", float), ("max_response_bytes", int), ("max_retries", int)):
        if extra.get(name) not in (None, ""):
            opts[name] = _number(name, extra[name], kind)
    if "allow_insecure_http" in extra:
        opts["allow_insecure_http"] = as_bool(extra["allow_insecure_http"], "connection extra 'allow_insecure_http'")
    verify = extra.get("verify")
    if verify not in (None, ""):
        is_flag = isinstance(verify, bool) or str(verify).strip().lower() in ("true", "false", "1", "0")
        # a flag, or else the path of a CA bundle
        opts["verify"] = as_bool(verify, "connection extra 'verify'") if is_flag else str(verify)
    if extra.get("tracker_project_field"):
        opts["tracker_project_field"] = str(extra["tracker_project_field"])
    tags_body = extra.get("tags_body")
    if tags_body not in (None, ""):
        from findings_provider.client.requests import TAGS_BODY_FORMS  # the request models: not at a DAG's parse

        form = tags_body.strip().lower() if isinstance(tags_body, str) else tags_body
        if form not in TAGS_BODY_FORMS:
            raise ValueError(
                f"connection extra 'tags_body' = {tags_body!r} is not allowed; expected 'array' (add project tags "
                "sends a bare JSON array, as the reference says; the default) or 'object' ({\"tags\": [...]}, as "
                "the real service takes it)"
            )
        opts["tags_body"] = form
    return opts


class FindingsApiHook(BaseHook):
    """Interact with the security findings management API.

    :param findings_conn_id: id of a ``findings_api`` connection: host = base URL, password = API token (surrounding
        whitespace is ignored; a token with a control character inside is refused), extras ``deployment_slug``,
        ``deployment_id``, and optionally:

        - ``timeout``: seconds httpx waits for the connection and for each read (default 30);
        - ``total_timeout``: seconds one attempt may take until its whole response is read, however slowly the
          server sends it (default 4 x ``timeout``, at least 60); past it the attempt fails as a timeout;
        - ``max_response_bytes``: size cap of one response body, decoded (default 134217728, 128 MiB);
        - ``max_retries`` (default 4), ``verify`` (true, false or a CA bundle path), ``allow_insecure_http``,
          ``tracker_project_field``;
        - ``tags_body``: ``array`` (default; add project tags sends a bare JSON array, as the reference says) or
          ``object`` (``{"tags": [...]}``, as the real service takes it). Removing tags always sends them as
          repeated ``tags`` query keys, never a body.
    """

    conn_name_attr = "findings_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONNECTION_TYPE
    hook_name = "Security Findings API"

    def __init__(self, findings_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.findings_conn_id = findings_conn_id

    @staticmethod
    def _options(conn: Any) -> tuple[dict[str, Any], str]:
        """Client options and the token, stripped once and checked (``ConfigurationError`` naming no part of it)."""
        extra = conn.extra_dejson if isinstance(conn.extra_dejson, dict) else json.loads(conn.extra or "{}")
        return client_options(conn.host, extra), check_token((conn.password or "").strip())

    def _mask(self, token: str) -> None:
        """Mask exactly the token the client sends."""
        from airflow.sdk.log import mask_secret

        mask_secret(token)

    @cached_property
    def client(self) -> FindingsClient:
        """The pooled synchronous client (built on first use; no I/O in ``__init__``)."""
        from findings_provider.client.client import FindingsClient  # here: a DAG file's parse builds no client

        opts, token = self._options(self.get_connection(self.findings_conn_id))
        self._mask(token)
        return FindingsClient(token=token, **opts)

    def get_conn(self) -> FindingsClient:
        return self.client

    async def get_async_client(self) -> AsyncFindingsClient:
        """A new asynchronous client (for triggers); the caller closes it (``async with``)."""
        from findings_provider.client.client import AsyncFindingsClient

        opts, token = self._options(await self.aget_connection(self.findings_conn_id))
        self._mask(token)
        return AsyncFindingsClient(token=token, **opts)

    def close(self) -> None:
        if "client" in self.__dict__:
            self.client.close()
            del self.__dict__["client"]

    def test_connection(self) -> tuple[bool, str]:
        """Ping the service, then make one deployment-scoped read that proves the token's deployment.

        1. ``GET /api/v1/ping``: the base URL answers as the findings API.
        2. One project of the deployment (``GET .../{deploymentSlug}/projects``, one item): the slug is right and
           the token has Web API access to it (the service answers 404 for either failure). A slug that is not
           configured is resolved from the deployment list first; with only a deployment id configured, the read is
           a one-item scan search (``POST .../{deploymentId}/scans/search``) instead.

        Each failure gets its own message: unreachable, the token refused (401/403), the deployment not found or the
        token without Web API access (404), no findings API at the base URL (404 on ping).
        """
        try:
            client = self.client
        except (FindingsApiError, ValueError) as exc:
            return False, f"Connection failed: {exc}"
        try:
            return True, self._check(client)
        except TransportError as exc:
            return False, f"Connection failed: cannot reach {client.base_url} (unreachable or too slow): {exc}"
        except DeploymentNotFoundError as exc:
            which = (f"deployment {client.deployment_slug!r}" if client.deployment_slug
                     else f"deployment id {client.deployment_id}")
            return False, (
                f"Connection failed: {which} not found, or the API token lacks Web API access (the service answers "
                "404 for both): check the connection's deployment slug and id, and enable Web API access on the "
                f"token (deployment settings > Tokens). {exc}"
            )
        except AuthenticationError as exc:
            return False, (
                f"Connection failed: the API token was refused (HTTP {exc.status_code}): it is invalid or revoked; "
                f"paste a valid token into the connection's password field. {exc}"
            )
        except NotFoundError as exc:
            if exc.endpoint == "ping":
                return False, (
                    f"Connection failed: no findings API at {client.base_url}: GET /api/v1/ping answered 404; check "
                    f"the base URL (host and any path prefix). {exc}"
                )
            return False, f"Connection failed: {exc}"
        except (FindingsApiError, ValueError) as exc:
            return False, f"Connection failed: {exc}"
        finally:
            self.close()

    @staticmethod
    def _check(client: FindingsClient) -> str:
        """The two calls of ``test_connection``; the success message."""
        client.ping()
        if client.deployment_slug or not client.deployment_id:
            client.list_projects(page_size=1)  # resolves a missing slug from the deployment list first
            reached = f"deployment {client.deployment_slug!r}"
            if client.deployment_id:
                reached += f" (id {client.deployment_id}, used by the id-scoped operations, not checked by this test)"
        else:
            client.search_scans(limit=1)
            reached = f"deployment id {client.deployment_id}"
        return f"Connected to {client.base_url}: the service answers and {reached} is reachable with Web API access"
