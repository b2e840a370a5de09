"""Findings extraction: stream pages of findings into the warehouse, incrementally by a watermark.

One page is held at a time: each page's raw items become rows and are upserted in their own transaction, then
dropped. The watermark (the newest ``relevant_since`` seen) is saved only after a whole pull succeeded; the next
pull starts ``overlap`` before it. It never moves past the run's start plus ``MAX_CLOCK_SKEW``: a finding dated
later is stored and counted (``future_dated``) but does not move the watermark, or it would hide every finding
that arrives before that date. A watermark already in the future (saved before this rule) makes a full pull.

Because ``since`` filters on ``relevant_since`` only, status and triage changes of older findings are invisible to
an incremental pull; a full pull reconciles them. It runs on request, once in every period of
``full_refresh_max_age`` (periods aligned on 00:00 UTC; the configured default, 24 hours, makes the first run of
each UTC day a full pull: the daily scheduled run at midnight), and on ``full_refresh_weekday`` when the last one
is at least ``FULL_REFRESH_MIN_AGE`` old; either trigger suffices and None disables it. The period and the weekday
are those of the run's logical date, not of the clock: a backfill, a catch-up run or a re-run of yesterday's run
behaves like the day it stands for (the run that reconciled a period, run again, reconciles it again; a day no run
reconciled is reconciled by the first run that stands for it). What remains stale, and
why: a status or triage change reaches the warehouse with the next full pull, at most one period later (a day,
plus the run's own duration and scheduling delay). Findings that leave the service's result (fixed, removed) keep
their last stored state until then too (``not_seen`` counts them). The writes (triage, tickets) do not depend
on it: they re-read their findings right before acting (``pipeline.freshness``).

Values the warehouse cannot hold (an integer beyond 64 bits, a NUL character, an item that is not UTF-8: see
:mod:`findings_provider.warehouse.rows`) never fail a page: the finding is stored with that column NULL, or
skipped when its id is unusable, and the pull reports ``rejected`` with a sample of ``{id, field, reason}``.
"""

from __future__ import annotations

import gc
import heapq
import logging
import os
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from findings_provider.client.canonical import ISSUE_TYPES, OFFSET_TYPES, forget_logged_unknowns
from findings_provider.client.errors import FindingsApiError
from findings_provider.client.limits import FINDINGS_PAGE_SIZE, PROJECTS_PAGE_SIZE
from findings_provider.client.timeutil import parse_timestamp
from findings_provider.warehouse import FINDING_COLUMNS, Rejection, Warehouse, finding_rows
from findings_provider.warehouse.branches import recount_copies, store_projects
from findings_provider.warehouse.indexes import deferred_on_first_load, is_empty
from findings_provider.warehouse.rows import INT64_MAX, INT64_MIN, ScreenedFindings, finding_digests, screened_findings
from findings_provider.warehouse.timestamps import utc_text
from findings_provider.warehouse.upsert import finding_copy_lines

if TYPE_CHECKING:
    from concurrent.futures.process import ProcessPoolExecutor

    from findings_provider.client import FindingsClient, RawFindingsPage

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Secrets per cursor page: the reference states no maximum; the emulator refuses more than 1000.
SECRETS_PAGE_SIZE_MAX = 1000
#: Collect garbage every this many pages: a finished response keeps its large body until a full collection.
GC_EVERY_PAGES = 4
#: Seen ids are compacted (see ``_SeenIds``) every this many.
SEEN_BATCH = 100_000
#: A weekly full refresh is due when the last one is at least this old.
FULL_REFRESH_MIN_AGE = timedelta(days=6)
#: How far past the run's start a ``relevant_since`` may lie (the service's clock against ours) and still move
#: the watermark.
MAX_CLOCK_SKEW = timedelta(minutes=5)
#: Rejected values listed in a pull's result (and logged one by one); the rest are only counted.
REJECTED_SAMPLE = 10

_ID = FINDING_COLUMNS.index("id")
_RELEVANT_SINCE = FINDING_COLUMNS.index("relevant_since")
#: ``raw``, the last of ``FINDING_COLUMNS``: a row prepared with its COPY text line ends before it.
_RAW = FINDING_COLUMNS.index("raw")


def watermark_key(issue_type: str) -> str:
    return f"findings_extraction.watermark.{issue_type}"


def full_refresh_key(issue_type: str) -> str:
    return f"findings_extraction.last_full_refresh.{issue_type}"


def reconciled_key(issue_type: str) -> str:
    """The periods a full pull of ``issue_type`` reconciled: period start -> the run id that did it."""
    return f"findings_extraction.reconciled_periods.{issue_type}"


#: Periods kept in :func:`reconciled_key`'s record (the newest; a backfill further back than this reconciles again).
PERIODS_KEPT = 400


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
    #: Findings dated after the run's start plus ``MAX_CLOCK_SKEW``: stored, not used for the watermark.
    future_dated: int = 0
    #: Values the warehouse cannot hold (one per finding and field), and findings skipped for one in their key.
    rejected: int = 0
    skipped: int = 0
    rejected_sample: list[dict[str, Any]] = field(default_factory=list)

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
            merged = sorted(i for i in self._recent if INT64_MIN <= i <= INT64_MAX)
            self._recent = {i for i in self._recent if not INT64_MIN <= i <= INT64_MAX}
            self._sorted = array("q", heapq.merge(self._sorted, merged))


@dataclass
class _Progress:
    seen: _SeenIds = field(default_factory=_SeenIds)
    newest: str | None = None
    #: (id, field) of the values rejected so far: a finding repeated by a moving result set is reported once.
    rejected: set[tuple[Any, str]] = field(default_factory=set)


@dataclass
class _Page:
    """One page prepared: its findings' rows (or, screened, what deciding which of them to write needs), their
    content digests, and the values its findings had that the warehouse cannot hold."""

    #: The findings' rows; none when the page was screened (``screened``): its rows are built once it is known
    #: which findings are to be written.
    rows: list[tuple[Any, ...]]
    digests: list[int]
    rejected: list[Rejection]
    received: int
    #: The rows' COPY text lines (``finding_copy_lines``), when the worker process prepared the page for a
    #: PostgreSQL warehouse; None otherwise. With them, the rows leave out their last column, ``raw``: the lines
    #: carry it, and every write of the page's findings copies the lines.
    lines: list[str] | None = None
    screened: ScreenedFindings | None = None

    @property
    def ids(self) -> list[int]:
        return [row[_ID] for row in self.rows] if self.screened is None else self.screened.ids

    @property
    def dates(self) -> list[str | None]:
        """Each finding's ``relevant_since``."""
        return [row[_RELEVANT_SINCE] for row in self.rows] if self.screened is None else self.screened.dates


def _prepared(issue_type: str, items: Sequence[msgspec.Raw | bytes], copy_lines: bool = False) -> _Page:
    """A page's items (each finding's bytes) as rows and digests, and with ``copy_lines`` their COPY text lines:
    the work of a page besides its request and its write (in the worker process, or in the fetch thread:
    ``_Preparer``)."""
    rejected: list[Rejection] = []
    rows = finding_rows(issue_type, items, rejected)
    digests = finding_digests(rows)
    if not copy_lines:
        return _Page(rows, digests, rejected, len(items))
    lines = finding_copy_lines(rows, digests)
    # the lines carry each row's raw JSON (most of a row's size): the rows go back without it, not twice
    return _Page([row[:_RAW] for row in rows], digests, rejected, len(items), lines)


def _screened(issue_type: str, items: Sequence[msgspec.Raw | bytes]) -> _Page:
    """A page's items screened (``warehouse.rows.screened_findings``): their ids, dates and digests, the rows of
    the findings to write built only once the warehouse has told which (``_written``)."""
    rejected: list[Rejection] = []
    screened = screened_findings(issue_type, items, rejected)
    return _Page([], screened.digests, rejected, len(items), screened=screened)


def _decode_processes() -> bool:
    """Whether pages are prepared in a worker process: where the process may run on more than one core, a child
    can be forked (the fork is cheap and needs no imports; a spawned child would import the provider, about a
    second), and the process may have children (a Celery worker's pool process is daemonic: it may not)."""
    import multiprocessing  # here, not at the top: a DAG file's parse imports this module (about 25 ms)

    if multiprocessing.current_process().daemon:
        return False

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores > 1 and "fork" in multiprocessing.get_all_start_methods()


#: Seconds between the worker process's checks that the task's process is still there.
PARENT_CHECK_SECONDS = 0.5


def _exit_with(parent: int) -> None:
    """In the worker process: leave as soon as ``parent`` (the task's process) is gone.

    A forked worker holds its own copies of the pipes it is fed through, so a parent killed outright (SIGKILL, an
    out-of-memory kill, a task timeout) never closes them for it: without this it would wait for work forever."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="findings-parent-watch", daemon=True).start()


class _Preparer:
    """Prepares the pages of one pull: screened while the pull writes little of what it reads (a re-sync; by the
    writer, while the fetch thread fetches the next page), built into rows in one worker process while it writes
    most of it (a first load), so that decoding, row building and hashing run on another core than the warehouse
    write.

    A screened page (``_screened``) holds each finding's id, ``relevant_since`` and digest, read at about two
    thirds of the CPU of its row and digest; the rows of the findings the warehouse does not hold with that digest
    are built once it has said which (``_written``): a re-sync of unchanged findings builds none. The interpreter
    lock is the limit a thread meets: the writer's Python work and the fetch thread's take turns on it. The process
    gets a page's items as bytes and returns its rows and digests (pickled: about 8 ms each way for a page of 3000
    findings). That transfer is a loss when the main thread has little to do, so ``writes`` (set by the pull after
    each page: did it write at least half of the findings it had not seen?) sends the next pages to the process
    (or, where there is none, builds their rows in the thread) or screens them: the first two pages of a pull are
    screened, unless the warehouse holds none of the issue type's findings (a first load writes all it reads).

    ``copy_lines`` (a PostgreSQL warehouse): the process formats each row's COPY text line too
    (``finding_copy_lines``), so that the writer copies a new finding without formatting it; the thread does
    not (most of what it prepares is not written).

    The process is forked when it is first needed, from the fetch thread (a spawned one would import the provider
    first, about a second); the child runs only ``_prepared`` (no logging, no I/O) and leaves by ``os._exit``,
    never touching the parent's connections; it leaves too when the task's process is gone (``_exit_with``). A child
    that dies fails the pull (``BrokenProcessPool``), which the task's retries repeat; nothing is written from the
    child.
    """

    def __init__(self, issue_type: str, *, processes: bool | None = None, copy_lines: bool = False,
                 writes: bool = False) -> None:
        self.issue_type = issue_type
        self.copy_lines = copy_lines
        #: Whether the pull writes most of what it reads (the pages then go to the process): ``writes`` at first
        #: (the pull knows it when the warehouse holds none of its findings), then as the first page written says,
        #: while the second is prepared already.
        self.writes = writes
        self._processes = _decode_processes() if processes is None else processes
        self._pool: ProcessPoolExecutor | None = None

    def __call__(self, page: Any) -> _Page | Future[_Page] | Callable[[], _Page]:
        """The page prepared: the worker process's future of it, or its rows built in this thread (a pull that
        writes, without a worker process), or, to be screened, the screening left to whoever takes the page
        (``_fetched_ahead``'s consumer, the writer): either way the fetch thread requests the next page meanwhile,
        and on a re-sync the writer screens a page while the service builds the next one."""
        items = page.items
        if not self.writes:
            return partial(_screened, self.issue_type, items)
        if not self._processes:
            return _prepared(self.issue_type, items)
        if self._pool is None:
            import multiprocessing
            from concurrent.futures.process import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                             initializer=_exit_with, initargs=(os.getpid(),))
        return self._pool.submit(_prepared, self.issue_type, [bytes(item) for item in items], self.copy_lines)

    def __enter__(self) -> _Preparer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _pages(
    client: FindingsClient, issue_type: str, since: datetime | None, page_size: int
) -> Iterable[RawFindingsPage]:
    if issue_type in OFFSET_TYPES:
        filters: dict[str, Any] = {"since": since} if since is not None else {}
        return client.raw_pages(client.list_findings, issue_type, page_size=page_size, **filters)
    if issue_type == "secrets":
        # The list-secrets operation has no ``since``: every pull of secrets is complete (they are few).
        return client.raw_pages(client.list_secrets, limit=min(page_size, SECRETS_PAGE_SIZE_MAX))
    raise ValueError(f"unknown issue type {issue_type!r}; expected one of {', '.join(ISSUE_TYPES)}")


def _fetched_ahead(
    pages: Iterable[Any], prepare: Callable[[Any], T | Future[T] | Callable[[], T]]
) -> Iterator[T]:
    """Yield ``prepare(page)`` of each page while a thread fetches and prepares the next one.

    The API's time and the decoding overlap the warehouse write (the database drivers release the GIL). One
    page ahead: a page is requested only after the previous one arrived (the pager decides as before; no request
    is added). ``prepare`` may return a future (the worker process's): the thread then fetches the next page while
    that one is prepared, so at most three pages are held (one written, one prepared, one fetched); or a function,
    the preparation left to the consumer: it is called here, in the consumer's thread, while the thread fetches
    the next page. An error of the fetch or of ``prepare`` is raised here, in page order; when the consumer stops
    early, the work in flight is finished and dropped.
    """
    iterator = iter(pages)

    def fetch() -> list[T | Future[T] | Callable[[], T]]:
        page = next(iterator, None)
        return [] if page is None else [prepare(page)]

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="findings-fetch") as fetcher:
        ahead = fetcher.submit(fetch)
        while True:
            prepared = ahead.result()
            if not prepared:
                return
            ahead = fetcher.submit(fetch)
            page = prepared.pop()
            if isinstance(page, Future):
                yield page.result()
            else:
                yield page() if callable(page) else page
            del page  # not held while the next page is awaited


def extract_findings(
    client: FindingsClient,
    warehouse: Warehouse,
    issue_type: str,
    *,
    since: datetime | None,
    page_size: int = FINDINGS_PAGE_SIZE.maximum,
    on_page: Callable[[PullResult], None] | None = None,
    now: datetime | None = None,
) -> PullResult:
    """Pull every ``issue_type`` finding with ``relevant_since`` >= ``since`` (all when None) into the warehouse.

    Each page is upserted in its own transaction; ids already seen in this pull are dropped (a result set
    that moves while paging repeats items). Returns the counts and the newest ``relevant_since`` seen up to
    ``now`` (the run's start, default: the current time) plus ``MAX_CLOCK_SKEW`` (``watermark``); saving it is
    the caller's job, once the pull succeeded.
    """
    full = since is None or issue_type == "secrets"
    result = PullResult(issue_type=issue_type, full=full, since=None if full or since is None else since.isoformat())
    progress = _Progress()
    latest = utc_text((now or datetime.now(timezone.utc)) + MAX_CLOCK_SKEW)
    assert latest is not None  # an aware datetime always has a canonical text
    # The collections below then scan only what the pull allocates, not the task process's whole heap (Airflow
    # and its imports: a full collection of that costs 0.1-0.2 s, a quarter of the pull's CPU time).
    already_frozen = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        _pull(client, warehouse, issue_type, None if full else since, page_size, on_page, result, progress, latest)
    finally:
        if not already_frozen:
            gc.unfreeze()
    result.watermark = progress.newest
    if full:
        # every id seen was stored by this pull and the warehouse never deletes a finding: the others are the rest
        result.not_seen = warehouse.count_findings(issue_type) - len(progress.seen)
    if result.future_dated:
        log.warning(
            "%d %s findings are dated after %s (the run's start plus %s): stored, but not used for the watermark",
            result.future_dated, issue_type, latest, MAX_CLOCK_SKEW,
        )
    if result.rejected:
        log.warning(
            "%d values of %s findings cannot be stored (%d findings skipped, the other values stored as NULL); "
            "first ones: %s",
            result.rejected, issue_type, result.skipped, result.rejected_sample,
        )
    return result


def _pull(
    client: FindingsClient,
    warehouse: Warehouse,
    issue_type: str,
    since: datetime | None,
    page_size: int,
    on_page: Callable[[PullResult], None] | None,
    result: PullResult,
    progress: _Progress,
    latest: str,
) -> None:
    pages = _pages(client, issue_type, since, page_size)
    # a pull into a warehouse that holds none of its findings writes every one: its pages are prepared whole from
    # the first (not screened, which would cost the screen as well as the rows)
    with _Preparer(issue_type, copy_lines=warehouse.engine.dialect.name == "postgresql",
                   writes=is_empty(warehouse.engine, issue_type)) as prepare:
        for page in _fetched_ahead(pages, prepare):
            fresh, written = _store_page(warehouse, issue_type, page, on_page, result, progress, latest)
            del page  # not held while the next page is awaited
            prepare.writes = written * 2 >= fresh  # (for a page two ahead: the next one is being prepared already)


def _store_page(
    warehouse: Warehouse,
    issue_type: str,
    page: _Page,
    on_page: Callable[[PullResult], None] | None,
    result: PullResult,
    progress: _Progress,
    latest: str,
) -> tuple[int, int]:
    """Count one prepared page and upsert its findings not seen earlier in the pull (one transaction); return how
    many findings it held that the pull had not seen yet, and how many of them were written."""
    ids = page.ids
    written = 0
    result.requests += 1
    seen = progress.seen
    kept = None
    if any(ident in seen for ident in ids):  # a result set that moves while paging repeats items
        kept = [at for at, ident in enumerate(ids) if ident not in seen]
    fresh = ids if kept is None else [ids[at] for at in kept]
    result.pages += 1
    result.received += page.received
    result.duplicates += len(ids) - len(fresh)
    if page.rejected:
        _note_rejected(result, progress, page.rejected)
    if fresh:
        progress.seen.update(fresh)
        every = page.dates
        dates = [date for date in (every if kept is None else [every[at] for at in kept]) if date]
        newest = max(dates, default=None)
        if newest and newest > latest:  # canonical UTC texts compare as instants
            result.future_dated += sum(1 for date in dates if date > latest)
            newest = max((date for date in dates if date <= latest), default=None)
        if newest and (progress.newest is None or newest > progress.newest):
            progress.newest = newest
        written = _written(warehouse, issue_type, page, kept)
        result.written += written
    result.unique = len(progress.seen)
    log.info(
        "pulled %d %s findings, page %d, %d total (%d written)",
        len(ids), issue_type, result.pages, result.unique, result.written,
    )
    if on_page is not None:
        on_page(result)
    if result.pages % GC_EVERY_PAGES == 0:
        gc.collect()
    return len(fresh), written


def _written(warehouse: Warehouse, issue_type: str, page: _Page, kept: list[int] | None) -> int:
    """Upsert the page's findings at ``kept`` (all when None); return how many were written. A screened page asks
    the warehouse first which of them are new or changed, and builds the rows of those only."""
    digests = page.digests
    if page.screened is None:
        rows, lines = page.rows, page.lines
        if kept is not None:
            rows, digests = [rows[at] for at in kept], [digests[at] for at in kept]
            lines = None if lines is None else [lines[at] for at in kept]
        return warehouse.upsert_findings(rows, digests=digests, lines=lines)
    screened = page.screened
    at = range(len(digests)) if kept is None else kept
    chosen = [at[k] for k in warehouse.findings_to_write(
        issue_type, [screened.ids[i] for i in at], [digests[i] for i in at])]
    if not chosen:
        return 0
    return warehouse.upsert_findings(screened.rows(chosen), digests=[digests[i] for i in chosen])


def _note_rejected(result: PullResult, progress: _Progress, rejected: list[Rejection]) -> None:
    """Count a page's rejected values (each finding and field once per pull); log and keep the first few."""
    for rejection in rejected:
        key = (rejection.id, rejection.field)
        if rejection.id is not None:  # a finding without an id cannot be told from another
            if key in progress.rejected:
                continue
            progress.rejected.add(key)
        result.rejected += 1
        result.skipped += rejection.skipped
        if len(result.rejected_sample) < REJECTED_SAMPLE:
            result.rejected_sample.append(rejection.as_dict())
            log.warning(
                "%s finding %s: %s: %s; %s",
                rejection.issue_type, rejection.id, rejection.field, rejection.reason,
                "the finding is skipped" if rejection.skipped else "stored as NULL",
            )


def period_start(now: datetime, length: timedelta) -> datetime:
    """Start of the period of ``length`` holding ``now``, periods aligned on 00:00 UTC (24 h: today's midnight)."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    return epoch + ((now - epoch) // length) * length


def full_refresh_reason(
    warehouse: Warehouse,
    issue_type: str,
    *,
    weekday: int | None,
    max_age: timedelta | None,
    now: datetime,
    logical_date: datetime | None = None,
    run_id: str | None = None,
) -> str | None:
    """Why a full pull of ``issue_type`` is due, or None when it is not.

    Due when no full pull reconciled the period of ``max_age`` that holds the run's ``logical_date`` (default
    ``now``; periods aligned on 00:00 UTC: with 24 hours, the first run that stands for each UTC day), or when the
    run that did is this one (``run_id``) run again; or on ``weekday`` (of the logical date) when the last full
    pull is at least ``FULL_REFRESH_MIN_AGE`` old (never recorded counts as old). Either suffices; None disables a
    trigger.
    """
    at = logical_date or now
    if max_age is None and (weekday is None or at.weekday() != weekday):
        return None
    last = parse_timestamp(warehouse.get_state(full_refresh_key(issue_type)))
    if weekday is not None and at.weekday() == weekday and (last is None or now - last >= FULL_REFRESH_MIN_AGE):
        return "weekly full refresh"
    if max_age is not None:
        if last is None:
            return "no full refresh yet"
        start = period_start(at, max_age)
        done_by = (warehouse.get_state(reconciled_key(issue_type)) or {}).get(start.isoformat())
        if done_by is None and period_start(last, max_age) == start:
            done_by = ""  # reconciled, by a run that did not record its id
        if done_by is None:
            return f"no full refresh since {start:%Y-%m-%d %H:%M} UTC (one per {max_age.total_seconds() / 3600:g} h)"
        if run_id is not None and done_by == run_id:
            return f"a re-run of {run_id}, the run that reconciled the period from {start:%Y-%m-%d %H:%M} UTC"
    return None


def pull_since(
    warehouse: Warehouse,
    issue_type: str,
    *,
    full_refresh: bool,
    full_refresh_weekday: int | None,
    overlap: timedelta,
    now: datetime,
    full_refresh_max_age: timedelta | None = None,
    logical_date: datetime | None = None,
    run_id: str | None = None,
) -> tuple[datetime | None, str]:
    """Where the next pull of ``issue_type`` starts (None: everything) and why."""
    if issue_type == "secrets":
        return None, "secrets are always pulled completely"
    if full_refresh:
        return None, "full refresh requested"
    reason = full_refresh_reason(
        warehouse, issue_type, weekday=full_refresh_weekday, max_age=full_refresh_max_age, now=now,
        logical_date=logical_date, run_id=run_id,
    )
    if reason is not None:
        return None, reason
    mark = parse_timestamp(warehouse.get_state(watermark_key(issue_type)))
    if mark is None:
        return None, "no watermark yet"
    if mark > now + MAX_CLOCK_SKEW:
        return None, f"watermark {mark.isoformat()} is in the future (set by a future-dated finding)"
    return mark - overlap, f"incremental from watermark {mark.isoformat()} minus {overlap}"


def run_extraction(
    client: FindingsClient,
    warehouse: Warehouse,
    issue_types: Iterable[str],
    *,
    full_refresh: bool = False,
    full_refresh_weekday: int | None = None,
    full_refresh_max_age: timedelta | None = None,
    overlap: timedelta = timedelta(hours=1),
    page_size: int = FINDINGS_PAGE_SIZE.maximum,
    now: datetime | None = None,
    logical_date: datetime | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Pull each issue type and advance its watermark after its pull succeeded; return the counts per type.

    A full pull is made on ``full_refresh``, once per period of ``full_refresh_max_age`` (the period holding the
    run's ``logical_date``, default ``now``; ``run_id`` tells a re-run of the run that reconciled it), and on
    ``full_refresh_weekday`` (at most once in ``FULL_REFRESH_MIN_AGE``); None disables a trigger. A failing type
    does not undo the others: their watermarks are saved, then the first error is raised.

    On an empty ``findings`` table (a first load) the secondary indexes the pulls do not use are
    dropped before them and built after them, before the recount and the snapshot, also when a pull fails; on a
    table that holds findings, an index missing (a first load killed midway) is built before the pulls
    (:func:`findings_provider.warehouse.indexes.deferred_on_first_load`).
    """
    now = now or datetime.now(timezone.utc)
    results: dict[str, Any] = {}
    error: Exception | None = None
    issue_types = list(dict.fromkeys(issue_types))
    for issue_type in issue_types:
        if issue_type not in ISSUE_TYPES:
            raise ValueError(f"issue_types: unknown issue type {issue_type!r}; expected {', '.join(ISSUE_TYPES)}")
    # first, so that a new copy of a finding is stored with its counted mark where the primary branch decides it
    # (branches.counted_on_insert); the copies left unmarked are recounted after the pulls
    projects = refresh_projects(client, warehouse, now)
    forget_logged_unknowns()  # an enum value nobody knows yet is stored as received and logged once per run
    # on an empty warehouse the secondary indexes are built once after the pulls, not entry by entry during them
    with deferred_on_first_load(warehouse.engine):
        for issue_type in issue_types:
            since, reason = pull_since(
                warehouse,
                issue_type,
                full_refresh=full_refresh,
                full_refresh_weekday=full_refresh_weekday,
                full_refresh_max_age=full_refresh_max_age,
                overlap=overlap,
                now=now,
                logical_date=logical_date,
                run_id=run_id,
            )
            log.info("pulling %s findings: %s", issue_type, reason)
            try:
                result = extract_findings(client, warehouse, issue_type, since=since, page_size=page_size, now=now)
            except Exception as exc:
                log.error("pull of %s findings failed; its watermark stays where it was: %s", issue_type, exc)
                error = error or exc
                continue
            period = None if full_refresh_max_age is None else period_start(logical_date or now, full_refresh_max_age)
            results[issue_type] = _pulled(warehouse, result, reason, now, period, run_id)
    if error is not None:
        raise error
    started = time.perf_counter()
    recounted = recount_copies(warehouse)
    projects["recounted"] += recounted
    log.info("%d findings' counted copy changed with the copies pulled (%.1f s)", recounted,
             time.perf_counter() - started)
    started = time.perf_counter()
    snapshot = warehouse.take_snapshot(now.date())
    log.info("snapshot of %s: %d rows of counts by issue type, repository, severity and status (%.1f s)",
             now.date(), snapshot, time.perf_counter() - started)
    return {
        "issue_types": results,
        "written": sum(r["written"] for r in results.values()),
        "findings": sum(r["unique"] for r in results.values()),
        "requests": sum(r["requests"] for r in results.values()),
        "rejected": sum(r["rejected"] for r in results.values()),
        "future_dated": sum(r["future_dated"] for r in results.values()),
        "projects": projects,
    }


def _pulled(warehouse: Warehouse, result: PullResult, reason: str, now: datetime, period: datetime | None,
            run_id: str | None) -> dict[str, Any]:
    """After a successful pull: save its watermark and, for a full pull, record the reconciliation of ``period``
    (None: no ``full_refresh_max_age``); log and return its counts."""
    _save_progress(warehouse, result, now)
    if result.full and period is not None:
        _record_reconciled(warehouse, result.issue_type, period, run_id)
    log.info(
        "%s: %d requests, %d pages, %d findings (%d duplicates dropped), %d rows written, watermark %s%s",
        result.issue_type, result.requests, result.pages, result.unique, result.duplicates, result.written,
        result.watermark, "" if result.not_seen is None else f", {result.not_seen} stored but no longer listed",
    )
    return {**result.as_dict(), "reason": reason}


def refresh_projects(client: FindingsClient, warehouse: Warehouse, now: datetime,
                     page_size: int = PROJECTS_PAGE_SIZE.default) -> dict[str, Any]:
    """List every project and store them with their primary branches, then mark the copy of each finding the
    service counts (:mod:`findings_provider.warehouse.branches`); return what was stored.

    :func:`run_extraction` calls it before its pulls, so that the copies it stores are marked against the current
    primary branches. A listing the service refuses or cannot finish leaves the stored projects as they were (the
    copies are recounted against them) and is logged, not raised: the findings are pulled and stored either way,
    and only the choice among copies of one finding waits for the next listing. A 404 included: the reference does
    not give the listing's path (a service may serve it elsewhere or not at all); a wrong deployment fails the
    pulls that follow.
    """
    started = time.perf_counter()
    try:
        listed = list(client.items(client.list_projects, page_size=page_size))
    except FindingsApiError as exc:
        log.warning("projects: listing failed, the stored projects' primary branches are used: %s", exc)
        return {"projects": None, "recounted": recount_copies(warehouse), "error": str(exc)}
    stored = store_projects(warehouse, listed, now=now)
    log.info("projects: %d listed, %d findings' counted copy changed (%.1f s)", stored["projects"],
             stored["recounted"], time.perf_counter() - started)
    return stored


def _record_reconciled(warehouse: Warehouse, issue_type: str, start: datetime, run_id: str | None) -> None:
    """Record that ``run_id`` reconciled the period from ``start`` (the newest ``PERIODS_KEPT`` are kept)."""
    periods = dict(warehouse.get_state(reconciled_key(issue_type)) or {})
    periods.setdefault(start.isoformat(), run_id or "")
    newest = sorted(periods)[-PERIODS_KEPT:]
    warehouse.set_state(reconciled_key(issue_type), {k: periods[k] for k in newest})


def _save_progress(warehouse: Warehouse, result: PullResult, now: datetime) -> None:
    """Advance the watermark (or replace one in the future); record the time of a full refresh."""
    old = parse_timestamp(warehouse.get_state(watermark_key(result.issue_type)))
    new = parse_timestamp(result.watermark)
    if new is not None and (old is None or new > old or old > now + MAX_CLOCK_SKEW):
        warehouse.set_state(watermark_key(result.issue_type), new.isoformat())
    if result.full:
        warehouse.set_state(full_refresh_key(result.issue_type), now.isoformat())
