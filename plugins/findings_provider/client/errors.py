"""Typed errors raised by the findings API client.

Code decides by exception type, never by parsing a message. Every HTTP error carries the status code, the
operation it came from and a short excerpt of the response body (never a request header, so never the token).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BODY_EXCERPT_CHARS = 300


def excerpt(body: bytes | str | None, limit: int = BODY_EXCERPT_CHARS) -> str:
    """Return a short, single-line excerpt of a response body for error messages."""
    if body is None:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class FindingsApiError(Exception):
    """Base class of every error the client raises."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        endpoint: str | None = None,
        body_excerpt: str = "",
    ) -> None:
        self.message = message
        self.status_code = status_code
        self.endpoint = endpoint
        self.body_excerpt = body_excerpt
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.endpoint:
            parts.append(f"[{self.endpoint}]")
        if self.status_code is not None:
            parts.append(f"HTTP {self.status_code}:")
        parts.append(self.message)
        if self.body_excerpt:
            parts.append(f"(response: {self.body_excerpt})")
        return " ".join(parts)

    def __reduce__(self) -> tuple[Callable[..., FindingsApiError], tuple[Any, ...], dict[str, Any]]:
        # keep exceptions picklable with their keyword arguments and subclass attributes
        return (
            _rebuild,
            (type(self), self.message, self.status_code, self.endpoint, self.body_excerpt),
            dict(self.__dict__),
        )

    @property
    def retryable_by_task(self) -> bool:
        """Whether an Airflow task-level retry could help (False: fix the configuration or input first)."""
        return True


def _rebuild(
    cls: type[FindingsApiError], message: str, status_code: int | None, endpoint: str | None, body_excerpt: str
) -> FindingsApiError:
    return cls(message, status_code=status_code, endpoint=endpoint, body_excerpt=body_excerpt)


class ConfigurationError(FindingsApiError, ValueError):
    """The client was configured in a way that cannot work (bad base URL, insecure http, no deployment)."""

    retryable_by_task = False


class ValidationError(FindingsApiError, ValueError):
    """A request was refused before sending, or the server answered 400/422: the input is wrong."""

    retryable_by_task = False

    def __init__(
        self, message: str, *, field: str | None = None, detail: str | None = None, **kwargs: Any
    ) -> None:
        self.field = field
        #: The message without the name of the operation it was raised for.
        self.detail = detail or message
        super().__init__(message, **kwargs)


class AuthenticationError(FindingsApiError):
    """401/403: the token is missing, unknown, revoked, or lacks Web API access."""

    retryable_by_task = False


class NotFoundError(FindingsApiError):
    """404 on a resource (scan, policy, project) that does not exist."""

    retryable_by_task = False


class DeploymentNotFoundError(NotFoundError, AuthenticationError):
    """404 on a deployment-scoped path: unknown deployment, or a token without Web API access."""


class DownloadLinkError(FindingsApiError):
    """A 4xx from a link the service handed out (the SBOM download): expired or refused. A fresh link from the
    export status may work, so a task-level retry can help."""


class PolicyApiRetiredError(FindingsApiError):
    """410 Gone on the policy endpoints: the deployment migrated to the newer policy system."""

    retryable_by_task = False


class RateLimitedError(FindingsApiError):
    """429 after the client's retries ran out."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class ServerError(FindingsApiError):
    """5xx after the client's retries ran out."""


class TransportError(FindingsApiError):
    """Connection failure, timeout or broken response after the client's retries ran out."""


class ResponseDecodeError(FindingsApiError):
    """The server answered 2xx with a body that is not the JSON shape the API documents.

    ``malformed`` is True when the body is not JSON at all (for example cut short in transit): a retry may help.
    """

    def __init__(self, message: str, *, malformed: bool = False, **kwargs: Any) -> None:
        self.malformed = malformed
        super().__init__(message, **kwargs)


class AmbiguousWriteError(FindingsApiError):
    """A non-idempotent write (ticket creation, a ticket link, a project update or deletion, an SBOM export) failed
    in a way that may have taken effect on the server.

    It is never retried by the client. The message says what to re-read before trying again (for tickets: the
    findings' ``external_ticket``).
    """


class ResponseTooLargeError(FindingsApiError):
    """A response body exceeded the client's size cap (``max_response_bytes``); not read further, not retried.

    The same request would meet the same answer: raise the cap on the connection, or ask for smaller pages.
    """

    retryable_by_task = False


class PaginationError(FindingsApiError):
    """The server's pagination did not advance (the same cursor twice, or the same page again): stopping instead of
    looping."""
