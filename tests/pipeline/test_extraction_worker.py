"""Pages prepared in a worker process (``pipeline.extraction._Preparer``): the same rows, digests and rejected
values as in the fetch thread, while a pull writes most of what it reads."""

from __future__ import annotations

import concurrent.futures.process
import multiprocessing
import os
import threading
import time
import types
from concurrent.futures import Future
from typing import Any

import orjson
import pytest
from findings_provider.pipeline import extraction
from findings_provider.warehouse import upsert
from findings_provider.warehouse.rows import content_digest

from .fakes import FakeApi, finding
from .test_extraction import rows, run


def page(*findings: dict) -> types.SimpleNamespace:
    return types.SimpleNamespace(items=[orjson.dumps(body) for body in findings])


def resolved(prepared: Any) -> extraction._Page:
    """A prepared page as ``_fetched_ahead`` yields it: as the thread returned it, the worker process's result, or
    the screening left to the consumer, done."""
    if isinstance(prepared, Future):
        return prepared.result(timeout=60)
    return prepared() if callable(prepared) else prepared


def test_pages_are_prepared_in_a_worker_process_alike_once_the_pull_writes() -> None:
    pages = [page(*(finding(i, minutes_ago=i) for i in range(start, start + 50))) for start in (1, 51, 101)]
    pages[2].items[3] = orjson.dumps({**finding(104, minutes_ago=1), "rule_name": "a\x00b"})
    with extraction._Preparer("sast", processes=True) as prepare:
        deferred = prepare(pages[0])
        assert prepare._pool is None  # until the first page is written, whether the pull writes is unknown
        assert callable(deferred)  # screened by the consumer, not in the fetch thread
        first = resolved(deferred)
        prepare.writes = True
        futures = [prepare(p) for p in pages[1:]]
        assert all(isinstance(f, Future) for f in futures)
        later = [resolved(f) for f in futures]
        pool: Any = prepare._pool
        workers = set(pool._processes)
    assert workers
    assert os.getpid() not in workers
    # the first page is screened (its rows built once the warehouse says which are to be written), the others not
    assert first.rows == []
    assert first.screened is not None
    assert all(got.screened is None for got in later)
    for got, given in zip((first, *later), pages, strict=True):
        alike = extraction._prepared("sast", given.items)
        built = got.rows if got.screened is None else got.screened.rows(range(len(got.digests)))
        assert (built, got.ids, got.digests, got.rejected, got.received) == (
            alike.rows, alike.ids, alike.digests, alike.rejected, alike.received)
        assert got.digests == [content_digest(row[-1]) for row in built]  # raw is the last column
    assert [r.field for r in later[1].rejected] == ["rule_name"]
    assert all(got.lines is None for got in (first, *later))  # no COPY lines unless asked


def test_the_worker_formats_the_copy_lines_of_a_postgresql_warehouse() -> None:
    pages = [page(*(finding(i, minutes_ago=i) for i in range(start, start + 50))) for start in (1, 51)]
    pages[1].items[3] = orjson.dumps({**finding(54, minutes_ago=1), "rule_message": "a\tb\\c\nd"})
    with extraction._Preparer("sast", processes=True, copy_lines=True) as prepare:
        first = resolved(prepare(pages[0]))
        prepare.writes = True
        later = resolved(prepare(pages[1]))
        assert prepare._pool is not None
    assert first.lines is None  # prepared in the thread: most of such a page may not be written
    full = extraction._prepared("sast", pages[1].items)
    assert later.digests == full.digests
    assert later.lines == upsert.finding_copy_lines(full.rows, full.digests)
    # the rows come back without raw, their last column: the lines carry it
    assert later.rows == [row[:-1] for row in full.rows]
    raw = full.rows[3][-1]
    assert "\\" in raw
    assert later.lines[3].split("\t")[-2] == raw.replace("\\", "\\\\")


def test_a_pull_with_values_rejected_on_later_pages_reports_them_and_stores_the_rest(
        api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 301)]
    api.by_id("sast", 205)["id"] = 2**64  # on the third page: prepared in the worker
    api.by_id("sast", 150)["rule_name"] = "rule\x00name"

    result = run(api, warehouse)["issue_types"]["sast"]

    stored = rows(warehouse)
    assert set(stored) == set(range(1, 301)) - {205}
    assert (stored[150].rule_name, stored[151].rule_name) == (None, "rule.a")
    assert (result["rejected"], result["skipped"], result["unique"], result["written"]) == (2, 1, 299, 299)
    assert {r["field"] for r in result["rejected_sample"]} == {"id", "rule_name"}


def test_a_pull_that_writes_little_prepares_its_pages_in_the_thread() -> None:
    pages = [page(*(finding(i, minutes_ago=i) for i in range(start, start + 20))) for start in (1, 21, 41)]
    with extraction._Preparer("sast", processes=True) as prepare:
        prepare(pages[0])
        prepare.writes = False  # a re-sync: a page wrote less than half of its findings
        prepare(pages[1])
        assert prepare._pool is None
        prepare.writes = True
        prepare(pages[2])
        assert prepare._pool is not None


def test_a_resync_of_unchanged_findings_starts_no_worker_process(api: FakeApi, warehouse, monkeypatch) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 501)]
    started: list[str] = []
    pool = concurrent.futures.process.ProcessPoolExecutor

    def recorded(*args: Any, **kwargs: Any) -> Any:
        started.append("pool")
        return pool(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures.process, "ProcessPoolExecutor", recorded)
    first = run(api, warehouse)["issue_types"]["sast"]
    assert (first["unique"], first["written"], started) == (500, 500, ["pool"])  # a first load: one process
    again = run(api, warehouse, full_refresh=True)["issue_types"]["sast"]
    assert (again["unique"], again["written"], started) == (500, 0, ["pool"])  # unchanged: none more


_KILLED_PARENT = """
import sys, time, types, orjson
from findings_provider.pipeline import extraction
page = types.SimpleNamespace(items=[orjson.dumps({"id": 1, "status": "open"})])
prepare = extraction._Preparer("sast", processes=True)
prepare.writes = True
prepare(page)
print(*prepare._pool._processes, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line for line in status)
    except FileNotFoundError:
        return False


def test_the_worker_process_leaves_when_the_task_process_is_killed() -> None:
    """A task killed outright (SIGKILL: a timeout, the out-of-memory killer) leaves no worker behind."""
    import signal
    import subprocess
    import sys
    import time

    worker = 0
    process = subprocess.Popen([sys.executable, "-c", _KILLED_PARENT], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert process.stdout is not None
        worker = int(process.stdout.readline())
        assert _alive(worker)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if worker and _alive(worker):  # left behind: not by this test
            os.kill(worker, signal.SIGKILL)


def pages_before_the_error(pages: Any, prepare: Any) -> list[str]:
    """The pages ``_fetched_ahead`` yields before it raises the ValueError of page 2's preparation (fails if it
    does not)."""
    got: list[str] = []
    with pytest.raises(ValueError, match="page 2 cannot be prepared"):  # noqa: PT012  # the loop is the call
        for prepared in extraction._fetched_ahead(pages, prepare):
            got.append(prepared)
    return got


def test_the_next_page_is_fetched_while_the_worker_prepares_one_and_pages_come_in_order() -> None:
    """``_fetched_ahead`` with a worker's futures: page 1 is fetched before page 0's preparation ends (the fetch
    thread does not wait for the worker), the pages are yielded in page order, and a preparation's error is raised
    in its page's turn, after the pages before it."""
    fetched: list[int] = []

    def pages():
        for number in range(4):
            fetched.append(number)
            yield number

    def prepare(number: int) -> str | Future[str]:
        future: Future[str] = Future()
        if number == 0:
            def finish_once_the_next_is_fetched() -> None:
                deadline = time.monotonic() + 10
                while 1 not in fetched and time.monotonic() < deadline:
                    time.sleep(0.01)
                if 1 in fetched:
                    future.set_result("page 0")
                else:
                    future.set_exception(AssertionError("page 1 was not fetched while page 0 was prepared"))

            threading.Thread(target=finish_once_the_next_is_fetched).start()
        elif number == 2:
            future.set_exception(ValueError("page 2 cannot be prepared"))
        else:
            future.set_result(f"page {number}")
        return future

    assert pages_before_the_error(pages(), prepare) == ["page 0", "page 1"]


def test_a_preparation_left_to_the_consumer_runs_in_its_thread_while_the_next_page_is_fetched() -> None:
    """``_fetched_ahead`` with functions (the screening of a re-sync's pages): each is called in the consumer's
    thread, page 1 is fetched while page 0 is being prepared, pages come in order, and an error is raised in its
    page's turn."""
    fetched: list[int] = []
    threads: list[str] = []

    def pages():
        for number in range(4):
            fetched.append(number)
            yield number

    def prepare(number: int) -> Any:
        def later() -> str:
            threads.append(threading.current_thread().name)
            if number == 0:
                deadline = time.monotonic() + 10
                while 1 not in fetched and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert 1 in fetched, "page 1 was not fetched while page 0 was prepared"
            if number == 2:
                raise ValueError("page 2 cannot be prepared")
            return f"page {number}"

        return later

    assert pages_before_the_error(pages(), prepare) == ["page 0", "page 1"]
    assert threads == [threading.current_thread().name] * 3


def test_a_pull_screens_its_pages_unless_the_warehouse_holds_none_of_its_findings(
    api: FakeApi, warehouse, monkeypatch
) -> None:
    """A first load writes every finding it reads: its pages are prepared whole from the first (the screen would
    be work on top of the rows). A pull into a warehouse that holds the issue type's findings screens its first
    pages, and every page while it writes little (a re-sync)."""
    screened: list[str] = []
    real = extraction._screened

    def counting(issue_type: str, items: Any) -> extraction._Page:
        screened.append(issue_type)
        return real(issue_type, items)

    monkeypatch.setattr(extraction, "_screened", counting)
    monkeypatch.setattr(extraction, "_decode_processes", lambda: False)  # pages prepared whole in the thread
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 251)]
    first = run(api, warehouse)["issue_types"]["sast"]
    assert (screened, first["pages"], first["written"]) == ([], 3, 250)

    api.by_id("sast", 7)["status"] = "fixed"
    again = run(api, warehouse, full_refresh=True)["issue_types"]["sast"]
    assert (screened, again["pages"], again["written"]) == (["sast"] * 3, 3, 1)


def _prepare_in_this_daemon(queue: Any) -> None:
    items = page(*(finding(i, minutes_ago=i) for i in range(1, 51)))
    try:
        with extraction._Preparer("sast", writes=True) as prepare:
            prepared = prepare(items)
            queue.put((isinstance(prepared, Future), len(resolved(prepared).rows)))
    except Exception as error:  # reported by the test
        queue.put((type(error).__name__, str(error)))


def test_a_daemonic_process_prepares_its_pages_itself() -> None:
    """A Celery worker runs a task in a daemonic pool process, which may not have children: a pull that writes
    prepares its pages in its own thread there (the worker process would fail every pull)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    daemon = context.Process(target=_prepare_in_this_daemon, args=(queue,), daemon=True)
    daemon.start()
    try:
        assert queue.get(timeout=60) == (False, 50)
    finally:
        daemon.join(60)
    assert daemon.exitcode == 0
