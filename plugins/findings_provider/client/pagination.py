"""The one pager of every paginated operation, shared by the sync and async clients.

The state machines of the three styles of section 4.14 (``OffsetPager``, ``CursorPager``) know the first request
and, given a page, the next one (or ``None`` at the end). An operation says how it pages once, where it is
defined (``offset_paged``, ``cursor_paged``); a ``Walk`` plans the requests of any of them, and the clients drive
it with their own loop (``pages``, ``items``, ``raw_pages``), holding one page at a time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from findings_provider.client.endpoints import Call, raw_findings_parser
from findings_provider.client.errors import PaginationError

#: An item of a page.
I_co = TypeVar("I_co", covariant=True)
I = TypeVar("I")  # noqa: E741


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


# -- the one generic pager: which operations page and how, and a walk through one of them ---------------------------


#: A function: a client operation, marked paginated.
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Paging:
    """How one operation pages: the keyword that selects its page (``page`` by number, ``cursor`` by cursor), its
    page size keyword and the size a walk asks for when the caller sets none (by number), what identifies an item
    (a walk then yields each once: the result set moves while paging), and whether it has raw pages."""

    position: str
    start: Any = None
    size: str | None = None
    walk_size: int | None = None
    key: Callable[[Any], Hashable] | None = None
    raw: bool = False


#: Every paginated operation, its function -> how it pages. Filled by ``offset_paged`` and ``cursor_paged``.
PAGINATED: dict[Callable[..., Any], Paging] = {}


def _keyword_only(func: Callable[..., Any], *names: str) -> dict[str, inspect.Parameter]:
    params = inspect.signature(func).parameters
    for name in names:
        if name not in params or params[name].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{func.__qualname__}: a paginated operation needs the keyword-only parameter {name}")
    return dict(params)


def offset_paged(
    *, key: Callable[[Any], Hashable] | None = None, walk_size: int | None = None, raw: bool = False
) -> Callable[[F], F]:
    """Mark an operation that pages by number (keywords ``page`` and ``page_size``): a walk stops at the first
    page shorter than its size. ``walk_size``: the page size of a walk when the caller sets none (default: the
    operation's own)."""

    def mark(func: F) -> F:
        params = _keyword_only(func, "page", "page_size")
        size = walk_size or params["page_size"].default
        PAGINATED[func] = Paging("page", params["page"].default, "page_size", size, key, raw)
        return func

    return mark


def cursor_paged(*, key: Callable[[Any], Hashable] | None = None, raw: bool = False) -> Callable[[F], F]:
    """Mark an operation that pages by cursor (keyword ``cursor``): a walk follows the cursor the page returns
    (and ``hasMore`` where the page has it) to its end."""

    def mark(func: F) -> F:
        params = _keyword_only(func, "cursor")
        PAGINATED[func] = Paging("cursor", params["cursor"].default, key=key, raw=raw)
        return func

    return mark


class _Planner:
    """The client, as an operation sees it while a walk plans a page: ``_call`` hands the call back unsent.

    Everything else is read from the client when the page is planned (a deployment resolved by the first request
    is in the second), so an operation's validation and request building stay its own, written once.
    """

    __slots__ = ("_client",)

    def __init__(self, client: object) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _call(self, call: Call[Any], post: Callable[[Any], Any] | None = None) -> Call[Any]:
        if post is not None:
            raise TypeError(f"{call.endpoint.name}: a paginated operation returns its page as it is")
        return call


class Walk(Generic[P]):
    """One walk through a paginated operation: the request of each page, and which items are new.

    The clients drive it with their own loop (``pages``, ``items``, ``raw_pages``), awaiting or not. Planning it
    builds the first request: bad arguments fail here, before anything is sent.
    """

    def __init__(
        self,
        client: object,
        operation: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        raw: bool = False,
    ) -> None:
        func: Callable[..., Any] | None = getattr(operation, "__func__", None)
        paging = None if func is None else PAGINATED.get(func)
        if func is None or paging is None or getattr(operation, "__self__", None) is not client:
            name = getattr(operation, "__name__", repr(operation))
            known = ", ".join(sorted(f.__name__ for f in PAGINATED))
            raise TypeError(f"{name} is not a paginated operation of this client; these are: {known}")
        if raw and not paging.raw:
            raise TypeError(f"{func.__name__} has no raw pages")
        build = func
        if paging.size is not None:
            kwargs = {paging.size: paging.walk_size, **kwargs}
        planner = _Planner(client)

        def make_call(position: Any) -> Call[Any]:
            call: Call[Any] = build(planner, *args, **{**kwargs, paging.position: position})
            if raw:
                parser = raw_findings_parser(call.endpoint)
                return Call(call.endpoint, call.path_params, call.params, call.json, parser=parser)
            return call

        start = kwargs.get(paging.position, paging.start)
        self._pager: OffsetPager[P] | CursorPager[P]
        if paging.size is None:
            self._pager = CursorPager(make_call, start)
        else:
            self._pager = OffsetPager(make_call, kwargs[paging.size], start)
        self.first: Call[P] = self._pager.first
        self._key = paging.key
        self._seen: set[Hashable] = set()

    def next(self, page: P) -> Call[P] | None:
        """The request of the page after ``page``; ``None`` at the end."""
        return self._pager.next(page)

    def new_items(self, page: Page[I]) -> Iterator[I]:
        """The items of ``page`` not yielded before in this walk (every item, for an operation without a key)."""
        for item in page.items:
            if self._key is not None:
                key = self._key(item)
                if key in self._seen:
                    continue
                self._seen.add(key)
            yield item
