"""Pagination state machines for the three styles of section 4.14, shared by the sync and async clients.

A pager knows the first request and, given a page, the next one (or ``None`` at the end). The clients drive it
with their own loop, holding one page at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from findings_provider.client.endpoints import Call
from findings_provider.client.errors import PaginationError


def _cursor_of(page: Any) -> str | None:
    value = (
        getattr(page, "next_cursor", None) if hasattr(page, "next_cursor") else getattr(page, "cursor", None)
    )
    return None if value in (None, "") else str(value)


class OffsetPager:
    """``page``/``page_size`` pagination: stop at the first page shorter than ``page_size`` (or empty)."""

    def __init__(self, make_call: Callable[[int], Call], page_size: int, start_page: int = 0) -> None:
        self._make_call = make_call
        self.page_size = page_size
        self.page = start_page
        self.first = make_call(start_page)

    def next(self, page: Any) -> Call | None:
        if len(page.items) < self.page_size:
            return None
        self.page += 1
        return self._make_call(self.page)


class CursorPager:
    """Cursor pagination (query or body): stop when the cursor is empty, or a page is empty.

    With ``has_more`` (the mixed style) the ``hasMore`` flag decides when it is present.
    """

    def __init__(self, make_call: Callable[[str | None], Call], start_cursor: str | None = None) -> None:
        self._make_call = make_call
        self._seen: set[str] = set()
        self.cursor = start_cursor
        self.first = make_call(start_cursor)

    def next(self, page: Any) -> Call | None:
        has_more = getattr(page, "hasMore", None)
        cursor = _cursor_of(page)
        if has_more is False or cursor is None or not page.items:
            return None
        if cursor in self._seen or cursor == self.cursor:
            raise PaginationError(f"the server returned cursor {cursor!r} twice; stopping instead of looping")
        self._seen.add(cursor)
        self.cursor = cursor
        return self._make_call(cursor)
