"""Pagination state machines for the three styles of section 4.14, shared by the sync and async clients.

A pager knows the first request and, given a page, the next one (or ``None`` at the end). The clients drive it
with their own loop, holding one page at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from findings_provider.client.endpoints import Call
from findings_provider.client.errors import PaginationError

#: An item of a page.
I_co = TypeVar("I_co", covariant=True)


class Page(Protocol[I_co]):
    """What a pager reads of a page: its items (a cursor or ``hasMore`` too, for cursor pagination)."""

    @property
    def items(self) -> Sequence[I_co]: ...


#: A page type.
P = TypeVar("P", bound=Page[Any])


def _cursor_of(page: Any) -> str | None:
    value = (
        getattr(page, "next_cursor", None) if hasattr(page, "next_cursor") else getattr(page, "cursor", None)
    )
    return None if value in (None, "") else str(value)


def _fingerprint(items: Sequence[Any]) -> tuple[int, Any, Any]:
    """A cheap identity of a non-empty page: its count, first and last item (raw items copied out of the page's
    buffer, which a ``msgspec.Raw`` would otherwise keep alive)."""

    def key(item: Any) -> Any:
        return bytes(item) if isinstance(item, msgspec.Raw) else item

    return len(items), key(items[0]), key(items[-1])


class OffsetPager(Generic[P]):
    """``page``/``page_size`` pagination: stop at the first page shorter than ``page_size`` (or empty).

    A full page identical to the one before (a server ignoring ``page``) is a ``PaginationError``, not a loop.
    """

    def __init__(self, make_call: Callable[[int], Call[P]], page_size: int, start_page: int = 0) -> None:
        self._make_call = make_call
        self.page_size = page_size
        self.page = start_page
        self.first = make_call(start_page)
        self._previous: tuple[int, Any, Any] | None = None

    def next(self, page: P) -> Call[P] | None:
        items = page.items
        if len(items) < self.page_size:
            return None
        fingerprint = _fingerprint(items)
        if fingerprint == self._previous:
            raise PaginationError(
                f"page {self.page} repeats page {self.page - 1} exactly ({len(items)} items, the same first and "
                "last): the server seems to ignore the page parameter; stopping instead of looping",
                endpoint=self.first.endpoint.name,
            )
        self._previous = fingerprint
        self.page += 1
        return self._make_call(self.page)


class CursorPager(Generic[P]):
    """Cursor pagination (query or body): stop when the cursor is empty, or a page is empty.

    With ``has_more`` (the mixed style) the ``hasMore`` flag decides when it is present.
    """

    def __init__(self, make_call: Callable[[str | None], Call[P]], start_cursor: str | None = None) -> None:
        self._make_call = make_call
        self._seen: set[str] = set()
        self.cursor = start_cursor
        self.first = make_call(start_cursor)
        self.pages = 0

    def next(self, page: P) -> Call[P] | None:
        self.pages += 1
        has_more = getattr(page, "hasMore", None)
        cursor = _cursor_of(page)
        if has_more is False or cursor is None or not page.items:
            return None
        if cursor in self._seen or cursor == self.cursor:
            raise PaginationError(
                f"page {self.pages}: the server returned cursor {cursor!r} twice (its pagination does not "
                "advance); stopping instead of looping",
                endpoint=self.first.endpoint.name,
            )
        self._seen.add(cursor)
        self.cursor = cursor
        return self._make_call(cursor)
