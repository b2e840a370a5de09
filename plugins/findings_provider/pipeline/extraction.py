"""Findings extraction: stream pages of findings into the warehouse, incrementally by a watermark.

One page is held at a time: each page's raw items become rows and are upserted in their own transaction, then
dropped. The watermark (the newest ``relevant_since`` seen) is saved only after a whole pull succeeded; the next
pull starts ``overlap`` before it. Because ``since`` filters on ``relevant_since`` only, status and triage
changes of older findings are caught by a full pull: on request, and automatically once a week.
"""

from __future__ import annotations

import gc
import heapq
import logging
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from sqlalchemy import select

from findings_provider.client.timeutil import parse_timestamp
from findings_provider.warehouse import FINDING_COLUMNS, Warehouse, finding_rows
from findings_provider.warehouse.schema import findings

log = logging.getLogger(__name__)
T = TypeVar("T")

ISSUE_TYPES = ("sast", "sca", "secrets")
#: Issue types listed through the findings operation (offset pages, ``since`` filter); secrets use a cursor.
OFFSET_TYPES = ("sast", "sca")
#: Secrets per cursor page: the reference states no maximum; the emulator refuses more than 1000.
SECRETS_PAGE_SIZE_MAX = 1000
#: Collect garbage every this many pages: a finished response keeps its large body until a full collection.
GC_EVERY_PAGES = 4
#: Seen ids are compacted (see ``_SeenIds``) every this many.
SEEN_BATCH = 100_000
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: A weekly full refresh is due when the last one is at least this old.
FULL_REFRESH_MIN_AGE = timedelta(days=6)

_ID = FINDING_COLUMNS.index("id")
_RELEVANT_SINCE = FINDING_COLUMNS.index("relevant_since")


def watermark_key(issue_type: str) -> str:
    return f"findings_extraction.watermark.{issue_type}"


def full_refresh_key(issue_type: str) -> str:
    return f"findings_extraction.last_full_refresh.{issue_type}"


@dataclass
class PullResult:
    """Counts of one pull of one issue type (an XCom-sized summary)."""

    issue_type: str
    full: bool
    since: str | None
    requests: int = 0
    pages: int = 0
    received: int = 0
    duplicates: int = 0
    unique: int = 0
    written: int = 0
    watermark: str | None = None
    not_seen: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _SeenIds:
    """The ids a pull has seen, in about 8 bytes each (a ``set`` of ints costs 80): memory stays flat in N.

    The latest ids sit in a set; each time it reaches ``SEEN_BATCH`` they are merged into a sorted ``array``
    searched by bisection. Ids beyond 64 bits stay in the set.
    """

    def __init__(self) -> None:
        self._sorted = array("q")
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, item: object) -> bool:
        if item in self._recent:
            return True
        if not isinstance(item, int):
            return False
        at = bisect_left(self._sorted, item)
        return at < len(self._sorted) and self._sorted[at] == item

    def update(self, ids: Iterable[int]) -> None:
        """Add ids that are not in the set yet (repeats among them are fine)."""
        self._recent.update(ids)
        if len(self._recent) >= SEEN_BATCH:
            merged = sorted(i for i in self._recent if _INT64_MIN <= i <= _INT64_MAX)
            self._recent = {i for i in self._recent if not _INT64_MIN <= i <= _INT64_MAX}
            self._sorted = array("q", heapq.merge(self._sorted, merged))


@dataclass
class _Progress:
    seen: _SeenIds = field(default_factory=_SeenIds)
    newest: str | None = None


def _pages(client: Any, issue_type: str, since: datetime | None, page_size: int) -> Iterable[Any]:
    if issue_type in OFFSET_TYPES:
        filters = {"since": since} if since is not None else {}
        return client.iter_finding_pages(issue_type, page_size=page_size, raw=True, **filters)
    if issue_type == "secrets":
        # The list-secrets operation has no ``since``: every pull of secrets is complete (they are few).
        return client.iter_secret_pages(limit=min(page_size, SECRETS_PAGE_SIZE_MAX), raw=True)
    raise ValueError(f"unknown issue type {issue_type!r}; expected one of {', '.join(ISSUE_TYPES)}")


def _fetched_ahead(pages: Iterable[Any], prepare: Callable[[Any], T]) -> Iterator[T]:
    """Yield ``prepare(page)`` of each page while a thread fetches and prepares the next one.

    The API's time and the decoding overlap the warehouse write (the database drivers release the GIL). One
    page ahead, never more: a page is requested only after the previous one arrived (the pager decides as
    before; no request is added) and at most two pages are held. An error of the fetch or of ``prepare`` is
    raised here, in page order; when the consumer stops early, the work in flight is finished and dropped.
    """
    iterator = iter(pages)

    def fetch() -> list[T]:
        page = next(iterator, None)
        return [] if page is None else [prepare(page)]

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="findings-fetch") as fetcher:
        ahead = fetcher.submit(fetch)
        while True:
            prepared = ahead.result()
            if not prepared:
                return
            ahead = fetcher.submit(fetch)
            yield prepared.pop()  # not kept in this frame: the consumer frees it when done


def extract_findings(
    client: Any,
    warehouse: Warehouse,
    issue_type: str,
    *,
    since: datetime | None,
    page_size: int = 3000,
    on_page: Callable[[PullResult], None] | None = None,
) -> PullResult:
    """Pull every ``issue_type`` finding with ``relevant_since`` >= ``since`` (all when None) into the warehouse.

    Each page is upserted in its own transaction; ids already seen in this pull are dropped (a result set
    that moves while paging repeats items). Returns the counts and the newest ``relevant_since`` seen
    (``watermark``); saving it is the caller's job, once the pull succeeded.
    """
    full = since is None or issue_type == "secrets"
    result = PullResult(issue_type=issue_type, full=full, since=None if full else since.isoformat())
    progress = _Progress()
    # The collections below then scan only what the pull allocates, not the task process's whole heap (Airflow
    # and its imports: a full collection of that costs 0.1-0.2 s, a quarter of the pull's CPU time).
    already_frozen = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        _pull(client, warehouse, issue_type, None if full else since, page_size, on_page, result, progress)
    finally:
        if not already_frozen:
            gc.unfreeze()
    result.watermark = progress.newest
    if full:
        result.not_seen = _count_not_seen(warehouse, issue_type, progress.seen)
    return result


def _pull(
    client: Any,
    warehouse: Warehouse,
    issue_type: str,
    since: datetime | None,
    page_size: int,
    on_page: Callable[[PullResult], None] | None,
    result: PullResult,
    progress: _Progress,
) -> None:
    pages = _pages(client, issue_type, since, page_size)
    for rows in _fetched_ahead(pages, lambda page: finding_rows(issue_type, page.items)):
        result.requests += 1
        fresh = [row for row in rows if row[_ID] not in progress.seen]
        result.pages += 1
        result.received += len(rows)
        result.duplicates += len(rows) - len(fresh)
        if fresh:
            progress.seen.update(row[_ID] for row in fresh)
            newest = max((row[_RELEVANT_SINCE] for row in fresh if row[_RELEVANT_SINCE]), default=None)
            if newest and (progress.newest is None or newest > progress.newest):
                progress.newest = newest
            result.written += warehouse.upsert_findings(fresh)
        result.unique = len(progress.seen)
        log.info(
            "pulled %d %s findings, page %d, %d total (%d written)",
            len(rows), issue_type, result.pages, result.unique, result.written,
        )
        del rows, fresh
        if on_page is not None:
            on_page(result)
        if result.pages % GC_EVERY_PAGES == 0:
            gc.collect()


def _count_not_seen(warehouse: Warehouse, issue_type: str, seen: _SeenIds) -> int:
    """Warehouse findings of ``issue_type`` that a complete pull did not return (gone from the service)."""
    stmt = select(findings.c.id).where(findings.c.issue_type == issue_type)
    with warehouse.engine.connect() as conn:
        return sum(1 for found in conn.execute(stmt).scalars() if found not in seen)


def full_refresh_due(warehouse: Warehouse, issue_type: str, weekday: int | None, now: datetime) -> bool:
    """Whether the weekly reconciliation of ``issue_type`` is due: on ``weekday``, at most once in 6 days."""
    if weekday is None or now.weekday() != weekday:
        return False
    last = parse_timestamp(warehouse.get_state(full_refresh_key(issue_type)))
    return last is None or now - last >= FULL_REFRESH_MIN_AGE


def pull_since(
    warehouse: Warehouse,
    issue_type: str,
    *,
    full_refresh: bool,
    full_refresh_weekday: int | None,
    overlap: timedelta,
    now: datetime,
) -> tuple[datetime | None, str]:
    """Where the next pull of ``issue_type`` starts (None: everything) and why."""
    if issue_type == "secrets":
        return None, "secrets are always pulled completely"
    if full_refresh:
        return None, "full refresh requested"
    if full_refresh_due(warehouse, issue_type, full_refresh_weekday, now):
        return None, "weekly full refresh"
    mark = parse_timestamp(warehouse.get_state(watermark_key(issue_type)))
    if mark is None:
        return None, "no watermark yet"
    return mark - overlap, f"incremental from watermark {mark.isoformat()} minus {overlap}"


def run_extraction(
    client: Any,
    warehouse: Warehouse,
    issue_types: Iterable[str],
    *,
    full_refresh: bool = False,
    full_refresh_weekday: int | None = None,
    overlap: timedelta = timedelta(hours=1),
    page_size: int = 3000,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Pull each issue type and advance its watermark after its pull succeeded; return the counts per type.

    A failing type does not undo the others: their watermarks are saved, then the first error is raised.
    """
    now = now or datetime.now(timezone.utc)
    results: dict[str, Any] = {}
    error: Exception | None = None
    for issue_type in dict.fromkeys(issue_types):
        if issue_type not in ISSUE_TYPES:
            raise ValueError(f"issue_types: unknown issue type {issue_type!r}; expected {', '.join(ISSUE_TYPES)}")
        since, reason = pull_since(
            warehouse,
            issue_type,
            full_refresh=full_refresh,
            full_refresh_weekday=full_refresh_weekday,
            overlap=overlap,
            now=now,
        )
        log.info("pulling %s findings: %s", issue_type, reason)
        try:
            result = extract_findings(client, warehouse, issue_type, since=since, page_size=page_size)
        except Exception as exc:
            log.error("pull of %s findings failed; its watermark stays where it was: %s", issue_type, exc)
            error = error or exc
            continue
        _save_progress(warehouse, result, now)
        results[issue_type] = {**result.as_dict(), "reason": reason}
        log.info(
            "%s: %d requests, %d pages, %d findings (%d duplicates dropped), %d rows written, watermark %s%s",
            issue_type, result.requests, result.pages, result.unique, result.duplicates, result.written,
            result.watermark, "" if result.not_seen is None else f", {result.not_seen} stored but no longer listed",
        )
    if error is not None:
        raise error
    return {
        "issue_types": results,
        "written": sum(r["written"] for r in results.values()),
        "findings": sum(r["unique"] for r in results.values()),
        "requests": sum(r["requests"] for r in results.values()),
    }


def _save_progress(warehouse: Warehouse, result: PullResult, now: datetime) -> None:
    old = parse_timestamp(warehouse.get_state(watermark_key(result.issue_type)))
    new = parse_timestamp(result.watermark)
    if new is not None and (old is None or new > old):
        warehouse.set_state(watermark_key(result.issue_type), new.isoformat())
    if result.full:
        warehouse.set_state(full_refresh_key(result.issue_type), now.isoformat())
