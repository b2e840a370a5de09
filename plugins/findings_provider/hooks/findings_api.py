"""Airflow hook: turns a ``findings_api`` connection into a findings API client."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from findings_provider.client import (
    AsyncFindingsClient,
    FindingsApiError,
    FindingsClient,
    NotFoundError,
    check_token,
)
from findings_provider.client.requests import TAGS_BODY_FORMS
from findings_provider.values import as_bool

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
        opts, token = self._options(self.get_connection(self.findings_conn_id))
        self._mask(token)
        return FindingsClient(token=token, **opts)

    def get_conn(self) -> FindingsClient:
        return self.client

    async def get_async_client(self) -> AsyncFindingsClient:
        """A new asynchronous client (for triggers); the caller closes it (``async with``)."""
        opts, token = self._options(await self.aget_connection(self.findings_conn_id))
        self._mask(token)
        return AsyncFindingsClient(token=token, **opts)

    def close(self) -> None:
        if "client" in self.__dict__:
            self.client.close()
            del self.__dict__["client"]

    def test_connection(self) -> tuple[bool, str]:
        """One cheap authenticated call: list deployments and resolve the configured one.

        The deployments list is not in the API reference. When both the id and the slug are configured and that
        route is not found, a one-item scan search (a documented, deployment-scoped call) proves the token and
        the deployment id instead.
        """
        try:
            client = self.client
            try:
                deployment = client.resolve_deployment()
                reached = f"deployment {deployment.slug!r} (id {deployment.id})"
            except NotFoundError:
                if not (client.deployment_id and client.deployment_slug):
                    raise
                client.search_scans(limit=1)
                reached = f"deployment id {client.deployment_id} (slug {client.deployment_slug!r} not checked)"
        except (FindingsApiError, ValueError) as exc:
            return False, f"Connection failed: {exc}"
        finally:
            self.close()
        return True, f"Connected to {client.base_url}: {reached} reachable with Web API access"


