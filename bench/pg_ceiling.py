"""PostgreSQL upsert ceiling: the same pre-decoded finding rows written by (a) batched ``execute_values``,
(b) ``COPY`` into a temporary staging table then one ``INSERT ... SELECT ... ON CONFLICT``, (c) ``COPY``
straight into the table (``copy_direct``: no conflict handling), and (d) the same into the table without its
secondary indexes, built after the last page (``copy_indexes_after``: as the product's first load,
``warehouse.indexes``; the build is timed); (c) and (d) are first loads only (into an empty table); no HTTP, no
decoding. The fastest method of each pass is the ceiling (``best_first_load``, ``best_resync``).

Rows: the findings of the emulator, turned into the warehouse's row tuples by the product's ``finding_rows`` before
anything is timed. When ``--findings`` is larger than the emulator's data, the rows are repeated with ids shifted by
10^9 per round, so N distinct keys cost the memory of one copy of the data. Each method writes pages of 3000 rows,
one transaction per page (as the extraction does), into the product's ``findings`` table (same indexes, built after
the load by (d); the product's session settings: ``warehouse.url.apply_postgresql_settings``), first into an empty
table (first load), then the same rows again (re-sync: unchanged ``raw``, so nothing is updated, as the product's
conditional upsert; ``--passes first`` skips it). Only the database calls and the formatting of their input are
timed.

    python bench/pg_ceiling.py --base-url http://127.0.0.1:8900 --token T --slug acme --deployment-id 1 \
        --database-url postgresql://postgres@127.0.0.1:5432/findings_bench --findings 100000 --out c.json
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from common import checkpoint, emulator_arguments, peak_rss_mb, reset_database, write_json
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from pulled import ISSUE_TYPES

ID_SHIFT = 10**9


def load_rows(args: argparse.Namespace) -> list[tuple[Any, ...]]:
    """Every sast and sca finding of the emulator as ``FINDING_COLUMNS`` tuples (up to ``--sample``)."""
    from findings_provider.client import FindingsClient
    from findings_provider.warehouse import finding_rows

    rows: list[tuple[Any, ...]] = []
    with FindingsClient(args.base_url, args.token, deployment_id=args.deployment_id,
                        deployment_slug=args.slug) as client:
        for issue_type in ISSUE_TYPES:
            for page in client.raw_pages(client.list_findings, issue_type, page_size=FINDINGS_PAGE_SIZE.maximum):
                rows.extend(finding_rows(issue_type, page.items))
                if len(rows) >= args.sample:
                    return rows[: args.sample]
    return rows


def pages(base: list[tuple[Any, ...]], total: int, id_index: int) -> Iterator[list[tuple[Any, ...]]]:
    """``total`` rows in pages of 3000: ``base`` repeated, ids shifted by ``ID_SHIFT`` on each repetition."""
    for start in range(0, total, FINDINGS_PAGE_SIZE.maximum):
        page = []
        for i in range(start, min(start + FINDINGS_PAGE_SIZE.maximum, total)):
            row = base[i % len(base)]
            shift = (i // len(base)) * ID_SHIFT
            page.append(row if not shift else (*row[:id_index], row[id_index] + shift, *row[id_index + 1:]))
        yield page


def _copy_value(value: Any) -> str:
    if value is None:
        return "\\N"
    if value.__class__ is not str:
        return str(value)
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class Methods:
    """The ways of writing one page, on one psycopg2 connection."""

    def __init__(self, conn: Any, columns: tuple[str, ...]) -> None:
        self.conn = conn
        names = ", ".join(f'"{c}"' for c in columns)
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in (*columns, "synced_at") if c not in ("issue_type", "id"))
        self.on_conflict = (f'ON CONFLICT ("issue_type", "id") DO UPDATE SET {updates} '
                            "WHERE findings.raw IS DISTINCT FROM excluded.raw")
        self.names = names
        self.values_sql = f"INSERT INTO findings ({names}, synced_at) VALUES %s {self.on_conflict}"
        self.stage_sql = f"CREATE TEMPORARY TABLE stage ON COMMIT DROP AS SELECT {names} FROM findings WITH NO DATA"
        self.copy_sql = f"COPY stage ({names}) FROM STDIN"
        self.merge_sql = (f"INSERT INTO findings ({names}, synced_at) SELECT {names}, %s FROM stage "
                          f"{self.on_conflict}")
        self.copy_direct_sql = f"COPY findings ({names}, synced_at) FROM STDIN"

    def execute_values(self, rows: list[tuple[Any, ...]]) -> None:
        from psycopg2.extras import execute_values

        now = datetime.now(timezone.utc)
        with self.conn.cursor() as cur:
            execute_values(cur, self.values_sql, [(*row, now) for row in rows], page_size=len(rows))
        self.conn.commit()

    def copy(self, rows: list[tuple[Any, ...]]) -> None:
        now = datetime.now(timezone.utc)
        text = "".join(["\t".join([_copy_value(v) for v in row]) + "\n" for row in rows])
        with self.conn.cursor() as cur:
            cur.execute(self.stage_sql)
            cur.copy_expert(self.copy_sql, io.StringIO(text))
            cur.execute(self.merge_sql, (now,))
        self.conn.commit()


    def copy_direct(self, rows: list[tuple[Any, ...]]) -> None:
        """``COPY`` straight into ``findings``: a first load only (a stored key fails the page), so its re-sync
        pass is not measured."""
        now = datetime.now(timezone.utc).isoformat()
        text = "".join(["\t".join([_copy_value(v) for v in row]) + "\t" + now + "\n" for row in rows])
        with self.conn.cursor() as cur:
            cur.copy_expert(self.copy_direct_sql, io.StringIO(text))
        self.conn.commit()


    def copy_indexes_after(self, rows: list[tuple[Any, ...]]) -> None:
        """``copy_direct`` into the table without its secondary indexes: :func:`main` drops them before the first
        page and builds them after the last, that time included (as the product's first load,
        ``warehouse.indexes``; the SQLite ceiling's ``indexes_after``)."""
        self.copy_direct(rows)


#: Methods that only write new keys (no re-sync pass).
FIRST_LOAD_ONLY = ("copy_direct", "copy_indexes_after")
#: Methods whose pass runs without the table's secondary indexes, built after its last page (timed).
INDEXES_AFTER = ("copy_indexes_after",)


def drop_secondary_indexes(engine: Any) -> None:
    """Drop every secondary index of ``findings`` (the primary key stays)."""
    from findings_provider.warehouse.schema import findings
    from sqlalchemy.schema import DropIndex

    with engine.begin() as conn:
        for index in findings.indexes:
            conn.execute(DropIndex(index))


def timed_pass(write: Callable[[list[tuple[Any, ...]]], None], base: list[tuple[Any, ...]], total: int,
               id_index: int) -> float:
    """Seconds spent in ``write`` over every page (building the pages is not timed)."""
    seconds = 0.0
    for page in pages(base, total, id_index):
        started = time.perf_counter()
        write(page)
        seconds += time.perf_counter() - started
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    emulator_arguments(parser)
    parser.add_argument("--findings", type=int, required=True, help="rows written per pass")
    parser.add_argument("--sample", type=int, default=100_000, help="distinct findings pulled from the emulator")
    parser.add_argument("--methods", default="execute_values,copy,copy_direct,copy_indexes_after")
    parser.add_argument("--passes", default="first,resync", help="first (empty table) and/or resync")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import psycopg2
    from findings_provider.warehouse import FINDING_COLUMNS, Warehouse, make_engine
    from findings_provider.warehouse.indexes import build_missing
    from findings_provider.warehouse.url import apply_postgresql_settings

    base = load_rows(args)
    id_index = FINDING_COLUMNS.index("id")
    results: dict[str, Any] = {}
    for method in args.methods.split(","):
        reset_database(args.database_url)
        engine = make_engine(args.database_url)
        Warehouse(engine).create_all()  # the product's table and indexes
        if method in INDEXES_AFTER:
            drop_secondary_indexes(engine)
        checkpoint(args.database_url)
        conn = psycopg2.connect(args.database_url.replace("postgresql+psycopg2://", "postgresql://"))
        apply_postgresql_settings(conn)  # the product's session settings (lz4 compression of raw)
        try:
            write = getattr(Methods(conn, FINDING_COLUMNS), method)
            first = timed_pass(write, base, args.findings, id_index)
            if method in INDEXES_AFTER:  # as the product builds them: one transaction each
                started = time.perf_counter()
                build_missing(engine)
                first += time.perf_counter() - started
            resync = None
            if "resync" in args.passes.split(",") and method not in FIRST_LOAD_ONLY:
                checkpoint(args.database_url)
                resync = timed_pass(write, base, args.findings, id_index)
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM findings")
                row = cur.fetchone()
                assert row is not None
                stored = row[0]
        finally:
            conn.close()
            engine.dispose()
        if stored != args.findings:
            raise AssertionError(f"{method}: {stored} rows stored, expected {args.findings}")
        results[method] = {"first_load_s": first, "first_load_per_s": args.findings / first,
                           "resync_s": resync, "resync_per_s": args.findings / resync if resync else None}
    reset_database(args.database_url)
    best_first = max(results, key=lambda m: results[m]["first_load_per_s"])
    best_resync = max(results, key=lambda m: results[m]["resync_per_s"] or 0.0)
    write_json(args.out, {
        "findings": args.findings,
        "distinct_payloads": len(base),
        "methods": results,
        "best_first_load": best_first,
        "best_first_load_per_s": results[best_first]["first_load_per_s"],
        "best_resync": best_resync,
        "best_resync_per_s": results[best_resync]["resync_per_s"],
        "peak_rss_mb": peak_rss_mb(),
    })


if __name__ == "__main__":
    main()
