"""The client's base: configuration, deployment resolution, and the judgement of one attempt.

``_BaseClient`` checks what it is given (``security``), holds the httpx options both executors build their pools
from, and decides after each attempt: a result, a wait before the next attempt (the retry policy of
``transport``), or a typed error with the token redacted. It sends nothing itself: the executors of ``client``
do, the sync one blocking and the async one awaiting.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from findings_provider import __version__
from findings_provider.client import requests as rq
from findings_provider.client.endpoints import Call, Endpoint, error_for_status
from findings_provider.client.errors import (
    ConfigurationError,
    FindingsApiError,
    ResponseDecodeError,
    ResponseTooLargeError,
    excerpt,
)
from findings_provider.client.models import Deployment
from findings_provider.client.security import (
    byte_forms,
    check_base_url,
    check_download_url,
    check_token,
    redact_bytes,
    redact_text,
    ssl_verify,
    token_forms,
)
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
        self._token_byte_forms = byte_forms(self._token_forms)
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
            "verify": ssl_verify(verify),
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
        redacted = redact_bytes(body, self._token_byte_forms) if body else None
        seen: set[int] = set()
        while isinstance(exc, FindingsApiError) and id(exc) not in seen:
            seen.add(id(exc))
            if exc.body_excerpt and redacted is not None:
                # cut the excerpt again from the redacted body: a token cut at the excerpt's end must not leak
                exc.body_excerpt = excerpt(redacted)
            exc.body_excerpt = redact_text(exc.body_excerpt, forms)
            exc.message = redact_text(exc.message, forms)
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

