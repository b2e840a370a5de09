"""The retry policy shared by the sync and the async client.

Retried: connection errors, timeouts, broken responses, 429 and 5xx, with exponential backoff and full jitter,
``Retry-After`` honoured, bounded in attempts and in total time. A non-idempotent call (ticket creation) is retried
only when the server certainly did not act on it (429, or a connection that never opened); any other failure
becomes ``AmbiguousWriteError``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import httpx

from findings_provider.client.endpoints import Endpoint
from findings_provider.client.errors import AmbiguousWriteError, TransportError, excerpt

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Failures after which the request certainly did not reach the server.
NOT_SENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or HTTP date); ``None`` when absent/invalid."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (now if now is not None else time.time()))


@dataclass
class RetryPolicy:
    """Bounded exponential backoff with jitter; one instance decides for both clients."""

    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_total_seconds: float = 120.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def backoff(self, attempt: int) -> float:
        """Delay before retry number ``attempt`` (1-based): full jitter over an exponential cap."""
        cap = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        return self.rng.uniform(cap / 2, cap)

    def delay(
        self, attempt: int, started: float, retry_after: float | None, now: float | None = None
    ) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up (attempts or total time exhausted)."""
        if attempt > self.max_retries:
            return None
        wait = retry_after if retry_after is not None else self.backoff(attempt)
        elapsed = (now if now is not None else time.monotonic()) - started
        if elapsed + wait > self.max_total_seconds:
            return None
        return wait


@dataclass
class Outcome:
    """What one attempt produced: a response, or the transport exception that replaced it."""

    response: httpx.Response | None = None
    error: Exception | None = None

    @property
    def retry_after(self) -> float | None:
        if self.response is None:
            return None
        return parse_retry_after(self.response.headers.get("Retry-After"))


def should_retry(endpoint: Endpoint, outcome: Outcome) -> bool:
    """Whether this outcome may be retried for this endpoint."""
    if outcome.response is not None:
        status = outcome.response.status_code
        if status == 429:
            return True
        return endpoint.idempotent and status in RETRY_STATUSES
    if isinstance(outcome.error, NOT_SENT_ERRORS):
        return True
    return endpoint.idempotent


def final_transport_error(endpoint: Endpoint, error: Exception, attempts: int) -> Exception:
    """The error raised when a transport failure is not retried any more."""
    kind = type(error).__name__
    if not endpoint.idempotent and not isinstance(error, NOT_SENT_ERRORS):
        return AmbiguousWriteError(
            f"{endpoint.method} {endpoint.name} failed after the request was sent ({kind}); the server may have "
            "acted on it. Not retried: re-read the findings' external_ticket before trying again",
            endpoint=endpoint.name,
        )
    return TransportError(
        f"{kind} after {attempts} attempt(s): {excerpt(str(error), 200)}", endpoint=endpoint.name
    )


def ambiguous_status_error(endpoint: Endpoint, response: httpx.Response) -> AmbiguousWriteError:
    """A 5xx on a non-idempotent write: the server may have acted before failing."""
    return AmbiguousWriteError(
        f"{endpoint.method} {endpoint.name} answered {response.status_code}; the server may have acted on it. "
        "Not retried: re-read the findings' external_ticket before trying again",
        status_code=response.status_code,
        endpoint=endpoint.name,
        body_excerpt=excerpt(response.content),
    )
