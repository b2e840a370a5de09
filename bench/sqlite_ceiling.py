"""SQLite ceilings of the first load: the same pages, pulled and loaded as fast as plain ``sqlite3`` + ``msgspec`` can.

Pulls every sast and sca page (3000 items) from the page server (``page_server.py``; ``http.client``, one keep-alive
connection) and inserts the findings into an empty SQLite file, one transaction per page, with the product's
SQLite settings (``warehouse.url.apply_sqlite_settings``: its page size, WAL, ``synchronous=NORMAL``, its WAL
checkpoints). As in the product, a thread fetches and decodes page k+1 while page
k is written (one page ahead). Decoding: one typed ``msgspec`` struct per finding with only the columns' keys,
``raw`` the finding's bytes sliced out of the page. No upsert (plain ``INSERT`` into an empty table), no history
trigger, no checks: the fastest way to load the same rows. Variants (``--variants``, each a full pull into a fresh
file):

- ``schema``: the product's ``findings`` table and its indexes, created from ``schema.metadata``'s DDL (composite
  primary key ``(issue_type, id)``, so a rowid table plus the key's index, and ten secondary indexes); every
  column filled with the product's values (``--check`` compares them with a warehouse the product loaded);
- ``indexes_after``: the same table with its primary key, the secondary indexes created after the last page
  (that time included), built as the product's first load builds them (``warehouse.indexes.build_missing``:
  each in a transaction of its own);
- ``counted``: ``indexes_after`` plus the product's ``counted`` rule, as its first load applies it: the indexes
  of ``warehouse.indexes.LOAD_INDEXES`` kept during the load, the projects table for the primary branch, and each
  row inserted with its mark (``branches.counted_on_insert``, the product's SQL): what the rule costs the ceiling;
- ``no_secondary``: the same table and key, no secondary index at all (what the secondary indexes cost);
- ``unkeyed``: the same columns, no key and no index (rows appended): with ``no_secondary``, what the composite
  key's index costs;
- ``integer_key``: the same columns and secondary indexes, keyed by ``id INTEGER PRIMARY KEY`` (the rowid; the
  emulator's sast and sca ids are disjoint) instead of the composite key (what the composite key costs);
- ``without_rowid``: the product's table declared ``WITHOUT ROWID`` (the same key, one B-tree fewer);
- ``minimal``: ``(id INTEGER PRIMARY KEY, raw TEXT)``;
- ``minimal_unkeyed``: ``(id INTEGER, raw TEXT)``, no key: rows appended in arrival order (the floor).

An integer primary key is the rowid: the table's B-tree is ordered by it. The API serves findings newest
``relevant_since`` first, so ids arrive in random order and every 2.3 KB row lands on a random page of the table;
the product's rowid table (its composite key is a separate, narrow index) appends instead.

    python bench/sqlite_ceiling.py --base-url http://127.0.0.1:8901 --token T --slug acme \
        --database-path /tmp/ceiling.db --out c.json
"""

from __future__ import annotations

import argparse
import http.client
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import msgspec
from common import peak_rss_mb, reset_sqlite, write_json
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.warehouse.url import apply_sqlite_settings
from pulled import ISSUE_TYPES

VARIANTS = ("schema", "indexes_after", "counted", "no_secondary", "unkeyed", "integer_key", "without_rowid", "minimal",
            "minimal_unkeyed")


# --- decoding ------------------------------------------------------------------------------------------------------


class _Items(msgspec.Struct):
    findings: list[msgspec.Raw] = []


class _Page(msgspec.Struct):
    sastFindings: _Items = msgspec.field(default_factory=_Items)
    scaFindings: _Items = msgspec.field(default_factory=_Items)


class _Named(msgspec.Struct):
    name: str | None = None


class _Location(msgspec.Struct):
    filePath: str | None = None


class _Ticket(msgspec.Struct):
    id: int | None = None


class _Verdict(msgspec.Struct):
    verdict: str | None = None


class _Assistant(msgspec.Struct):
    autotriage: _Verdict | None = None


class _Usage(msgspec.Struct):
    location: _Location | None = None
    external_ticket: _Ticket | None = None


class _Finding(msgspec.Struct):
    """The keys of the product's columns in the reference dialect (what the emulator serves)."""

    id: int
    repository: _Named | None = None
    ref: str | None = None
    rule_name: str | None = None
    rule: _Named | None = None
    severity: str | None = None
    confidence: str | None = None
    status: str | None = None
    triage_state: str | None = None
    triage_reason: str | None = None
    assistant: _Assistant | None = None
    reachability: str | None = None
    match_based_id: str | None = None
    relevant_since: str | None = None
    created_at: str | None = None
    external_ticket: _Ticket | None = None
    usage: _Usage | None = None
    first_seen_scan_id: int | None = None
    validation_state: str | None = None
    location: _Location | None = None
    triaged_at: str | None = None
    state_updated_at: str | None = None


class _Id(msgspec.Struct):
    id: int


def _utc(text: str | None) -> str | None:
    """The warehouse's canonical UTC text (``YYYY-MM-DD HH:MM:SS.ffffff+00:00``), by slicing the shapes served."""
    if text is None:
        return None
    size = len(text)
    if size == 27 and text[-1] == "Z":
        return f"{text[:10]} {text[11:26]}+00:00"
    if size == 24 and text[-1] == "Z":
        return f"{text[:10]} {text[11:23]}000+00:00"
    if size == 32:
        return text
    return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat(" ", "microseconds")


def schema_rows(issue_type: str, items: list[msgspec.Raw], now: str) -> list[tuple[Any, ...]]:
    """Rows of the product's ``FINDING_COLUMNS`` plus ``synced_at``."""
    decode = _decode_finding
    rows = []
    for item in items:
        f = decode(item)
        repository, assistant, ticket, location = f.repository, f.assistant, f.external_ticket, f.location
        usage = f.usage
        if ticket is None and usage is not None:
            ticket = usage.external_ticket
        if location is None and usage is not None:
            location = usage.location
        rows.append((
            issue_type, f.id, repository.name if repository is not None else None, f.ref,
            f.rule_name if f.rule_name is not None else (f.rule.name if f.rule is not None else None),
            f.severity, f.confidence, f.status, f.triage_state, f.triage_reason,
            assistant.autotriage.verdict if assistant is not None and assistant.autotriage is not None else None,
            f.reachability, f.match_based_id, _utc(f.relevant_since or f.created_at),
            ticket.id if ticket is not None else None, f.first_seen_scan_id, f.validation_state,
            location.filePath if location is not None else None, _utc(f.triaged_at), _utc(f.state_updated_at),
            str(item, "utf-8"), now,
        ))
    return rows


def minimal_rows(issue_type: str, items: list[msgspec.Raw], now: str) -> list[tuple[Any, ...]]:
    """Rows ``(id, raw)``."""
    decode = _decode_id
    return [(decode(item).id, str(item, "utf-8")) for item in items]


_decode_finding = msgspec.json.Decoder(_Finding).decode
_decode_id = msgspec.json.Decoder(_Id).decode
_decode_page = msgspec.json.Decoder(_Page).decode


# --- pulling ------------------------------------------------------------------------------------------------------


def pages(base_url: str, token: str, slug: str) -> Iterator[tuple[str, list[msgspec.Raw]]]:
    """Every page of sast then sca findings over one keep-alive connection: (issue type, raw items)."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=600)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        for issue_type in ISSUE_TYPES:
            page = 0
            while True:
                conn.request("GET", f"/api/v1/deployments/{slug}/findings?issue_type={issue_type}&page={page}"
                             f"&page_size={FINDINGS_PAGE_SIZE.maximum}", headers=headers)
                response = conn.getresponse()
                body = response.read()
                if response.status != 200:
                    raise RuntimeError(f"page {page} of {issue_type}: HTTP {response.status}: {body[:200]!r}")
                decoded = _decode_page(body)
                items = (decoded.sastFindings if issue_type == "sast" else decoded.scaFindings).findings
                yield issue_type, items
                if len(items) < FINDINGS_PAGE_SIZE.maximum:
                    break
                page += 1
    finally:
        conn.close()


def ahead(source: Iterator[Any], build: Callable[[Any], Any]) -> Iterator[Any]:
    """``build(x)`` for each x of ``source``, computed in a thread one item ahead of the consumer."""
    handoff: queue.Queue[Any] = queue.Queue(maxsize=1)
    done = object()

    def work() -> None:
        try:
            for x in source:
                handoff.put(build(x))
            handoff.put(done)
        except BaseException as error:  # handed to the consumer
            handoff.put(error)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    while True:
        value = handoff.get()
        if value is done:
            break
        if isinstance(value, BaseException):
            raise value
        yield value
    thread.join()


# --- the tables -------------------------------------------------------------------------------------------------


def _ddl(element: Any) -> str:
    """The SQLite DDL of a ``CreateTable`` or ``CreateIndex`` of the product's metadata."""
    from sqlalchemy.dialects import sqlite

    return str(element.compile(dialect=sqlite.dialect())).strip()


def product_ddl() -> tuple[str, list[str]]:
    """``CREATE TABLE findings`` and its ``CREATE INDEX`` statements, compiled from the product's metadata."""
    from findings_provider.warehouse.schema import findings
    from sqlalchemy.schema import CreateIndex, CreateTable

    indexes = sorted(findings.indexes, key=lambda i: i.name or "")
    return _ddl(CreateTable(findings)), [_ddl(CreateIndex(index)) for index in indexes]


def counted_setup(table: str, insert_columns: list[str]) -> tuple[list[str], str, list[str]]:
    """The ``counted`` variant's statements before the load (the table, the projects table, the indexes a first
    load keeps), its insert (the product's: each row with its mark) and the indexes built after the load (the
    product's deferred ones)."""
    from findings_provider.warehouse.branches import marked_insert
    from findings_provider.warehouse.indexes import LOAD_INDEXES, deferrable_indexes
    from findings_provider.warehouse.schema import findings, projects
    from sqlalchemy.schema import CreateIndex, CreateTable

    kept = [_ddl(CreateIndex(index)) for index in findings.indexes if index.name in LOAD_INDEXES]
    return ([table, _ddl(CreateTable(projects)), *kept], marked_insert("findings", insert_columns),
            [_ddl(CreateIndex(index)) for index in deferrable_indexes()])


def setup(variant: str) -> tuple[list[str], str, list[str], Callable[..., list[tuple[Any, ...]]]]:
    """(statements before the load, the insert, statements after the load, the row builder) of ``variant``."""
    from findings_provider.warehouse import FINDING_COLUMNS

    table, indexes = product_ddl()
    columns = [*FINDING_COLUMNS, "synced_at"]
    insert = f"INSERT INTO findings ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    if variant == "schema":
        return [table, *indexes], insert, [], schema_rows
    if variant == "indexes_after":
        return [table], insert, indexes, schema_rows
    if variant == "counted":
        before, marked, after = counted_setup(table, columns)
        return before, marked, after, schema_rows
    if variant == "no_secondary":
        return [table], insert, [], schema_rows
    if variant == "unkeyed":
        unkeyed = table.replace(", \n\tCONSTRAINT pk_findings PRIMARY KEY (issue_type, id)", "")
        if unkeyed == table:
            raise RuntimeError(f"the product's DDL changed shape; cannot derive the table without key:\n{table}")
        return [unkeyed], insert, [], schema_rows
    if variant == "without_rowid":
        return [table + " WITHOUT ROWID", *indexes], insert, [], schema_rows
    if variant == "integer_key":
        keyed = table.replace("id BIGINT NOT NULL", "id INTEGER NOT NULL PRIMARY KEY")
        keyed = keyed.replace(", \n\tCONSTRAINT pk_findings PRIMARY KEY (issue_type, id)", "")
        if keyed == table or "pk_findings" in keyed:
            raise RuntimeError(f"the product's DDL changed shape; cannot derive the integer-key table:\n{table}")
        return [keyed, *indexes], insert, [], schema_rows
    if variant == "minimal":
        return (["CREATE TABLE findings (id INTEGER PRIMARY KEY, raw TEXT)"],
                "INSERT INTO findings (id, raw) VALUES (?, ?)", [], minimal_rows)
    if variant == "minimal_unkeyed":
        return (["CREATE TABLE findings (id INTEGER, raw TEXT)"],
                "INSERT INTO findings (id, raw) VALUES (?, ?)", [], minimal_rows)
    raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")


def load(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    """One full pull into a fresh database file; time, CPU, rows."""
    import sqlite3

    before, insert, after, build = setup(variant)
    reset_sqlite(args.database_path)
    conn = sqlite3.connect(args.database_path, isolation_level=None)
    apply_sqlite_settings(conn)  # the product's settings: page size, WAL, synchronous, checkpoints
    for statement in before:
        conn.execute(statement)
    now = datetime.now(timezone.utc).isoformat(" ", "microseconds")
    execute, executemany = conn.execute, conn.executemany
    total = 0
    requests = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for rows in ahead(pages(args.base_url, args.token, args.slug), lambda page: build(page[0], page[1], now)):
        requests += 1
        if rows:
            execute("BEGIN")
            executemany(insert, rows)
            execute("COMMIT")
            total += len(rows)
    index_s = 0.0
    if after:  # as the product builds them (warehouse.indexes.build_missing): one transaction each
        index_started = time.perf_counter()
        for statement in after:
            execute("BEGIN")
            execute(statement)
            execute("COMMIT")
        index_s = time.perf_counter() - index_started
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    stored = conn.execute("SELECT count(*) FROM findings").fetchone()[0]
    conn.close()
    if stored != total:
        raise AssertionError(f"{variant}: {stored} rows stored, {total} pulled")
    size_mb = sum(os.path.getsize(f"{args.database_path}{s}") for s in ("", "-wal")
                  if os.path.exists(f"{args.database_path}{s}")) / 1e6
    return {"findings": total, "requests": requests, "seconds": seconds, "cpu_seconds": cpu_seconds,
            "findings_per_s": total / seconds, "index_build_s": index_s, "database_mb": size_mb}


def check_against(product_db: str, ceiling_db: str) -> dict[str, Any]:
    """Whether the ``schema`` variant's rows equal the product's (every column but ``synced_at``)."""
    import sqlite3

    from findings_provider.warehouse import FINDING_COLUMNS

    names = ", ".join(FINDING_COLUMNS)
    conn = sqlite3.connect(ceiling_db)
    conn.execute(f"ATTACH DATABASE '{product_db}' AS product")
    only_ceiling = conn.execute(f"SELECT count(*) FROM (SELECT {names} FROM main.findings EXCEPT "
                                f"SELECT {names} FROM product.findings)").fetchone()[0]
    only_product = conn.execute(f"SELECT count(*) FROM (SELECT {names} FROM product.findings EXCEPT "
                                f"SELECT {names} FROM main.findings)").fetchone()[0]
    conn.close()
    return {"rows_only_in_ceiling": only_ceiling, "rows_only_in_product": only_product,
            "equal": only_ceiling == only_product == 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True, help="the page server")
    parser.add_argument("--token", required=True)
    parser.add_argument("--slug", required=True)
    parser.add_argument("--database-path", required=True, help="SQLite file (recreated for each variant)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--check", metavar="PRODUCT_DB",
                        help="after the schema variant, compare its rows with this warehouse loaded by the product")
    parser.add_argument("--keep", action="store_true", help="leave the last variant's database file")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    results: dict[str, Any] = {}
    check = None
    for variant in args.variants.split(","):
        results[variant] = load(variant, args)
        if variant == "schema" and args.check:
            check = check_against(args.check, args.database_path)
            if not check["equal"]:
                raise AssertionError(f"the ceiling's rows differ from the product's: {check}")
    if not args.keep:
        reset_sqlite(args.database_path)
    write_json(args.out, {"variants": results, "check": check, "peak_rss_mb": peak_rss_mb()})


if __name__ == "__main__":
    main()
