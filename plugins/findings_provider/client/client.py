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
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload
from urllib.parse import quote, urlsplit

import httpx

from findings_provider import __version__
from findings_provider.client import endpoints as ep
from findings_provider.client import models as m
from findings_provider.client import requests as rq
from findings_provider.client.endpoints import (
    Call,
    Endpoint,
    RawFindingsPage,
    error_for_status,
    raw_findings_parser,
)
from findings_provider.client.errors import (
    ConfigurationError,
    FindingsApiError,
    ResponseDecodeError,
    ResponseTooLargeError,
    ValidationError,
    excerpt,
)
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.client.models import Deployment
from findings_provider.client.pagination import CursorPager, OffsetPager, P, Page
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

T = TypeVar("T")
U = TypeVar("U")
I = TypeVar("I")  # noqa: E741  an item of a page

#: A dependency filter: the request model, or its fields as a dict (validated into it).
DependencyFilterArg = rq.DependencyFilter | dict[str, Any] | None

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


def check_download_url(url: str, allow_insecure_http: bool = False) -> str:
    """Validate a link the service handed out (an SBOM ``downloadUrl``): http(s) with a host, and https unless the
    host is loopback or the connection allows insecure http. Any host is accepted: the token is never sent there."""
    parts = urlsplit(url.strip()) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(
            f"download URL {url!r} is not an http(s) URL with a host: expected the downloadUrl of a completed "
            "export (get_sbom_export)",
            field="download_url",
        )
    if parts.scheme == "http" and not allow_insecure_http and not is_loopback(parts.hostname):
        raise ValidationError(
            f"download URL {url!r} uses plain http to a non-loopback host: refused; the link should be https, or "
            "set allow_insecure_http=true on the connection if you really mean it",
            field="download_url",
        )
    return url.strip()


#: The shortest token accepted. Airflow's log masker skips secrets shorter than 5 characters (``[logging]
#: min_length_masked_secret``), so a shorter token would show in task logs; no real token is this short.
MIN_TOKEN_LENGTH = 8


def check_token(token: str) -> str:
    """Return ``token`` if it can be sent as is in an ``Authorization`` header; else ``ConfigurationError``.

    Refused: an empty token, one shorter than ``MIN_TOKEN_LENGTH`` (it could not be masked in logs), surrounding
    whitespace, and any character a header value cannot carry (below 0x20, 0x7f-0x9f, beyond latin-1). The
    message says where, never what: it holds no part of the token.
    """
    if not token:
        raise ConfigurationError("no API token given (the connection's password field)")
    if len(token.strip()) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"the API token (the connection's password field) has {len(token.strip())} characters: at least "
            f"{MIN_TOKEN_LENGTH} are needed (a shorter secret cannot be masked in Airflow's logs); paste the whole "
            "token"
        )
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
        self.allow_insecure_http = bool(allow_insecure_http)
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
        #: The plain client of links the service hands out (the SBOM download): no base URL, never the token, and
        #: every redirect hop checked as the link itself (``check_download_url``).
        self._download_options: dict[str, Any] = {
            **{k: v for k, v in self._http_options.items() if k != "base_url"},
            "headers": {"User-Agent": self._http_options["headers"]["User-Agent"]},
            "follow_redirects": True,
        }
        if transport is not None:
            self._http_options["transport"] = transport
            self._download_options["transport"] = transport

    def _check_hop(self, request: httpx.Request) -> None:
        """Refuse a redirect of a download to plain http (the first URL is checked before the call)."""
        check_download_url(str(request.url), self.allow_insecure_http)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, deployment_id={self.deployment_id!r}, "
            f"deployment_slug={self.deployment_slug!r})"
        )

    # -- deployments ----------------------------------------------------------------------------------------

    def _needs_deployment(self, endpoint: Endpoint[Any]) -> bool:
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

    def _reader(self, call: Call[Any]) -> BodyReader:
        """The body reader of one attempt, created just before sending: its total deadline starts now."""
        return BodyReader(call.endpoint, self.total_timeout, call.max_bytes or self.max_response_bytes)

    def _judge(self, call: Call[Any], outcome: Outcome, attempt: int, started: float) -> _Step:
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

    def _judge_attempt(self, call: Call[Any], outcome: Outcome, attempt: int, started: float) -> _Step:
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

    def _log_retry(self, endpoint: Endpoint[Any], reason: str, attempt: int, wait: float) -> None:
        log.warning(
            "retrying %s %s after %s (retry %d of %d, waiting %.2fs)",
            endpoint.method,
            endpoint.name,
            reason,
            attempt,
            self.retry_policy.max_retries,
            wait,
        )

    def _request_args(self, call: Call[Any]) -> dict[str, Any]:
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
    """Every API operation, defined once. ``_call`` and ``_paginate`` come from the sync or async subclass.

    The annotations are the sync client's; the async client's (a coroutine of ``T`` for a call, an
    ``AsyncIterator[T]`` for an iterator) are generated from them into ``_async_surface``
    (``python devtools/client_surface.py``).
    """

    @overload
    def _call(self, call: Call[T]) -> T: ...

    @overload
    def _call(self, call: Call[T], post: Callable[[T], U]) -> U: ...

    def _call(self, call: Call[Any], post: Callable[[Any], Any] | None = None) -> Any:
        raise NotImplementedError

    def _paginate(self, pager: OffsetPager[P] | CursorPager[P]) -> Iterator[P]:
        raise NotImplementedError

    def _items(self, pages: Iterator[Page[I]], key: Callable[[I], Hashable] | None = None) -> Iterator[I]:
        raise NotImplementedError

    # -- deployments (GET /api/v1/deployments) ------------------------------------------------------------------

    def list_deployments(self) -> list[m.Deployment]:
        """List the deployments the token sees."""
        return self._call(Call(ep.DEPLOYMENTS), post=lambda r: r.deployments)

    # -- dependencies (4.1, 4.2): mixed pagination ---------------------------------------------------------------

    def _dependencies_call(
        self, cursor: str | None, page_size: int | None, dependency_filter: DependencyFilterArg
    ) -> Call[m.DependenciesPage]:
        q = rq.validate(
            rq.DependenciesQuery,
            "list dependencies",
            cursor=cursor,
            dependencyFilter=dependency_filter,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        return Call(ep.DEPENDENCIES, json=self._with_deployment_id(q.body()))

    def list_dependencies(
        self,
        *,
        cursor: str | None = None,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
    ) -> m.DependenciesPage:
        """One page of the dependency inventory (4.1). ``page_size`` 1-10000 (default 1000)."""
        return self._call(self._dependencies_call(cursor, page_size, dependency_filter))

    def iter_dependency_pages(
        self,
        *,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
        start_cursor: str | None = None,
    ) -> Iterator[m.DependenciesPage]:
        """Pages of dependencies, lazily, from ``start_cursor`` (or the start) to ``hasMore: false``."""
        return self._paginate(
            CursorPager(lambda c: self._dependencies_call(c, page_size, dependency_filter), start_cursor)
        )

    def iter_dependencies(
        self,
        *,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
        start_cursor: str | None = None,
    ) -> Iterator[m.Dependency]:
        """Every dependency, lazily (one page held at a time)."""
        return self._items(
            self.iter_dependency_pages(
                page_size=page_size, dependency_filter=dependency_filter, start_cursor=start_cursor
            )
        )

    def _repositories_call(
        self, cursor: str | int | None, page_size: int | None, dependency_filter: DependencyFilterArg
    ) -> Call[m.RepositoriesPage]:
        q = rq.validate(
            rq.RepositoriesQuery,
            "list repositories with dependencies",
            cursor=int(cursor) if isinstance(cursor, str) and cursor.isdigit() else cursor,
            dependencyFilter=dependency_filter,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        return Call(ep.DEPENDENCY_REPOSITORIES, json=self._with_deployment_id(q.body()))

    def list_repositories_with_dependencies(
        self,
        *,
        cursor: str | int | None = None,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
    ) -> m.RepositoriesPage:
        """One page of repositories with dependencies (4.2). ``page_size`` 1-100 (default 5)."""
        return self._call(self._repositories_call(cursor, page_size, dependency_filter))

    def iter_repository_pages(
        self,
        *,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
        start_cursor: str | None = None,
    ) -> Iterator[m.RepositoriesPage]:
        """Pages of repositories with dependencies, lazily."""
        return self._paginate(
            CursorPager(lambda c: self._repositories_call(c, page_size, dependency_filter), start_cursor)
        )

    def iter_repositories_with_dependencies(
        self,
        *,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
        start_cursor: str | None = None,
    ) -> Iterator[m.RepositorySummary]:
        """Every repository summary, lazily."""
        return self._items(
            self.iter_repository_pages(
                page_size=page_size, dependency_filter=dependency_filter, start_cursor=start_cursor
            )
        )

    def _with_deployment_id(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.deployment_id:
            body.setdefault("deploymentId", self.deployment_id)
        return body

    # -- scans (4.3, 4.4) ---------------------------------------------------------------------------------------

    def _scans_call(self, cursor: str | None, filters: dict[str, Any]) -> Call[m.ScansPage]:
        q = rq.validate(rq.ScanSearch, "search scans", cursor=cursor, **filters)
        return Call(ep.SCANS_SEARCH, json=self._with_deployment_id(q.body()))

    def search_scans(self, *, cursor: str | None = None, **filters: Any) -> m.ScansPage:
        """One page of scan search (4.3). Filters: since, statuses, repository_id, branch, is_full_scan, products,
        total_time, limit (1-500, default 100)."""
        return self._call(self._scans_call(cursor, filters))

    def iter_scan_pages(self, *, start_cursor: str | None = None, **filters: Any) -> Iterator[m.ScansPage]:
        """Pages of scan search results, lazily, to the end of the cursor chain."""
        return self._paginate(CursorPager(lambda c: self._scans_call(c, filters), start_cursor))

    def iter_scans(self, **filters: Any) -> Iterator[m.Scan]:
        """Every scan matching the filters, lazily."""
        return self._items(self.iter_scan_pages(**filters), key=lambda s: s.id)

    def get_scan(self, scan_id: str | int) -> m.ScanDetails:
        """Details of one scan (4.4); ``.status`` is derived (the service sends none here)."""
        return self._call(Call(ep.SCAN_GET, {"scan_id": _digits("scan_id", scan_id)}))

    # -- policies (4.5, 4.6) ------------------------------------------------------------------------------------

    def list_policies(self) -> list[m.Policy]:
        """The deployment's policies (where policy ids are found)."""
        return self._call(Call(ep.POLICIES_LIST), post=lambda r: r.policies)

    def _rules_call(self, policy_id: str, cursor: str | None, limit: int | None) -> Call[m.PolicyRulesPage]:
        limits = {"limit": limit} if limit is not None else {}
        q = rq.validate(rq.PolicyRulesQuery, "list policy rules", cursor=cursor, **limits)
        return Call(ep.POLICY_RULES, {"policy_id": policy_id}, params=list(q.body().items()))

    def list_policy_rules(
        self, policy_id: str | int, *, cursor: str | None = None, limit: int | None = None
    ) -> m.PolicyRulesPage:
        """One page of a policy's rules (4.5). ``limit`` up to 2000 (default 500)."""
        return self._call(self._rules_call(_digits("policy_id", policy_id), cursor, limit))

    def iter_policy_rule_pages(
        self, policy_id: str | int, *, limit: int | None = None, start_cursor: str | None = None
    ) -> Iterator[m.PolicyRulesPage]:
        """Pages of a policy's rules, lazily."""
        pid = _digits("policy_id", policy_id)
        return self._paginate(CursorPager(lambda c: self._rules_call(pid, c, limit), start_cursor))

    def iter_policy_rules(
        self, policy_id: str | int, *, limit: int | None = None, start_cursor: str | None = None
    ) -> Iterator[m.Rule]:
        """Every rule of a policy, lazily."""
        return self._items(self.iter_policy_rule_pages(policy_id, limit=limit, start_cursor=start_cursor))

    def update_rule_mode(self, policy_id: str | int, rule_path: str, mode: str) -> m.UpdatePolicyResponse:
        """Set one rule's mode (4.6); returns the updated rule."""
        q = rq.validate(
            rq.UpdatePolicy,
            "update policy",
            deploymentId=self.deployment_id,
            policyId=str(policy_id),
            policyMode=mode,
            rulePath=rule_path,
        )
        return self._call(Call(ep.POLICY_UPDATE, {"policy_id": q.policyId}, json=q.body()))

    # -- findings (4.8) -----------------------------------------------------------------------------------------

    def _findings_query(self, issue_type: str, page: int, page_size: int, filters: dict[str, Any]) -> rq.FindingsQuery:
        return rq.validate(
            rq.FindingsQuery,
            "list findings",
            issue_type=issue_type,
            page=page,
            page_size=page_size,
            **filters,
        )

    def _findings_call(
        self, issue_type: str, page: int, page_size: int, filters: dict[str, Any]
    ) -> Call[m.FindingsPage]:
        return Call(ep.FINDINGS, params=self._findings_query(issue_type, page, page_size, filters).params())

    def _raw_findings_call(
        self, issue_type: str, page: int, page_size: int, filters: dict[str, Any]
    ) -> Call[RawFindingsPage]:
        q = self._findings_query(issue_type, page, page_size, filters)
        return Call(ep.FINDINGS, params=q.params(), parser=raw_findings_parser(ep.FINDINGS))

    def list_findings(
        self, issue_type: str = "sast", *, page: int = 0, page_size: int = 100, **filters: Any
    ) -> m.FindingsPage:
        """One page of code (``sast``) or supply-chain (``sca``) findings with the filters of 4.8."""
        return self._call(self._findings_call(issue_type, page, page_size, filters))

    @overload
    def iter_finding_pages(
        self,
        issue_type: str = ...,
        *,
        page_size: int = ...,
        start_page: int = ...,
        raw: Literal[False] = ...,
        **filters: Any,
    ) -> Iterator[m.FindingsPage]: ...

    @overload
    def iter_finding_pages(
        self,
        issue_type: str = ...,
        *,
        page_size: int = ...,
        start_page: int = ...,
        raw: Literal[True],
        **filters: Any,
    ) -> Iterator[RawFindingsPage]: ...

    def iter_finding_pages(
        self,
        issue_type: str = "sast",
        *,
        page_size: int = FINDINGS_PAGE_SIZE.maximum,
        start_page: int = 0,
        raw: bool = False,
        **filters: Any,
    ) -> Iterator[m.FindingsPage] | Iterator[RawFindingsPage]:
        """Pages of findings, lazily, from ``start_page`` until a short or empty page.

        With ``raw=True`` each page is a ``RawFindingsPage`` whose ``items`` are the exact bytes of each finding
        (the extraction fast path); otherwise a typed ``FindingsPage``.
        """
        if raw:
            return self._paginate(
                OffsetPager(
                    lambda p: self._raw_findings_call(issue_type, p, page_size, filters), page_size, start_page
                )
            )
        return self._paginate(
            OffsetPager(lambda p: self._findings_call(issue_type, p, page_size, filters), page_size, start_page)
        )

    def iter_findings(
        self,
        issue_type: str = "sast",
        *,
        page_size: int = FINDINGS_PAGE_SIZE.maximum,
        start_page: int = 0,
        **filters: Any,
    ) -> Iterator[m.Finding]:
        """Every finding, lazily, de-duplicated by id within the run (the result set moves while paging)."""
        pages = self.iter_finding_pages(issue_type, page_size=page_size, start_page=start_page, raw=False, **filters)
        return self._items(pages, key=lambda f: f.id)

    # -- secrets (4.15): cursor pagination -------------------------------------------------------------------------

    def _secrets_query(self, cursor: str | None, limit: int | None) -> rq.SecretsQuery:
        limits = {"limit": limit} if limit is not None else {}
        return rq.validate(rq.SecretsQuery, "list secrets", cursor=cursor, **limits)

    def _secrets_call(self, cursor: str | None, limit: int | None) -> Call[m.SecretsPage]:
        return Call(ep.SECRETS, params=list(self._secrets_query(cursor, limit).body().items()))

    def _raw_secrets_call(self, cursor: str | None, limit: int | None) -> Call[RawFindingsPage]:
        params = list(self._secrets_query(cursor, limit).body().items())
        return Call(ep.SECRETS, params=params, parser=raw_findings_parser(ep.SECRETS))

    def list_secrets(self, *, cursor: str | None = None, limit: int | None = None) -> m.SecretsPage:
        """One page of secrets findings (4.15)."""
        return self._call(self._secrets_call(cursor, limit))

    @overload
    def iter_secret_pages(
        self, *, limit: int | None = ..., start_cursor: str | None = ..., raw: Literal[False] = ...
    ) -> Iterator[m.SecretsPage]: ...

    @overload
    def iter_secret_pages(
        self, *, limit: int | None = ..., start_cursor: str | None = ..., raw: Literal[True]
    ) -> Iterator[RawFindingsPage]: ...

    def iter_secret_pages(
        self, *, limit: int | None = None, start_cursor: str | None = None, raw: bool = False
    ) -> Iterator[m.SecretsPage] | Iterator[RawFindingsPage]:
        """Pages of secrets findings, lazily, until the cursor runs out."""
        if raw:
            return self._paginate(CursorPager(lambda c: self._raw_secrets_call(c, limit), start_cursor))
        return self._paginate(CursorPager(lambda c: self._secrets_call(c, limit), start_cursor))

    def iter_secrets(self, *, limit: int | None = None, start_cursor: str | None = None) -> Iterator[m.Finding]:
        """Every secrets finding, lazily, de-duplicated by id."""
        pages = self.iter_secret_pages(limit=limit, start_cursor=start_cursor, raw=False)
        return self._items(pages, key=lambda f: f.id)

    # -- bulk triage (4.10) and tickets (4.7) ----------------------------------------------------------------------

    def bulk_triage(self, request: rq.TriageRequest | None = None, /, **fields: Any) -> m.TriageResult:
        """Bulk-change the triage state of the selected findings (4.10).

        Pass a ``TriageRequest`` or its fields. A request with neither ``issue_ids`` nor any filter is refused
        unless ``allow_unfiltered=True``.
        """
        req = request or rq.validate(rq.TriageRequest, "bulk triage", **fields)
        return self._call(Call(ep.TRIAGE, json=self._with_slug(req.body())))

    def create_tickets(self, request: rq.TicketRequest | None = None, /, **fields: Any) -> m.TicketResult:
        """Create issue-tracker tickets for the selected findings (4.7). Never retried after an ambiguous failure:
        that raises ``AmbiguousWriteError``."""
        req = request or rq.validate(rq.TicketRequest, "create tickets", **fields)
        body = self._with_slug(req.body_with_tracker_field(self.tracker_project_field))
        return self._call(Call(ep.TICKETS, json=body))

    def _with_slug(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.deployment_slug:
            body.setdefault("deploymentSlug", self.deployment_slug)
        return body

    # -- projects (4.9, 4.12, 4.13, list) ------------------------------------------------------------------------

    def _projects_call(self, page: int, page_size: int) -> Call[m.ProjectsPage]:
        q = rq.validate(rq.ProjectsQuery, "list projects", page=page, page_size=page_size)
        return Call(ep.PROJECTS, params=list(q.body().items()))

    def list_projects(self, *, page: int = 0, page_size: int = 100) -> m.ProjectsPage:
        """One page of the deployment's projects."""
        return self._call(self._projects_call(page, page_size))

    def iter_project_pages(self, *, page_size: int = 100, start_page: int = 0) -> Iterator[m.ProjectsPage]:
        """Pages of projects, lazily, until a short page."""
        return self._paginate(OffsetPager(lambda p: self._projects_call(p, page_size), page_size, start_page))

    def iter_projects(self, *, page_size: int = 100, start_page: int = 0) -> Iterator[m.Project]:
        """Every project, lazily."""
        pages = self.iter_project_pages(page_size=page_size, start_page=start_page)
        return self._items(pages, key=lambda p: p.name)

    def set_managed_scans(
        self, project_name: str, *, diff_scan: bool | None = None, full_scan: bool | None = None
    ) -> m.Project:
        """Enable or disable managed diff and/or full scans of a project (4.9); returns the project."""
        q = rq.validate(
            rq.ManagedScanUpdate,
            "toggle managed scans",
            deploymentSlug=self.deployment_slug,
            projectName=project_name,
            diff_scan=None if diff_scan is None else {"enabled": diff_scan},
            full_scan=None if full_scan is None else {"enabled": full_scan},
        )
        call = Call(ep.MANAGED_SCAN, {"project_name": q.projectName}, json=q.body())
        return self._call(call, post=lambda r: r.project)

    def add_project_tags(self, project_name: str, tags: Iterable[str]) -> m.Project:
        """Add tags to a project (4.12); returns the project."""
        q = rq.validate(rq.Tags, "add project tags", project_name=project_name, tags=list(tags))
        call = Call(ep.TAGS_ADD, {"project_name": q.project_name}, json=q.add_body(self.tags_body))
        return self._call(call, post=lambda r: r.project)

    def remove_project_tags(self, project_name: str, tags: Iterable[str]) -> m.Project:
        """Remove tags from a project (4.13); returns the project. The tags go as repeated ``tags`` query keys and
        the DELETE has no body, whatever ``tags_body`` says (that shapes adding tags only)."""
        q = rq.validate(rq.Tags, "remove project tags", project_name=project_name, tags=list(tags))
        call = Call(ep.TAGS_REMOVE, {"project_name": q.project_name}, params=q.remove_params())
        return self._call(call, post=lambda r: r.project)

    def get_project(self, project_name: str) -> m.Project:
        """One project (``GET .../projects/{projectName}``, api-notes "Projects"); ``NotFoundError`` if none."""
        q = rq.validate(rq.ProjectRef, "get project", project_name=project_name)
        return self._call(Call(ep.PROJECT_GET, {"project_name": q.project_name}), post=lambda r: r.project)

    def update_project(
        self,
        project_name: str,
        *,
        tags: Iterable[str] | None = None,
        primary_branch: str | None = None,
        diff_scan: bool | None = None,
        full_scan: bool | None = None,
    ) -> m.Project:
        """Change a project (``PATCH .../projects/{projectName}``): its tags (replaced as a whole; ``[]`` clears
        them), its primary branch and/or its managed diff and full scans; returns the project. A write: never sent
        twice after an ambiguous failure (``AmbiguousWriteError``)."""
        managed = {
            name: {"enabled": value}
            for name, value in (("diff_scan", diff_scan), ("full_scan", full_scan))
            if value is not None
        }
        q = rq.validate(
            rq.ProjectUpdate,
            "update project",
            project_name=project_name,
            tags=None if tags is None else list(tags),
            primary_branch=primary_branch,
            managed_scan_config=managed or None,
        )
        call = Call(ep.PROJECT_UPDATE, {"project_name": q.project_name}, json=q.body())
        return self._call(call, post=lambda r: r.project)

    def delete_project(self, project_name: str) -> m.ProjectDeleted:
        """Delete a project (``DELETE .../projects/{projectName}``); returns the name the service deleted. A write:
        never sent twice after an ambiguous failure (a second DELETE would answer 404)."""
        q = rq.validate(rq.ProjectRef, "delete project", project_name=project_name)
        return self._call(Call(ep.PROJECT_DELETE, {"project_name": q.project_name}))

    # -- lockfiles of a repository: mixed pagination ----------------------------------------------------------------

    def _lockfiles_call(
        self, repository_id: str | int, cursor: str | int | None, page_size: int | None
    ) -> Call[m.LockfilesPage]:
        q = rq.validate(
            rq.LockfilesQuery,
            "list lockfiles",
            repository_id=repository_id,
            cursor=cursor,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        # the supply-chain endpoints need a JSON body: {} when nothing is set
        return Call(ep.LOCKFILES, {"repository_id": q.repository_id}, json=q.body())

    def list_lockfiles(
        self, repository_id: str | int, *, cursor: str | int | None = None, page_size: int | None = None
    ) -> m.LockfilesPage:
        """One page of a repository's lockfiles (path and number of dependencies each)."""
        return self._call(self._lockfiles_call(repository_id, cursor, page_size))

    def iter_lockfile_pages(
        self, repository_id: str | int, *, page_size: int | None = None, start_cursor: str | None = None
    ) -> Iterator[m.LockfilesPage]:
        """Pages of a repository's lockfiles, lazily, to ``hasMore: false`` (or an empty cursor or page)."""
        return self._paginate(
            CursorPager(lambda c: self._lockfiles_call(repository_id, c, page_size), start_cursor)
        )

    def iter_lockfiles(
        self, repository_id: str | int, *, page_size: int | None = None, start_cursor: str | None = None
    ) -> Iterator[m.Lockfile]:
        """Every lockfile of a repository, lazily."""
        return self._items(self.iter_lockfile_pages(repository_id, page_size=page_size, start_cursor=start_cursor))

    # -- SBOM export: start, poll, download ------------------------------------------------------------------------

    def start_sbom_export(
        self,
        repository_id: str | int,
        *,
        cyclonedx_version: str = "1.6",
        ref: str | None = None,
        metadata_component_type: str | None = None,
        metadata_supplier: dict[str, Any] | None = None,
    ) -> m.SbomExportTask:
        """Start an SBOM export job of a repository (``POST .../sbom/export``); returns its ``taskToken``.

        ``cyclonedx_version``: 1.4, 1.5, 1.6 or 1.7 (or the full ``SBOM_CYCLONE_DX_VERSION_V1_6``); ``ref``: the
        branch (the primary one when left out); ``metadata_component_type``: ``application``, ``library``, ... (or
        the full ``SBOM_METADATA_COMPONENT_TYPE_...`` value); ``metadata_supplier``: ``{name, url, contact: {name,
        email, phone}}``. A write: never sent twice after an ambiguous failure.
        """
        q = rq.validate(
            rq.SbomExportRequest,
            "start SBOM export",
            repositoryId=repository_id,
            ref=ref,
            formatVersion={"cyclonedxVersion": cyclonedx_version},
            metadataComponentType=metadata_component_type,
            metadataSupplier=metadata_supplier,
        )
        return self._call(Call(ep.SBOM_EXPORT, json=q.body()))

    def get_sbom_export(self, task_token: str) -> m.SbomExportState:
        """The state of an SBOM export job (``status``, and ``downloadUrl`` once completed). The service rate-limits
        exports: poll with a growing interval, not in a tight loop."""
        q = rq.validate(rq.SbomTaskRef, "get SBOM export", task_token=task_token)
        return self._call(Call(ep.SBOM_EXPORT_STATUS, {"task_token": q.task_token}))

    def download_sbom(self, download_url: str, *, max_bytes: int | None = None) -> m.SbomDocument:
        """Fetch the CycloneDX document of a completed export from its ``downloadUrl``.

        A plain HTTP GET that never sends the API token (the link may be on another host); https only, unless the
        host is loopback or the connection allows insecure http (each redirect is checked the same way). The body
        is capped at ``max_bytes`` (default: ``max_response_bytes``): beyond it ``ResponseTooLargeError``. A 4xx
        (an expired link) is ``DownloadLinkError``; 5xx and connection failures are retried like any read.
        """
        url = check_download_url(download_url, self.allow_insecure_http)
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1):
            raise ValidationError(
                f"download SBOM: field 'max_bytes' = {max_bytes!r}: expected a positive number of bytes",
                field="max_bytes",
            )
        call = Call(ep.SBOM_DOWNLOAD, {"url": url})
        call.max_bytes = max_bytes
        return self._call(call)

    # -- ticket links ------------------------------------------------------------------------------------------------

    def link_ticket(self, ticket_url: str, issue_ids: Iterable[int | str]) -> m.TicketLinkResult:
        """Link an existing tracker ticket to findings (``POST .../tickets/link``); returns the ticket, the ids now
        linked and those whose earlier link it replaced. A write: never sent twice after an ambiguous failure."""
        q = rq.validate(rq.TicketLink, "link ticket", ticket_url=ticket_url, issue_ids=list(issue_ids))
        return self._call(Call(ep.TICKET_LINK, json=q.body()))

    def unlink_tickets(self, issue_ids: Iterable[int | str]) -> m.TicketUnlinkResult:
        """Remove the ticket links of findings (``POST .../tickets/unlink``); returns the ids unlinked. A write."""
        q = rq.validate(rq.TicketUnlink, "unlink tickets", issue_ids=list(issue_ids))
        return self._call(Call(ep.TICKET_UNLINK, json=q.body()))

    def delete_ticket_link(self, external_ticket_id: str | int) -> m.TicketLinkDeleted:
        """Delete a ticket link (``DELETE .../ticketing/v2/tickets/{externalTicketId}``); returns the ids that were
        linked to it. A write."""
        q = rq.validate(rq.TicketRef, "delete ticket link", external_ticket_id=external_ticket_id)
        return self._call(Call(ep.TICKET_LINK_DELETE, {"external_ticket_id": q.external_ticket_id}))

    # -- liveness ----------------------------------------------------------------------------------------------------

    def ping(self) -> m.PingResponse:
        """``GET /api/v1/ping``: the service answers (``{}``); no deployment in the path."""
        return self._call(Call(ep.PING))


def _digits(name: str, value: str | int) -> str:
    text = str(value)
    if not (text.isascii() and text.isdigit()):  # str.isdigit() alone accepts "¹" and other Unicode digits
        raise ValidationError(f"{name} {value!r} must be a numeric id (digits only)", field=name)
    return text


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

    def _paginate(self, pager: OffsetPager[P] | CursorPager[P]) -> Iterator[P]:
        call: Call[P] | None = pager.first
        while call is not None:
            page = self._call(call)
            yield page
            call = pager.next(page)

    def _items(self, pages: Iterator[Page[I]], key: Callable[[I], Hashable] | None = None) -> Iterator[I]:
        seen: set[Hashable] = set()
        for page in pages:
            for item in page.items:
                if key is not None:
                    k = key(item)
                    if k in seen:
                        continue
                    seen.add(k)
                yield item


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

    async def _paginate(self, pager: OffsetPager[P] | CursorPager[P]) -> AsyncIterator[P]:
        call: Call[P] | None = pager.first
        while call is not None:
            page = await self._call(call)
            yield page
            call = pager.next(page)

    async def _items(
        self, pages: AsyncIterator[Page[I]], key: Callable[[I], Hashable] | None = None
    ) -> AsyncIterator[I]:
        seen: set[Hashable] = set()
        async for page in pages:
            for item in page.items:
                if key is not None:
                    k = key(item)
                    if k in seen:
                        continue
                    seen.add(k)
                yield item
