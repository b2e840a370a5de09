"""Where a first load's time goes: the seconds of each phase of a full pull, per 100,000 findings.

Pulls every sast and sca page from a page server (``page_server.py``: its own, of ``--findings`` findings, unless
``--base-url`` names a running one or an emulator) into an empty warehouse through the product's own
``pipeline.extraction.run_extraction`` (full refresh, 3000-item pages), then again into the loaded warehouse (a
re-sync of unchanged findings), on SQLite and on PostgreSQL. Each pull runs twice per warehouse:

- **isolation**: the fetch-ahead thread and the worker process replaced by fetching and preparing each page in the
  main thread, one page ahead as the fetch thread does (so each page is screened, or turned into rows and digests,
  as the product decides: the first two pages of each pull are screened), so no phase overlaps another and each
  one's seconds are its own;
- **pipeline**: the product as it runs: the fetch thread fetches each page; while the pull writes little of what
  it reads (a re-sync, and the first two pages of a pull into a warehouse that holds some of its findings) the main
  thread screens it (while the fetch thread fetches the next), and the worker process turns the others into rows
  and digests (a first load); their phases overlap the main thread's, so the main thread's rows add up to the wall
  time and the others are hidden behind them except for the main thread's wait for the next page (the worker's
  phases are not measured in this mode: ``finding_rows`` and the digests are left blank when a page went to the
  worker; the split of ``finding_rows`` is made in isolation only).

A screened page (``extraction._screened``) is prepared by ``warehouse.rows.screened_findings``: each finding's id,
``relevant_since`` and digest without its row (the rows of the rare findings that may hold a value the warehouse
cannot are built by the screen, and counted in its phase). The main thread then asks ``Warehouse.findings_to_write``
which of them are new or changed (the upsert's lookup, ``upsert._lookup``, on a connection of its own before the
upsert's transaction: its query is counted in that phase only, not in the upsert's lookup) and builds the rows of
those only (``ScreenedFindings.rows``: its own phase, whose ``finding_rows`` calls are not in the ``finding_rows``
phases; these count the pages prepared whole, ``extraction._prepared``) before ``upsert_findings``.

The phases are timed by wrapping the product's own functions for the length of the run (nothing of the product is
re-implemented): the client's request (``FindingsClient._call``: HTTP plus the page decode), the page decode
(``client.endpoints``' msgspec decoder into raw items), the screen (``screened_findings``), ``finding_rows`` and
``finding_digests`` as the extraction calls them for a page prepared whole (canonical form and row building; in
isolation the canonical form, the msgspec decode of each item into the canonical reader's struct, is timed again on
the side to split the two: that second decode is the measurement's, not the product's, and its seconds are in the
wall and in the pull loop's row), ``Warehouse.findings_to_write``, ``ScreenedFindings.rows``,
``Warehouse.upsert_findings`` with each statement of its DBAPI cursors classified by its text (the write lock, the
history context and trigger setup, the lookup of the stored digests, the plain ``INSERT``, the upsert of changed
rows with the history trigger; PostgreSQL: the advisory lock, the lookup of the new rows' fingerprints, the COPY
text formatting, the ``COPY`` of new rows into ``findings``, and for changed rows the staging table, its ``COPY``,
the history diff, the merge) and its commit (SQLite: the WAL auto-checkpoint included), the periodic garbage
collection, the count of findings no longer listed, the ``counted`` recount (``branches.recount``), the daily
snapshot. What remains of the pull loop (de-duplication, the seen ids, the watermark) is the main thread's pull
time minus those. Wrapping costs about a microsecond per call; the finding rows and the statements are called per
page, so it does not show.

    PYTHONPATH=plugins:include:bench python bench/phases.py --findings 100000 --out /tmp/phases.json

Prints one Markdown table per warehouse (seconds per 100,000 findings, and the wall and CPU seconds of each pull;
on PostgreSQL also the CPU seconds of the server's sessions, when the server runs on this machine)
and writes everything to ``--out``. PostgreSQL: a scratch database on the server of ``--pg-admin-url`` (default:
``FINDINGS_PG_HOST``/``_PORT``/``_USER``, as ``devtools/services.py``), dropped at the end; ``--backends sqlite``
leaves it out.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from common import checkpoint, children_cpu_seconds, reset_database, write_json
from pulled import ISSUE_TYPES

from devtools.services import Postgres, configured_postgres

PER = 100_000
MODES = (("first", "isolation"), ("first", "pipeline"), ("resync", "isolation"), ("resync", "pipeline"))

#: (key, label, thread) in the order printed; ``thread``: where the phase runs in the real pipeline.
PHASES: tuple[tuple[str, str, str], ...] = (
    ("fetch", "fetch: HTTP request and response body (httpx)", "fetch"),
    ("decode", "decode: page JSON into raw items (msgspec)", "fetch"),
    ("screen", "screen: each finding's id, date and digest without its row (`screened_findings`, in the writer's "
     "thread while the next page is fetched)", "main"),
    ("canonical", "canonical form of a page prepared whole: each item into the canonical reader's struct (msgspec)",
     "worker"),
    ("rows", "row building of a page prepared whole: canonical values, checks, tuples (`finding_rows` minus the above)",
     "worker"),
    ("finding_rows", "`finding_rows` of the pages prepared whole (`_prepared`: canonical form + row building)",
     "worker"),
    ("digests", "content digests of the rows of a page prepared whole (`finding_digests`)", "worker"),
    ("wait", "main thread waiting for the next page", "main"),
    ("loop", "pull loop: de-duplication, seen ids, watermark, logging", "main"),
    ("gc", "garbage collection every 4 pages", "main"),
    ("to_write", "which findings of a screened page are new or changed (`findings_to_write`: the upsert's lookup, "
     "before rows are built)", "main"),
    ("screened_rows", "rows of the new and changed findings of a screened page (`ScreenedFindings.rows`)", "main"),
    ("upsert_python", "upsert: sort, de-duplicate, pick the new and changed rows", "main"),
    ("lock", "write lock (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: `pg_advisory_xact_lock`)", "main"),
    ("history_setup", "history: context row and TEMP trigger setup", "main"),
    ("lookup", "stored digests of the upserted rows' keys (the upsert's own lookup query, one per issue type)",
     "main"),
    ("insert", "SQL insert of new rows (table + indexes)", "main"),
    ("upsert", "SQL upsert of changed rows (`WHERE digest IS NOT excluded.digest`, history trigger)", "main"),
    ("fingerprints", "PostgreSQL: stored copies of the new rows' fingerprints (`counted` marks)", "main"),
    ("copy_text", "PostgreSQL: COPY text formatting (`_copy_text`, as the `COPY` reads it)", "main"),
    ("copy_new", "PostgreSQL: `COPY` of new rows into `findings` (table + indexes; minus the formatting)", "main"),
    ("stage", "PostgreSQL: temporary staging table (changed rows)", "main"),
    ("copy", "PostgreSQL: `COPY` of changed rows into staging (minus the formatting)", "main"),
    ("history_diff", "PostgreSQL history: diff staging ⋈ findings into `finding_events`", "main"),
    ("merge", "PostgreSQL: merge `INSERT ... SELECT ... ON CONFLICT` (table + indexes)", "main"),
    ("other_sql", "other statements of the upsert", "main"),
    ("commit", "commit (SQLite: with the WAL auto-checkpoint)", "main"),
    ("not_seen", "count of stored findings no longer listed", "main"),
    ("indexes", "secondary indexes: dropped before a first load, built after it (`warehouse.indexes`)", "main"),
    ("projects", "projects listing and storing before the pulls, besides its recount", "main"),
    ("recount", "`counted` recounts (`branches.recount`: the projects' listing's, then the one after the pulls)",
     "main"),
    ("snapshot", "daily snapshot", "main"),
    ("state", "watermarks and pipeline state", "main"),
)


@dataclass(frozen=True)
class Source:
    """Where the findings come from: a page server or an emulator."""

    base_url: str
    token: str
    slug: str
    deployment_id: str


class Timers:
    """Seconds and calls per phase; each phase is timed in one thread only."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.in_upsert = threading.local()
        self.in_projects = threading.local()

    def add(self, key: str, seconds: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        self.calls[key] = self.calls.get(key, 0) + 1

    def wrap(self, key: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(key, time.perf_counter() - started)

        return timed

    def get(self, key: str) -> float:
        return self.seconds.get(key, 0.0)


def _statement_phase(sql: str, many: bool) -> str:
    """The phase of one statement of ``Warehouse.upsert_findings``, from its text."""
    text = sql.lstrip()
    if text.startswith("BEGIN") or "pg_advisory_xact_lock" in text:
        return "lock"
    if "unnest" in text and "match_based_id" in text:
        return "fingerprints"
    if "findings_history_context" in text or text.startswith("CREATE TEMP TRIGGER"):
        return "history_setup"
    if "json_each" in text or (text.startswith("SELECT") and "digest" in text):
        return "lookup"
    if text.startswith("CREATE TEMPORARY TABLE"):
        return "stage"
    if text.startswith("INSERT INTO finding_events"):
        return "history_diff"
    if text.startswith("INSERT INTO") and "ON CONFLICT" in text:
        return "upsert" if many else "merge"
    if text.startswith("INSERT INTO"):
        return "insert"
    return "other_sql"


class _TimedCursor:
    """A DBAPI cursor whose statements are timed by phase (only inside ``upsert_findings``)."""

    def __init__(self, cursor: Any, timers: Timers) -> None:
        self._cursor = cursor
        self._timers = timers

    def _timed(self, phase: str, call: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            self._timers.add(phase, time.perf_counter() - started)

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed(_statement_phase(sql, False), self._cursor.execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._timed(_statement_phase(sql, True), self._cursor.executemany, sql, *args)

    def copy_expert(self, sql: str, *args: Any) -> Any:
        # the COPY formats its text as it reads it (``upsert._CopyStream``): that formatting is its own phase
        formatted = self._timers.get("copy_text")
        started = time.perf_counter()
        try:
            return self._cursor.copy_expert(sql, *args)
        finally:
            elapsed = time.perf_counter() - started - (self._timers.get("copy_text") - formatted)
            self._timers.add("copy" if "stage_" in sql else "copy_new", elapsed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextlib.contextmanager
def _patched(target: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


def _done(prepared: Any) -> Any:
    """A page as the preparer gave it, its preparation done when it was left to the consumer (a screened page)."""
    return prepared() if callable(prepared) else prepared


@contextlib.contextmanager
def instrumented(timers: Timers, warehouse: Any, *, isolation: bool) -> Iterator[None]:
    """Time the product's phases (see the module's docstring) while the block runs."""
    from findings_provider.client import FindingsClient, endpoints
    from findings_provider.pipeline import extraction
    from findings_provider.warehouse import Warehouse, branches, indexes, rows, upsert
    from sqlalchemy.pool.base import _ConnectionFairy

    page_decoder = endpoints._RAW_DECODER
    decoder = types.SimpleNamespace(decode=timers.wrap("decode", page_decoder.decode))
    finding_rows = rows.finding_rows  # what extraction imported
    decode_finding = rows._decode_finding

    timed_digests = timers.wrap("digests", rows.finding_digests)
    # Only the extraction's own names are replaced: the ``finding_rows`` calls of ``screened_findings`` (findings that
    # may hold a value the warehouse cannot) and of ``ScreenedFindings.rows`` go to ``rows.finding_rows``, not timed
    # on their own, so their seconds are counted once: in the screen's and in the screened rows' phases.
    timed_screen = timers.wrap("screen", rows.screened_findings)
    screened_rows = timers.wrap("screened_rows", rows.ScreenedFindings.rows)
    preparer_call = extraction._Preparer.__call__

    def counted_call(self: Any, page: Any) -> Any:  # the pages sent to the worker process (a future of it)
        prepared = preparer_call(self, page)
        if isinstance(prepared, Future):
            timers.add("worker_pages", 0.0)
        return prepared

    def timed_finding_rows(issue_type: str, items: Any, rejected: Any = None) -> Any:
        if isolation:  # the canonical form alone, timed on the side (the same decode finding_rows makes)
            started = time.perf_counter()
            for item in items:
                decode_finding(item)
            timers.add("canonical", time.perf_counter() - started)
        started = time.perf_counter()
        try:
            return finding_rows(issue_type, items, rejected)
        finally:
            timers.add("finding_rows", time.perf_counter() - started)

    fetched_ahead = extraction._fetched_ahead

    def sequential(pages: Any, prepare: Callable[[Any], Any]) -> Iterator[Any]:
        # one page ahead, in this thread, as ``_fetched_ahead`` in its thread: the next page is fetched and prepared
        # before this one is yielded (written), so the preparer decides for it before this page's ``writes`` is set,
        # as in the product (the first two pages of each pull are screened, not only the first)
        ahead: list[Any] = []
        for page in pages:
            prepared = prepare(page)
            if ahead:
                yield _done(ahead.pop())
            ahead.append(prepared)
            del prepared
        if ahead:
            yield _done(ahead.pop())

    def waited(pages: Any, prepare: Callable[[Any], Any]) -> Iterator[Any]:
        ahead = fetched_ahead(pages, prepare)
        while True:
            started = time.perf_counter()
            try:
                page = next(ahead)
            except StopIteration:
                return
            finally:
                timers.add("wait", time.perf_counter() - started)
            yield page

    upsert_findings = Warehouse.upsert_findings

    def timed_upsert(self: Any, page_rows: Any, **kwargs: Any) -> Any:
        timers.in_upsert.active = True
        try:
            return timers.wrap("upsert_findings", upsert_findings)(self, page_rows, **kwargs)
        finally:
            timers.in_upsert.active = False

    fairy_cursor = _ConnectionFairy.cursor

    def cursor(self: Any, *args: Any, **kwargs: Any) -> Any:
        raw = fairy_cursor(self, *args, **kwargs)
        return _TimedCursor(raw, timers) if getattr(timers.in_upsert, "active", False) else raw

    dialect = warehouse.engine.dialect
    do_commit = dialect.do_commit

    def commit(dbapi_connection: Any) -> None:
        key = "commit" if getattr(timers.in_upsert, "active", False) else "commit_other"
        timers.wrap(key, do_commit)(dbapi_connection)

    timed_gc = types.SimpleNamespace(collect=timers.wrap("gc", gc.collect), freeze=gc.freeze, unfreeze=gc.unfreeze,
                                     get_freeze_count=gc.get_freeze_count)
    branches_recount, refresh_projects = branches.recount, extraction.refresh_projects

    def recount(*args: Any, **kwargs: Any) -> Any:  # the recount of the projects' listing, or the one after the pulls
        key = "recount_projects" if getattr(timers.in_projects, "active", False) else "recount_after"
        return timers.wrap(key, branches_recount)(*args, **kwargs)

    recount_copies = branches.recount_copies

    def timed_recount_copies(*args: Any, **kwargs: Any) -> Any:  # with its commit
        if getattr(timers.in_projects, "active", False):
            return recount_copies(*args, **kwargs)
        return timers.wrap("recount_copies", recount_copies)(*args, **kwargs)

    def projects_all(*args: Any, **kwargs: Any) -> Any:
        timers.in_projects.active = True
        try:
            return timers.wrap("projects_all", refresh_projects)(*args, **kwargs)
        finally:
            timers.in_projects.active = False
    with contextlib.ExitStack() as stack:
        for target, name, value in (
            (endpoints, "_RAW_DECODER", decoder),
            (FindingsClient, "_call", timers.wrap("request", FindingsClient._call)),
            (extraction, "finding_rows", timed_finding_rows),
            (extraction, "finding_digests", timed_digests),
            (extraction, "screened_findings", timed_screen),
            (rows.ScreenedFindings, "rows", screened_rows),
            (extraction._Preparer, "__call__", counted_call),
            # in isolation no page is prepared in the worker process: the pages a pull does not screen are prepared
            # whole in the main thread (``_prepared``); in the pipeline they go to the worker, and their timers stay
            # in the worker (its phases are not measured there)
            (extraction, "_decode_processes", (lambda: False) if isolation else extraction._decode_processes),
            (extraction, "_fetched_ahead", sequential if isolation else waited),
            (extraction, "gc", timed_gc),
            (branches, "recount", recount),
            (extraction, "refresh_projects", projects_all),
            (extraction, "recount_copies", timed_recount_copies),
            (extraction, "extract_findings", timers.wrap("pull", extraction.extract_findings)),
            (Warehouse, "upsert_findings", timed_upsert),
            # its lookup runs on a connection of its own, outside ``upsert_findings``: its cursor is not timed by
            # statement (``cursor`` below), so the lookup is counted here only, not in the ``lookup`` phase
            (Warehouse, "findings_to_write", timers.wrap("to_write", Warehouse.findings_to_write)),
            (Warehouse, "count_findings", timers.wrap("not_seen", Warehouse.count_findings)),
            (Warehouse, "take_snapshot", timers.wrap("snapshot", Warehouse.take_snapshot)),
            (indexes, "drop_deferrable", timers.wrap("indexes", indexes.drop_deferrable)),
            (indexes, "build_missing", timers.wrap("indexes", indexes.build_missing)),
            (upsert, "_copy_text", timers.wrap("copy_text", upsert._copy_text)),
            (_ConnectionFairy, "cursor", cursor),
            (dialect, "do_commit", commit),
        ):
            stack.enter_context(_patched(target, name, value))
        yield


def phase_seconds(timers: Timers, isolation: bool) -> dict[str, float]:
    """The phases of ``PHASES`` from the raw timers (the derived ones: what a timer holds minus its parts)."""
    t = timers.get
    out = {key: t(key) for key, _, _ in PHASES}
    out["fetch"] = t("request") - t("decode")
    if isolation:
        out["rows"] = t("finding_rows") - t("canonical")
    else:  # not split (the canonical form is timed again in isolation only)
        out["canonical"] = out["rows"] = float("nan")
        if timers.calls.get("worker_pages"):  # some pages were prepared in the worker process: not measured
            out["finding_rows"] = out["digests"] = float("nan")
    sql = ("lock", "history_setup", "lookup", "insert", "upsert", "fingerprints", "copy_text", "copy_new", "stage",
           "copy", "history_diff", "merge", "other_sql", "commit")
    out["upsert_python"] = t("upsert_findings") - sum(t(key) for key in sql)
    # what the main thread spends on the fetch thread's and the worker's work: in isolation, their phases; in the
    # pipeline, its wait for the next page
    fetch_side = t("request") + t("screen") + t("finding_rows") + t("digests") if isolation else t("wait")
    if not isolation:  # the screen runs in the main thread, inside its wait for the next page (``_fetched_ahead``)
        out["wait"] = t("wait") - t("screen")
    out["loop"] = (t("pull") - fetch_side - t("to_write") - t("screened_rows") - t("upsert_findings") - t("gc")
                   - t("not_seen"))
    out["recount"] = t("recount_projects") + t("recount_copies")
    out["projects"] = t("projects_all") - t("recount_projects")
    return out


def server_cpu(engine: Any) -> dict[int, float]:
    """CPU seconds of each PostgreSQL session on the warehouse's database, read from ``/proc`` (a server on this
    machine; empty otherwise, or on SQLite). The server's share of a pull, which its wall time hides on a busy
    machine."""
    if engine.dialect.name != "postgresql":
        return {}
    with engine.connect() as conn:
        pids = [int(p) for p in conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()").scalars()]
    seconds = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def one_pull(database_url: str, source: Source, *, isolation: bool) -> dict[str, Any]:
    """One full pull of sast and sca through ``run_extraction``; its phases and totals."""
    from findings_provider.client import FindingsClient
    from findings_provider.pipeline.extraction import run_extraction
    from findings_provider.warehouse import Warehouse, make_engine

    checkpoint(database_url)
    engine = make_engine(database_url)
    warehouse = Warehouse(engine, run_id="bench-phases")
    warehouse.create_all()
    timers = Timers()
    try:
        with FindingsClient(source.base_url, source.token, deployment_id=source.deployment_id,
                            deployment_slug=source.slug) as client:
            server_before = server_cpu(engine)
            with instrumented(timers, warehouse, isolation=isolation):
                gc.collect()
                started, cpu, worker_cpu = time.perf_counter(), time.process_time(), children_cpu_seconds()
                result = run_extraction(client, warehouse, ISSUE_TYPES, full_refresh=True,
                                        now=datetime.now(timezone.utc))
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                worker_cpu = children_cpu_seconds() - worker_cpu
            server_after = server_cpu(engine)
    finally:
        engine.dispose()
    server = sum(after - server_before.get(pid, 0.0) for pid, after in server_after.items()) if server_after else None
    phases = phase_seconds(timers, isolation)
    phases["state"] = (wall - timers.get("pull") - timers.get("projects_all") - timers.get("recount_copies")
                       - timers.get("snapshot") - timers.get("indexes"))
    return {"findings": result["findings"], "written": result["written"], "wall_s": wall, "cpu_s": cpu,
            "worker_cpu_s": worker_cpu, "server_cpu_s": server, "phases": phases, "calls": timers.calls}


def table(backend: str, runs: dict[str, dict[str, Any]]) -> str:
    """The Markdown table of one warehouse: seconds per 100,000 findings, by phase and run."""
    heads = [f"{mode} load, {how}" if mode == "first" else f"re-sync, {how}" for mode, how in MODES]
    lines = [f"| {backend}: seconds per {PER:,} findings | thread | " + " | ".join(heads) + " |",
             "|---|---|" + "---:|" * len(heads)]
    keys = [f"{mode}_{how}" for mode, how in MODES]
    for key, label, thread in PHASES:
        values = [runs[k]["phases"][key] * PER / max(runs[k]["findings"], 1) for k in keys]
        if all(v == 0 or v != v for v in values):
            continue
        cells = ["" if v != v else f"{v:.2f}" for v in values]
        lines.append(f"| {label} | {thread} | " + " | ".join(cells) + " |")
    for name, field in (("**wall**", "wall_s"), ("CPU of the process", "cpu_s"),
                        ("CPU of its worker process", "worker_cpu_s"),
                        ("CPU of the server's sessions", "server_cpu_s")):
        if any(runs[k].get(field) is None for k in keys):
            continue
        values = [runs[k][field] * PER / max(runs[k]["findings"], 1) for k in keys]
        lines.append(f"| {name} | | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    rates = [runs[k]["findings"] / runs[k]["wall_s"] for k in keys]
    lines.append("| findings/s | | " + " | ".join(f"{r:,.0f}" for r in rates) + " |")
    return "\n".join(lines)


def measure(database_url: str, source: Source) -> dict[str, dict[str, Any]]:
    """The four pulls of ``MODES`` into one warehouse (emptied before each first load)."""
    runs: dict[str, dict[str, Any]] = {}
    for mode, how in MODES:
        if mode == "first":
            reset_database(database_url)
        runs[f"{mode}_{how}"] = one_pull(database_url, source, isolation=how == "isolation")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--findings", type=int, default=100_000, help="findings of the page server it starts")
    parser.add_argument("--base-url", help="a running page server or emulator (token, slug and id below)")
    parser.add_argument("--token", default="bench-phases-token")
    parser.add_argument("--slug")
    parser.add_argument("--deployment-id")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg-admin-url", help="default: the server of FINDINGS_PG_HOST/_PORT/_USER")
    parser.add_argument("--workdir", help="where the SQLite warehouse goes (default: a temporary directory)")
    parser.add_argument("--out", help="write every figure here as JSON")
    args = parser.parse_args()
    logging.getLogger("findings_provider").setLevel(logging.ERROR)  # the page server lists no projects: a warning
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - {"sqlite", "postgres"}
    if unknown:
        parser.error(f"--backends: unknown {', '.join(sorted(unknown))}; allowed: sqlite, postgres")

    with contextlib.ExitStack() as stack:
        if args.base_url:
            if not (args.slug and args.deployment_id):
                parser.error("--base-url needs --slug and --deployment-id")
            source = Source(args.base_url, args.token, args.slug, args.deployment_id)
        else:
            from page_server import PageServerProcess

            server = stack.enter_context(PageServerProcess(findings=args.findings, token=args.token))
            source = Source(server.base_url, args.token, server.deployment_slug, server.deployment_id)
        workdir = Path(args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-phases-")))
        workdir.mkdir(parents=True, exist_ok=True)
        results: dict[str, Any] = {"findings_requested": args.findings, "backends": {}}
        for backend in backends:
            if backend == "sqlite":
                url = f"sqlite:///{workdir / 'phases.db'}"
            else:
                pg, _ = Postgres.parse(args.pg_admin_url) if args.pg_admin_url else (configured_postgres(), "")
                try:
                    name = pg.create_database("findings_phases")
                except Exception as error:  # as run_all.py: no PostgreSQL, no PostgreSQL figures
                    results["postgres_skipped"] = f"PostgreSQL at {pg.host}:{pg.port} unusable: {error}"
                    print(results["postgres_skipped"], flush=True)
                    continue
                stack.callback(pg.drop_database, name)
                url = pg.url(name)
            runs = measure(url, source)
            results["backends"][backend] = runs
            print(table("SQLite" if backend == "sqlite" else "PostgreSQL", runs) + "\n", flush=True)
        if args.out:
            write_json(args.out, results)


if __name__ == "__main__":
    main()
