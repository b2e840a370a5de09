"""The findings API client: every operation once, executed by a sync and an async transport.

``_Operations`` builds a ``Call`` for each operation (validation happens here, before any request) and hands it
to ``_call``. ``FindingsClient._call`` returns the parsed result; ``AsyncFindingsClient._call`` returns an
awaitable of it. Retries, error mapping and parsing are shared (``transport``, ``endpoints``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from findings_provider import __version__
from findings_provider.client import requests as rq
from findings_provider.client.endpoints import (
    ENDPOINTS,
    Call,
    Endpoint,
    error_for_status,
    raw_findings_parser,
)
from findings_provider.client.errors import (
    ConfigurationError,
    FindingsApiError,
    ResponseDecodeError,
    ResponseTooLargeError,
    excerpt,
)
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.client.models import Deployment
from findings_provider.client.pagination import CursorPager, OffsetPager
from findings_provider.client.transport import (
    DEFAULT_MAX_RESPONSE_BYTES,
    BodyReader,
    Outcome,
    RetryPolicy,
    ambiguous_write_error,
    default_total_timeout,
    error_text,
    final_transport_error,
    should_retry,
)

log = logging.getLogger("findings_provider.client")

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True for loopback host names and addresses (127.0.0.0/8, ::1, localhost)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(base_url: str, allow_insecure_http: bool = False) -> str:
    """Validate the base URL: http(s), a host, and https unless loopback or explicitly allowed."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"base URL {base_url!r} is not an http(s) URL with a host; expected e.g. https://findings.example.com"
        )
    if parts.scheme == "http" and not allow_insecure_http and not is_loopback(parts.hostname):
        raise ConfigurationError(
            f"base URL {base_url!r} uses plain http to a non-loopback host; use https, or set "
            "allow_insecure_http=true on the connection if you really mean it"
        )
    return base_url.strip().rstrip("/")


def check_token(token: str) -> str:
    """Return ``token`` if it can be sent as is in an ``Authorization`` header; else ``ConfigurationError``.

    Refused: an empty token, surrounding whitespace, and any character a header value cannot carry (below 0x20,
    0x7f-0x9f, beyond latin-1). The message says where, never what: it holds no part of the token.
    """
    if not token:
        raise ConfigurationError("no API token given (the connection's password field)")
    if token != token.strip():
        raise ConfigurationError(
            "the API token (the connection's password field) has whitespace or a line break around it; "
            "store it without them"
        )
    for position, char in enumerate(token, start=1):
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F or code > 0xFF:
            kind = "a character beyond latin-1" if code > 0xFF else "a control character (line break, tab, ...)"
            raise ConfigurationError(
                f"the API token (the connection's password field) holds {kind} at position {position} of "
                f"{len(token)}, which an HTTP header cannot carry; paste the token again"
            )
    return token


def token_forms(token: str) -> list[str]:
    """The token as it may appear in a text: raw, repr-escaped (as ``str`` and as ``bytes``), percent-encoded and
    JSON-escaped; longest first, so that no shorter form leaves a piece of a longer one behind."""
    forms = {
        token,
        repr(token)[1:-1],
        repr(token.encode())[2:-1],
        repr(token.encode("latin-1"))[2:-1],
        quote(token, safe=""),
        json.dumps(token)[1:-1],
        json.dumps(token, ensure_ascii=False)[1:-1],
    }
    return sorted(forms, key=len, reverse=True)


def _byte_forms(forms: list[str]) -> list[bytes]:
    """The token's text forms as bytes in a body: UTF-8, and latin-1 where it differs; longest first."""
    encoded = {form.encode() for form in forms}
    for form in forms:
        try:
            encoded.add(form.encode("latin-1"))
        except UnicodeEncodeError:
            pass
    return sorted(encoded, key=len, reverse=True)


def _redact_text(text: str, forms: list[str]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, "***")
    return text


def _redact_bytes(body: bytes, forms: list[bytes]) -> bytes | None:
    """``body`` with every form replaced, or ``None`` when it holds none."""
    found = False
    for form in forms:
        if form in body:
            body = body.replace(form, b"***")
            found = True
    return body if found else None


def _ssl_verify(verify: bool | str) -> bool | ssl.SSLContext:
    if isinstance(verify, str):
        try:
            return ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"verify: cannot load the CA bundle {verify!r} ({exc})") from None
    return verify


class _Step:
    """The decision after one attempt: a result, or a wait before the next attempt."""

    __slots__ = ("result", "wait")

    def __init__(self, result: Any = None, wait: float | None = None) -> None:
        self.result = result
        self.wait = wait


class _BaseClient:
    """Configuration, deployment resolution and the shared attempt judgement."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        deployment_id: str | int | None = None,
        deployment_slug: str | None = None,
        timeout: float = 30.0,
        total_timeout: float | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        verify: bool | str = True,
        max_retries: int = 4,
        max_retry_seconds: float = 120.0,
        allow_insecure_http: bool = False,
        tracker_project_field: str = "tracker_project_id",
        tags_body: str = "array",
        transport: Any = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self._token = check_token(token)
        self._token_forms = token_forms(token)
        self._token_byte_forms = _byte_forms(self._token_forms)
        self.base_url = check_base_url(base_url, allow_insecure_http)
        self.total_timeout = default_total_timeout(timeout) if total_timeout is None else float(total_timeout)
        if not self.total_timeout > 0:
            raise ConfigurationError(f"total_timeout {total_timeout!r} must be a positive number of seconds")
        self.max_response_bytes = int(max_response_bytes)
        if self.max_response_bytes <= 0:
            raise ConfigurationError(f"max_response_bytes {max_response_bytes!r} must be a positive number of bytes")
        self.deployment_id = str(deployment_id) if deployment_id not in (None, "") else None
        if self.deployment_id is not None and not (self.deployment_id.isascii() and self.deployment_id.isdigit()):
            raise ConfigurationError(f"deployment_id {self.deployment_id!r} must be digits")
        self.deployment_slug = deployment_slug or None
        self.tracker_project_field = tracker_project_field
        if tags_body not in rq.TAGS_BODY_FORMS:
            raise ConfigurationError(
                f"tags_body {tags_body!r} is not allowed; expected 'array' (a bare JSON array, as the reference "
                "says) or 'object' ({\"tags\": [...]}, as the real service takes it)"
            )
        self.tags_body = tags_body
        self.retry_policy = retry_policy or RetryPolicy(
            max_retries=max_retries, max_total_seconds=max_retry_seconds
        )
        self._http_options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": {
                "Authorization": b"Bearer " + token.encode("latin-1"),
                "User-Agent": f"findings-provider/{__version__}",
            },
            "timeout": httpx.Timeout(timeout, connect=min(10.0, timeout)),
            "verify": _ssl_verify(verify),
            "limits": httpx.Limits(max_connections=10, max_keepalive_connections=5),
        }
        if transport is not None:
            self._http_options["transport"] = transport

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, deployment_id={self.deployment_id!r}, "
            f"deployment_slug={self.deployment_slug!r})"
        )

    # -- deployments ----------------------------------------------------------------------------------------

    def _needs_deployment(self, endpoint: Endpoint) -> bool:
        return (endpoint.scope == "id" and not self.deployment_id) or (
            endpoint.scope == "slug" and not self.deployment_slug
        )

    def _adopt_deployment(self, deployments: list[Deployment]) -> Deployment:
        """Fill the missing id or slug from the deployment list (the one configured, or the only one)."""
        match = [
            d
            for d in deployments
            if (self.deployment_id is None or d.id == self.deployment_id)
            and (self.deployment_slug is None or d.slug == self.deployment_slug)
        ]
        if len(match) != 1:
            known = ", ".join(f"{d.id}/{d.slug}" for d in deployments) or "none"
            raise ConfigurationError(
                f"cannot resolve the deployment (id={self.deployment_id!r}, slug={self.deployment_slug!r}); "
                f"the token sees: {known}. Set deployment_id and deployment_slug on the connection"
            )
        self.deployment_id = self.deployment_id or match[0].id
        self.deployment_slug = self.deployment_slug or match[0].slug
        return match[0]

    # -- one attempt: its response read within limits, then -> result, retry, or error -------------------------

    def _reader(self, endpoint: Endpoint) -> BodyReader:
        """The body reader of one attempt, created just before sending: its total deadline starts now."""
        return BodyReader(endpoint, self.total_timeout, self.max_response_bytes)

    def _judge(self, call: Call, outcome: Outcome, attempt: int, started: float) -> _Step:
        try:
            return self._judge_attempt(call, outcome, attempt, started)
        except FindingsApiError as exc:
            self._redact(exc, outcome.body)
            raise

    def _redact(self, exc: BaseException | None, body: bytes) -> None:
        """Replace the token (in every form it may take in a text) with ``***`` in an error and its chain.

        A server or proxy may echo the Authorization header in its body, and an HTTP library may quote it escaped
        or percent-encoded in its message; error messages reach logs and the UI.
        """
        forms = self._token_forms
        redacted = _redact_bytes(body, self._token_byte_forms) if body else None
        seen: set[int] = set()
        while isinstance(exc, FindingsApiError) and id(exc) not in seen:
            seen.add(id(exc))
            if exc.body_excerpt and redacted is not None:
                # cut the excerpt again from the redacted body: a token cut at the excerpt's end must not leak
                exc.body_excerpt = excerpt(redacted)
            exc.body_excerpt = _redact_text(exc.body_excerpt, forms)
            exc.message = _redact_text(exc.message, forms)
            exc.args = (exc._format(),)
            if exc.__suppress_context__:  # hidden by ``from None``, yet it may hold the body, token included
                exc.__context__ = None
            exc = exc.__cause__ or exc.__context__

    def _judge_attempt(self, call: Call, outcome: Outcome, attempt: int, started: float) -> _Step:
        endpoint = call.endpoint
        response, body, error = outcome.response, outcome.body, outcome.error
        if error is not None and not isinstance(error, httpx.RequestError):
            # the size cap, or an exception nobody expected, while sending or reading: never retried
            if endpoint.idempotent:
                raise error
            if isinstance(error, ResponseTooLargeError):
                raise ambiguous_write_error(
                    endpoint, "answered more than the size cap", status_code=error.status_code
                ) from error
            raise ambiguous_write_error(
                endpoint, f"failed while sending or reading ({type(error).__name__}: {error_text(error)})"
            ) from None
        if response is not None and 200 <= response.status_code < 300:
            try:
                return _Step(result=call.parse(body))
            except ResponseDecodeError as exc:
                if not endpoint.idempotent:
                    raise ambiguous_write_error(
                        endpoint,
                        f"answered {response.status_code} with a body that is not its documented response",
                        status_code=response.status_code,
                        body=body,
                    ) from exc
                if not exc.malformed:
                    raise
                wait = self.retry_policy.delay(attempt, started, None)
                if wait is None:
                    raise
                self._log_retry(endpoint, "a malformed body", attempt, wait)
                return _Step(wait=wait)
            except Exception as exc:
                if endpoint.idempotent:
                    raise
                raise ambiguous_write_error(
                    endpoint,
                    f"answered {response.status_code} with a body that could not be read ({type(exc).__name__})",
                    status_code=response.status_code,
                    body=body,
                ) from None
        if should_retry(endpoint, outcome):
            wait = self.retry_policy.delay(attempt, started, outcome.retry_after)
            if wait is not None:
                reason = f"HTTP {response.status_code}" if response is not None else type(error).__name__
                self._log_retry(endpoint, reason, attempt, wait)
                return _Step(wait=wait)
        if error is not None:
            raise final_transport_error(endpoint, error, attempt) from None
        assert response is not None
        if not endpoint.idempotent and not 400 <= response.status_code < 500:
            # 1xx, 3xx (redirects are not followed) and 5xx: only a 4xx is a refusal before processing
            raise ambiguous_write_error(
                endpoint, f"answered {response.status_code}", status_code=response.status_code, body=body
            )
        raise error_for_status(endpoint, response.status_code, body, outcome.retry_after)

    def _log_retry(self, endpoint: Endpoint, reason: str, attempt: int, wait: float) -> None:
        log.warning(
            "retrying %s %s after %s (retry %d of %d, waiting %.2fs)",
            endpoint.method,
            endpoint.name,
            reason,
            attempt,
            self.retry_policy.max_retries,
            wait,
        )

    def _request_args(self, call: Call) -> dict[str, Any]:
        args: dict[str, Any] = {
            "method": call.endpoint.method,
            "url": call.path(self.deployment_id, self.deployment_slug),
        }
        if call.params:
            args["params"] = call.params
        if call.json is not None:
            args["json"] = call.json
        return args


class _Operations(_BaseClient):
    """Every API operation, defined once. ``_call`` and ``_paginate`` come from the sync or async subclass."""

    def _call(self, call: Call, post: Callable[[Any], Any] | None = None) -> Any:
        raise NotImplementedError

    def _paginate(self, pager: OffsetPager | CursorPager) -> Any:
        raise NotImplementedError

    def _items(self, pages: Any, key: Callable[[Any], Any] | None = None) -> Any:
        raise NotImplementedError

    # -- deployments (GET /api/v1/deployments) ------------------------------------------------------------------

    def list_deployments(self) -> list[Deployment]:
        """List the deployments the token sees."""
        return self._call(Call(ENDPOINTS["deployments"]), post=lambda r: r.deployments)

    # -- dependencies (4.1, 4.2): mixed pagination ---------------------------------------------------------------

    def _dependencies_call(self, cursor: str | None, page_size: int | None, dependency_filter: Any) -> Call:
        q = rq.validate(
            rq.DependenciesQuery,
            "list dependencies",
            cursor=cursor,
            dependencyFilter=dependency_filter,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        return Call(ENDPOINTS["dependencies"], json=self._with_deployment_id(q.body()))

    def list_dependencies(self, *, cursor=None, page_size=None, dependency_filter=None):
        """One page of the dependency inventory (4.1). ``page_size`` 1-10000 (default 1000)."""
        return self._call(self._dependencies_call(cursor, page_size, dependency_filter))

    def iter_dependency_pages(self, *, page_size=None, dependency_filter=None, start_cursor=None):
        """Pages of dependencies, lazily, from ``start_cursor`` (or the start) to ``hasMore: false``."""
        return self._paginate(
            CursorPager(lambda c: self._dependencies_call(c, page_size, dependency_filter), start_cursor)
        )

    def iter_dependencies(self, **kwargs):
        """Every dependency, lazily (one page held at a time)."""
        return self._items(self.iter_dependency_pages(**kwargs))

    def _repositories_call(self, cursor: Any, page_size: int | None, dependency_filter: Any) -> Call:
        q = rq.validate(
            rq.RepositoriesQuery,
            "list repositories with dependencies",
            cursor=int(cursor) if isinstance(cursor, str) and cursor.isdigit() else cursor,
            dependencyFilter=dependency_filter,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        return Call(ENDPOINTS["dependency_repositories"], json=self._with_deployment_id(q.body()))

    def list_repositories_with_dependencies(self, *, cursor=None, page_size=None, dependency_filter=None):
        """One page of repositories with dependencies (4.2). ``page_size`` 1-100 (default 5)."""
        return self._call(self._repositories_call(cursor, page_size, dependency_filter))

    def iter_repository_pages(self, *, page_size=None, dependency_filter=None, start_cursor=None):
        """Pages of repositories with dependencies, lazily."""
        return self._paginate(
            CursorPager(lambda c: self._repositories_call(c, page_size, dependency_filter), start_cursor)
        )

    def iter_repositories_with_dependencies(self, **kwargs):
        """Every repository summary, lazily."""
        return self._items(self.iter_repository_pages(**kwargs))

    def _with_deployment_id(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.deployment_id:
            body.setdefault("deploymentId", self.deployment_id)
        return body

    # -- scans (4.3, 4.4) ---------------------------------------------------------------------------------------

    def _scans_call(self, cursor: str | None, filters: dict[str, Any]) -> Call:
        q = rq.validate(rq.ScanSearch, "search scans", cursor=cursor, **filters)
        return Call(ENDPOINTS["scans_search"], json=self._with_deployment_id(q.body()))

    def search_scans(self, *, cursor=None, **filters):
        """One page of scan search (4.3). Filters: since, statuses, repository_id, branch, is_full_scan, products,
        total_time, limit (1-500, default 100)."""
        return self._call(self._scans_call(cursor, filters))

    def iter_scan_pages(self, *, start_cursor=None, **filters):
        """Pages of scan search results, lazily, to the end of the cursor chain."""
        return self._paginate(CursorPager(lambda c: self._scans_call(c, filters), start_cursor))

    def iter_scans(self, **filters):
        """Every scan matching the filters, lazily."""
        return self._items(self.iter_scan_pages(**filters), key=lambda s: s.id)

    def get_scan(self, scan_id: str | int):
        """Details of one scan (4.4); ``.status`` is derived (the service sends none here)."""
        return self._call(Call(ENDPOINTS["scan_get"], {"scan_id": _digits("scan_id", scan_id)}))

    # -- policies (4.5, 4.6) ------------------------------------------------------------------------------------

    def list_policies(self):
        """The deployment's policies (where policy ids are found)."""
        return self._call(Call(ENDPOINTS["policies_list"]), post=lambda r: r.policies)

    def _rules_call(self, policy_id: str, cursor: str | None, limit: int | None) -> Call:
        limits = {"limit": limit} if limit is not None else {}
        q = rq.validate(rq.PolicyRulesQuery, "list policy rules", cursor=cursor, **limits)
        return Call(ENDPOINTS["policy_rules"], {"policy_id": policy_id}, params=list(q.body().items()))

    def list_policy_rules(self, policy_id: str | int, *, cursor=None, limit=None):
        """One page of a policy's rules (4.5). ``limit`` up to 2000 (default 500)."""
        return self._call(self._rules_call(_digits("policy_id", policy_id), cursor, limit))

    def iter_policy_rule_pages(self, policy_id: str | int, *, limit=None, start_cursor=None):
        """Pages of a policy's rules, lazily."""
        pid = _digits("policy_id", policy_id)
        return self._paginate(CursorPager(lambda c: self._rules_call(pid, c, limit), start_cursor))

    def iter_policy_rules(self, policy_id: str | int, **kwargs):
        """Every rule of a policy, lazily."""
        return self._items(self.iter_policy_rule_pages(policy_id, **kwargs))

    def update_rule_mode(self, policy_id: str | int, rule_path: str, mode: str):
        """Set one rule's mode (4.6); returns the updated rule."""
        q = rq.validate(
            rq.UpdatePolicy,
            "update policy",
            deploymentId=self.deployment_id,
            policyId=str(policy_id),
            policyMode=mode,
            rulePath=rule_path,
        )
        return self._call(Call(ENDPOINTS["policy_update"], {"policy_id": q.policyId}, json=q.body()))

    # -- findings (4.8) -----------------------------------------------------------------------------------------

    def _findings_call(self, issue_type: str, page: int, page_size: int, filters: dict, raw: bool) -> Call:
        q = rq.validate(
            rq.FindingsQuery,
            "list findings",
            issue_type=issue_type,
            page=page,
            page_size=page_size,
            **filters,
        )
        endpoint = ENDPOINTS["findings"]
        return Call(endpoint, params=q.params(), parser=raw_findings_parser(endpoint) if raw else None)

    def list_findings(self, issue_type: str = "sast", *, page: int = 0, page_size: int = 100, **filters):
        """One page of code (``sast``) or supply-chain (``sca``) findings with the filters of 4.8."""
        return self._call(self._findings_call(issue_type, page, page_size, filters, raw=False))

    def iter_finding_pages(self, issue_type="sast", *, page_size=FINDINGS_PAGE_SIZE.maximum, start_page=0, raw=False,
                           **filters):
        """Pages of findings, lazily, from ``start_page`` until a short or empty page.

        With ``raw=True`` each page is a ``RawFindingsPage`` whose ``items`` are the exact bytes of each finding
        (the extraction fast path); otherwise a typed ``FindingsPage``.
        """
        return self._paginate(
            OffsetPager(
                lambda p: self._findings_call(issue_type, p, page_size, filters, raw), page_size, start_page
            )
        )

    def iter_findings(self, issue_type="sast", **kwargs):
        """Every finding, lazily, de-duplicated by id within the run (the result set moves while paging)."""
        return self._items(self.iter_finding_pages(issue_type, **kwargs), key=lambda f: f.id)

    # -- secrets (4.15): cursor pagination -------------------------------------------------------------------------

    def _secrets_call(self, cursor: str | None, limit: int | None, raw: bool) -> Call:
        limits = {"limit": limit} if limit is not None else {}
        q = rq.validate(rq.SecretsQuery, "list secrets", cursor=cursor, **limits)
        endpoint = ENDPOINTS["secrets"]
        return Call(
            endpoint, params=list(q.body().items()), parser=raw_findings_parser(endpoint) if raw else None
        )

    def list_secrets(self, *, cursor=None, limit=None):
        """One page of secrets findings (4.15)."""
        return self._call(self._secrets_call(cursor, limit, raw=False))

    def iter_secret_pages(self, *, limit=None, start_cursor=None, raw=False):
        """Pages of secrets findings, lazily, until the cursor runs out."""
        return self._paginate(CursorPager(lambda c: self._secrets_call(c, limit, raw), start_cursor))

    def iter_secrets(self, **kwargs):
        """Every secrets finding, lazily, de-duplicated by id."""
        return self._items(self.iter_secret_pages(**kwargs), key=lambda f: f.id)

    # -- bulk triage (4.10) and tickets (4.7) ----------------------------------------------------------------------

    def bulk_triage(self, request: rq.TriageRequest | None = None, /, **fields):
        """Bulk-change the triage state of the selected findings (4.10).

        Pass a ``TriageRequest`` or its fields. A request with neither ``issue_ids`` nor any filter is refused
        unless ``allow_unfiltered=True``.
        """
        req = request or rq.validate(rq.TriageRequest, "bulk triage", **fields)
        return self._call(Call(ENDPOINTS["triage"], json=self._with_slug(req.body())))

    def create_tickets(self, request: rq.TicketRequest | None = None, /, **fields):
        """Create issue-tracker tickets for the selected findings (4.7). Never retried after an ambiguous failure:
        that raises ``AmbiguousWriteError``."""
        req = request or rq.validate(rq.TicketRequest, "create tickets", **fields)
        body = self._with_slug(req.body_with_tracker_field(self.tracker_project_field))
        return self._call(Call(ENDPOINTS["tickets"], json=body))

    def _with_slug(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.deployment_slug:
            body.setdefault("deploymentSlug", self.deployment_slug)
        return body

    # -- projects (4.9, 4.12, 4.13, list) ------------------------------------------------------------------------

    def _projects_call(self, page: int, page_size: int) -> Call:
        q = rq.validate(rq.ProjectsQuery, "list projects", page=page, page_size=page_size)
        return Call(ENDPOINTS["projects"], params=list(q.body().items()))

    def list_projects(self, *, page: int = 0, page_size: int = 100):
        """One page of the deployment's projects."""
        return self._call(self._projects_call(page, page_size))

    def iter_project_pages(self, *, page_size: int = 100, start_page: int = 0):
        """Pages of projects, lazily, until a short page."""
        return self._paginate(OffsetPager(lambda p: self._projects_call(p, page_size), page_size, start_page))

    def iter_projects(self, **kwargs):
        """Every project, lazily."""
        return self._items(self.iter_project_pages(**kwargs), key=lambda p: p.name)

    def set_managed_scans(
        self, project_name: str, *, diff_scan: bool | None = None, full_scan: bool | None = None
    ):
        """Enable or disable managed diff and/or full scans of a project (4.9); returns the project."""
        q = rq.validate(
            rq.ManagedScanUpdate,
            "toggle managed scans",
            deploymentSlug=self.deployment_slug,
            projectName=project_name,
            diff_scan=None if diff_scan is None else {"enabled": diff_scan},
            full_scan=None if full_scan is None else {"enabled": full_scan},
        )
        call = Call(ENDPOINTS["managed_scan"], {"project_name": q.projectName}, json=q.body())
        return self._call(call, post=lambda r: r.project)

    def add_project_tags(self, project_name: str, tags: Iterable[str]):
        """Add tags to a project (4.12); returns the project."""
        q = rq.validate(rq.Tags, "add project tags", project_name=project_name, tags=list(tags))
        call = Call(ENDPOINTS["tags_add"], {"project_name": q.project_name}, json=q.add_body(self.tags_body))
        return self._call(call, post=lambda r: r.project)

    def remove_project_tags(self, project_name: str, tags: Iterable[str]):
        """Remove tags from a project (4.13); returns the project. The tags go as repeated ``tags`` query keys; with
        ``tags_body="object"`` also as a ``{"tags": [...]}`` body."""
        q = rq.validate(rq.Tags, "remove project tags", project_name=project_name, tags=list(tags))
        call = Call(
            ENDPOINTS["tags_remove"],
            {"project_name": q.project_name},
            params=[("tags", t) for t in q.tags],
            json=q.remove_body(self.tags_body),
        )
        return self._call(call, post=lambda r: r.project)


def _digits(name: str, value: str | int) -> str:
    text = str(value)
    if not (text.isascii() and text.isdigit()):  # str.isdigit() alone accepts "¹" and other Unicode digits
        raise rq.ValidationError(f"{name} {value!r} must be a numeric id (digits only)", field=name)
    return text


class FindingsClient(_Operations):
    """Synchronous client: one pooled ``httpx.Client``. Use as a context manager or call ``close()``."""

    def __init__(self, base_url: str, token: str, **kwargs: Any) -> None:
        super().__init__(base_url, token, **kwargs)
        self._http = httpx.Client(**self._http_options)

    def __enter__(self) -> FindingsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def resolve_deployment(self) -> Deployment:
        """Fill in the deployment id or slug that is not configured, from the deployment list."""
        return self._adopt_deployment(self.list_deployments())

    def _call(self, call: Call, post: Callable[[Any], Any] | None = None) -> Any:
        if self._needs_deployment(call.endpoint):
            self.resolve_deployment()
        args = self._request_args(call)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            step = self._judge(call, self._attempt(call, self._http.build_request(**args)), attempt, started)
            if step.wait is None:
                return post(step.result) if post else step.result
            time.sleep(step.wait)

    def _attempt(self, call: Call, request: httpx.Request) -> Outcome:
        """Send once and stream the body through the attempt's reader; any failure becomes the outcome's error."""
        reader = self._reader(call.endpoint)
        try:
            response = self._http.send(request, stream=True)
            try:
                reader.start(response)
                for chunk in response.iter_bytes():
                    reader.feed(chunk)
            finally:
                response.close()
        except Exception as exc:  # judged by ``_judge``: retried, ambiguous, or raised as it is
            return Outcome(error=exc)
        return reader.outcome(response)

    def _paginate(self, pager: OffsetPager | CursorPager) -> Iterator[Any]:
        call: Call | None = pager.first
        while call is not None:
            page = self._call(call)
            yield page
            call = pager.next(page)

    def _items(self, pages: Iterator[Any], key: Callable[[Any], Any] | None = None) -> Iterator[Any]:
        seen: set[Any] = set()
        for page in pages:
            for item in page.items:
                if key is not None:
                    k = key(item)
                    if k in seen:
                        continue
                    seen.add(k)
                yield item


class AsyncFindingsClient(_Operations):
    """Asynchronous client for triggers: the same operations, awaited. Use ``async with`` or ``aclose()``."""

    def __init__(self, base_url: str, token: str, **kwargs: Any) -> None:
        super().__init__(base_url, token, **kwargs)
        self._http = httpx.AsyncClient(**self._http_options)

    async def __aenter__(self) -> AsyncFindingsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def resolve_deployment(self) -> Deployment:
        """Fill in the deployment id or slug that is not configured, from the deployment list."""
        return self._adopt_deployment(await self.list_deployments())

    async def _call(self, call: Call, post: Callable[[Any], Any] | None = None) -> Any:  # type: ignore[override]
        if self._needs_deployment(call.endpoint):
            await self.resolve_deployment()
        args = self._request_args(call)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            outcome = await self._attempt(call, self._http.build_request(**args))
            step = self._judge(call, outcome, attempt, started)
            if step.wait is None:
                return post(step.result) if post else step.result
            await asyncio.sleep(step.wait)

    async def _attempt(self, call: Call, request: httpx.Request) -> Outcome:
        """Send once and stream the body through the attempt's reader; any failure becomes the outcome's error."""
        reader = self._reader(call.endpoint)
        try:
            response = await self._http.send(request, stream=True)
            try:
                reader.start(response)
                async for chunk in response.aiter_bytes():
                    reader.feed(chunk)
            finally:
                await response.aclose()
        except Exception as exc:  # judged by ``_judge``: retried, ambiguous, or raised as it is
            return Outcome(error=exc)
        return reader.outcome(response)

    async def _paginate(self, pager: OffsetPager | CursorPager) -> AsyncIterator[Any]:  # type: ignore[override]
        call: Call | None = pager.first
        while call is not None:
            page = await self._call(call)
            yield page
            call = pager.next(page)

    async def _items(self, pages: AsyncIterator[Any], key=None) -> AsyncIterator[Any]:  # type: ignore[override]
        seen: set[Any] = set()
        async for page in pages:
            for item in page.items:
                if key is not None:
                    k = key(item)
                    if k in seen:
                        continue
                    seen.add(k)
                yield item
