"""One attempt's response, read within limits, and the retry policy: shared by the sync and the async client.

Retried: connection errors, timeouts, broken responses, 429 and 5xx, with exponential backoff and full jitter,
``Retry-After`` honoured, bounded in attempts and in total time. A non-idempotent call (a write: ticket creation,
ticket links, a project update or deletion, an SBOM export) is retried only when the server certainly did not act on
it (429, or a connection that never opened); any other failure becomes ``AmbiguousWriteError``.

Each attempt's body is streamed through a ``BodyReader``: besides httpx's per-read timeout, the whole attempt has a
total deadline (a server dripping bytes cannot hold a task forever) and the body a size cap.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from findings_provider.client.endpoints import Endpoint
from findings_provider.client.errors import (
    AmbiguousWriteError,
    ResponseTooLargeError,
    TransportError,
    excerpt,
)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Failures after which the request certainly did not reach the server.
NOT_SENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Default size cap of one response body (decoded), in bytes. A findings page of 3000 items is about 7 MB.
DEFAULT_MAX_RESPONSE_BYTES = 128 * 1024 * 1024
#: The default total deadline of one attempt is this many times the per-read timeout, and at least the minimum.
TOTAL_TIMEOUT_FACTOR = 4
MIN_DEFAULT_TOTAL_TIMEOUT = 60.0
_MENTIONS_A_HEADER = re.compile(r"header", re.IGNORECASE)


def default_total_timeout(timeout: float) -> float:
    """The total deadline of one attempt when none is configured: 4x the per-read timeout, at least 60 s."""
    return max(MIN_DEFAULT_TOTAL_TIMEOUT, TOTAL_TIMEOUT_FACTOR * timeout)


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
    """What one attempt produced: a response and its body, or the exception that replaced them."""

    response: httpx.Response | None = None
    body: bytes = b""
    error: Exception | None = None

    @property
    def retry_after(self) -> float | None:
        if self.response is None:
            return None
        return parse_retry_after(self.response.headers.get("Retry-After"))


class BodyReader:
    """Collects one attempt's streamed body within the attempt's total deadline and the size cap.

    Created just before the request is sent (the deadline counts from there). The sync and the async client feed
    it the chunks they read: a chunk arriving after the deadline raises ``httpx.ReadTimeout`` (a timeout like any
    other: retried for idempotent calls, ambiguous for ticket creation); a body beyond the cap raises
    ``ResponseTooLargeError``.
    """

    __slots__ = ("_chunks", "_deadline", "_endpoint", "_max_bytes", "_size", "_total_timeout")

    def __init__(self, endpoint: Endpoint[Any], total_timeout: float, max_bytes: int) -> None:
        self._endpoint = endpoint
        self._total_timeout = total_timeout
        self._max_bytes = max_bytes
        self._deadline = time.monotonic() + total_timeout
        self._size = 0
        self._chunks: list[bytes] = []

    def start(self, response: httpx.Response) -> None:
        """Check the headers: a declared length beyond the cap is refused before reading."""
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise self._too_large(response.status_code)
        self._check_deadline()

    def feed(self, chunk: bytes) -> None:
        """Add one chunk of the (decoded) body."""
        self._size += len(chunk)
        if self._size > self._max_bytes:
            raise self._too_large(None)
        self._chunks.append(chunk)
        self._check_deadline()

    def outcome(self, response: httpx.Response) -> Outcome:
        """The attempt's outcome once the body was read completely."""
        body = b"".join(self._chunks)
        self._chunks = []
        return Outcome(response=response, body=body)

    def _check_deadline(self) -> None:
        if time.monotonic() > self._deadline:
            raise httpx.ReadTimeout(
                f"no complete response within the total deadline of {self._total_timeout:g} s (total_timeout)"
            )

    def _too_large(self, status: int | None) -> ResponseTooLargeError:
        return ResponseTooLargeError(
            f"{self._endpoint.method} {self._endpoint.name}: the response exceeds the size cap of "
            f"{self._max_bytes} bytes; not read further. {self._endpoint.too_large_advice}",
            status_code=status,
            endpoint=self._endpoint.name,
        )


def should_retry(endpoint: Endpoint[Any], outcome: Outcome) -> bool:
    """Whether this outcome may be retried for this endpoint."""
    if outcome.response is not None:
        status = outcome.response.status_code
        if status == 429:
            return True
        return endpoint.idempotent and status in RETRY_STATUSES
    if isinstance(outcome.error, NOT_SENT_ERRORS):
        return True
    return endpoint.idempotent


def error_text(error: BaseException, limit: int = 200) -> str:
    """A short text of an HTTP-layer exception for an error message; withheld when it may quote a header value.

    httpx and h11 quote the offending value ("Illegal header value b'Bearer ...'"), which would put the token into
    a log; such texts are replaced as a whole.
    """
    text = str(error)
    if isinstance(error, httpx.LocalProtocolError) or _MENTIONS_A_HEADER.search(text):
        return "details withheld: the message quotes a header"
    return excerpt(text, limit)


def final_transport_error(endpoint: Endpoint[Any], error: Exception, attempts: int) -> Exception:
    """The error raised when a transport failure is not retried any more."""
    kind = type(error).__name__
    if not endpoint.idempotent and not isinstance(error, NOT_SENT_ERRORS):
        return ambiguous_write_error(endpoint, f"failed after the request was sent ({kind}: {error_text(error)})")
    return TransportError(f"{kind} after {attempts} attempt(s): {error_text(error)}", endpoint=endpoint.name)


def ambiguous_write_error(
    endpoint: Endpoint[Any], what: str, *, status_code: int | None = None, body: bytes = b""
) -> AmbiguousWriteError:
    """A non-idempotent write whose outcome is unknown: the server may have acted before ``what`` happened."""
    return AmbiguousWriteError(
        f"{endpoint.method} {endpoint.name} {what}; the server may have acted on it. "
        f"Not retried: {endpoint.after_ambiguity}",
        status_code=status_code,
        endpoint=endpoint.name,
        body_excerpt=excerpt(body),
    )
