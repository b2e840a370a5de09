"""Measure the warehouse's findings upsert: SQLite first load and re-sync, PostgreSQL COPY vs execute_values.

Not a test (pytest does not collect it). Synthetic, realistic sast findings of about 2.2 KB each are generated
page by page outside the timed sections; what is timed is what a pull does per page: decode the raw items into
rows (``finding_rows``) and upsert them (one transaction per page).

    PYTHONPATH=plugins .venv/bin/python tests/warehouse/measure_upsert.py --findings 200000
    PYTHONPATH=plugins .venv/bin/python tests/warehouse/measure_upsert.py --findings 200000 \
        --postgres postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import orjson
import psycopg2.extras
from findings_provider.warehouse import FINDING_COLUMNS, Warehouse, finding_rows, make_engine
from findings_provider.warehouse.rows import Row
from findings_provider.warehouse.schema import metadata
from findings_provider.warehouse.timestamps import utc_now_text
from findings_provider.warehouse.versioning import VERSION_TABLE
from sqlalchemy.engine import Engine

Upsert = Callable[[list[Row]], int]


def synthetic_finding(i: int, rnd: random.Random) -> dict[str, Any]:
    """A sast finding shaped like the reference's (2.11, 2.12), about 2.2 KB as JSON."""
    repo = f"acme/service-{i % 300}"
    rule = f"python.lang.security.audit.rule-{i % 150}"
    return {
        "id": i,
        "categories": ["security"],
        "confidence": rnd.choice(["low", "medium", "high"]),
        "severity": rnd.choice(["low", "medium", "high", "critical"]),
        "created_at": "2024-05-01T10:00:00.123Z",
        "relevant_since": f"2024-05-{1 + i % 28:02d} 23:28:12.{i % 1_000_000:06d}+00:00",
        "first_seen_scan_id": 1000 + i % 500,
        "match_based_id": f"{i:032x}",
        "syntactic_id": f"{i * 7:032x}",
        "ref": "refs/heads/main",
        "repository": {"name": repo, "url": f"https://git.example.com/{repo}"},
        "location": {"filePath": f"src/pkg/module_{i % 97}.py", "line": i % 500, "column": 4, "endLine": 9},
        "line_of_code_url": f"https://git.example.com/{repo}/blob/main/src/pkg/module_{i % 97}.py#L{i % 500}",
        "external_ticket": None if i % 7 else {"id": 5000 + i, "externalSlug": f"SEC-{i}", "url": "https://t/x"},
        "review_comments": [],
        "rule": {
            "category": "security",
            "confidence": "HIGH",
            "cweNames": ["CWE-89: Improper Neutralization of Special Elements used in an SQL Command"],
            "message": "Detected string concatenation in a SQL query; use parameterized queries instead.",
            "name": rule,
            "owaspNames": ["A03:2021 - Injection"],
            "subcategories": ["vuln"],
            "vulnerabilityClasses": ["SQL Injection"],
        },
        "rule_name": rule,
        "rule_message": "Detected string concatenation in a SQL query.",
        "state": "unresolved",
        "state_updated_at": "2024-05-02T10:00:00.000Z",
        "status": rnd.choice(["open", "open", "open", "fixed", "ignored"]),
        "triage_state": "untriaged",
        "triage_reason": "",
        "triage_comment": "",
        "triaged_at": None,
        "sourcing_policy": {"id": 1, "name": "Default Policy", "slug": "default-policy"},
        "click_to_fix_prs": [],
        "click_to_fix_failures": [],
        "assistant": {
            "autofix": {
                "explanation": "Use a parameterized query so the driver escapes values. " * 3,
                "fix_code": "cursor.execute('SELECT * FROM t WHERE id = %s', (user_id,))",
            },
            "autotriage": {
                "reason": "The input flows from a request parameter into the query unsanitised. " * 2,
                "verdict": rnd.choice(["true_positive", "false_positive"]),
            },
            "component": {"risk": "high", "tag": "user data"},
            "guidance": {
                "instructions": "Replace the concatenation with bound parameters.\n1. ...",
                "summary": "x",
            },
            "rule_explanation": {
                "explanation": 'SQL injection runs "arbitrary" SQL \\ text.',
                "summary": "SQLi",
            },
        },
    }


def pages(total: int, page_size: int) -> Iterator[list[msgspec.Raw]]:
    """Yield pages of raw finding items, as a client slices them out of a page body."""
    rnd = random.Random(42)
    for start in range(0, total, page_size):
        stop = min(start + page_size, total)
        yield [msgspec.Raw(orjson.dumps(synthetic_finding(i, rnd))) for i in range(start, stop)]


def run(label: str, total: int, page_size: int, upsert: Upsert) -> None:
    """Decode and upsert every page; print rows/s for the whole and for the write alone."""
    decode_s = write_s = 0.0
    written = 0
    for items in pages(total, page_size):
        started = time.perf_counter()
        rows = finding_rows("sast", items)
        decoded = time.perf_counter()
        written += upsert(rows)
        write_s += time.perf_counter() - decoded
        decode_s += decoded - started
    print(
        f"{label:44s} {total / (decode_s + write_s):>9,.0f} rows/s "
        f"(write only {total / write_s:>9,.0f} rows/s, decode {decode_s:5.1f} s, write {write_s:5.1f} s, "
        f"rows written {written})",
        flush=True,
    )


def execute_values_upsert(engine: Engine, page_size: int) -> Upsert:
    """The alternative to COPY on PostgreSQL: psycopg2 ``execute_values`` batches of the same upsert."""
    columns = (*FINDING_COLUMNS, "synced_at")
    names = ", ".join(f'"{c}"' for c in columns)
    updates = ", ".join(f'"{c}" = excluded."{c}"' for c in columns if c not in ("issue_type", "id"))
    sql = (
        f"INSERT INTO findings ({names}) VALUES %s "
        f"ON CONFLICT (issue_type, id) DO UPDATE SET {updates} "
        "WHERE findings.raw IS DISTINCT FROM excluded.raw RETURNING 1"
    )

    def upsert(rows: list[Row]) -> int:
        unique = list({(row[0], row[1]): row for row in rows}.values())
        now = utc_now_text()
        with engine.begin() as conn, closing(conn.connection.cursor()) as cursor:
            values = [(*row, now) for row in unique]
            return len(psycopg2.extras.execute_values(cursor, sql, values, page_size=page_size, fetch=True))

    return upsert


def measure_sqlite(total: int, page_size: int) -> None:
    """First load and re-sync into a fresh SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'warehouse.db'}")
        warehouse = Warehouse(engine)
        warehouse.create_all()
        run("sqlite first load", total, page_size, warehouse.upsert_findings)
        run("sqlite re-sync (unchanged)", total, page_size, warehouse.upsert_findings)
        engine.dispose()


def measure_postgres(url: str, total: int, page_size: int) -> None:
    """COPY (the Warehouse's path) vs execute_values: first load, then re-sync, in a scratch schema."""
    schema = f"measure_{uuid.uuid4().hex[:10]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine = make_engine(f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}")
    try:
        warehouse = Warehouse(engine)
        for label, upsert in (
            ("postgresql COPY", warehouse.upsert_findings),
            ("postgresql execute_values(1000)", execute_values_upsert(engine, 1000)),
        ):
            metadata.drop_all(engine)
            with engine.begin() as conn:  # and the version, so that create_all starts from nothing
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {VERSION_TABLE}")
            warehouse.create_all()
            run(f"{label} first load", total, page_size, upsert)
            run(f"{label} re-sync (unchanged)", total, page_size, upsert)
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def main() -> None:
    """Parse the arguments and run the measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", type=int, default=200_000)
    parser.add_argument("--page-size", type=int, default=3000)
    parser.add_argument("--postgres", help="PostgreSQL URL; a scratch schema is created in it and dropped")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    sample = next(pages(args.page_size, args.page_size))
    size = sum(map(len, sample)) / len(sample)
    print(f"{args.findings} findings, pages of {args.page_size}, {size:,.0f} B each")
    if not args.skip_sqlite:
        measure_sqlite(args.findings, args.page_size)
    if args.postgres:
        measure_postgres(args.postgres, args.findings, args.page_size)


if __name__ == "__main__":
    main()
