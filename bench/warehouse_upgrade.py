"""What the versioned warehouse costs: ``Warehouse.create_all`` on an empty database, on a current one (the fast
path), and on a warehouse made before versioning that holds findings (brought to 0001, a column filled from raw).

    python bench/warehouse_upgrade.py [--runs 5] [--fast-calls 200] [--findings 20000] [--pg-admin-url URL]

SQLite in a temporary file; PostgreSQL in a scratch database made through ``--pg-admin-url`` (default: the server
``devtools.services.configured_postgres`` names; skipped when unreachable). Prints one line per figure (medians).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import orjson
from findings_provider.warehouse import Warehouse, make_engine
from sqlalchemy.engine import Engine

if __package__ in (None, ""):  # python bench/warehouse_upgrade.py: the repository's root, for devtools
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from devtools.services import Postgres, configured_postgres
from devtools.warehouse import drop_every_table, make_pre_versioning_warehouse


def timed(work: Callable[[], object]) -> float:
    """Seconds ``work()`` takes."""
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def unversioned(engine: Engine, findings: int) -> None:
    """A warehouse made before versioning: the tables of revision 0001 without ``findings.path``, ``findings``
    sast findings stored, no version table."""
    items = [msgspec.Raw(orjson.dumps({"id": i, "location": {"filePath": f"src/f{i}.py"}, "status": "open"}))
             for i in range(1, findings + 1)]
    make_pre_versioning_warehouse(engine, {"sast": items}, without_columns=("findings.path",))


def measure(name: str, engine: Engine, runs: int, fast_calls: int, findings: int) -> None:
    """Print the figures of one database."""
    drop_every_table(engine)
    print(f"{name}: first create_all in this process (imports Alembic's scripts): "
          f"{timed(Warehouse(engine).create_all) * 1000:.1f} ms")
    firsts = []
    for _ in range(runs):
        drop_every_table(engine)
        firsts.append(timed(Warehouse(engine).create_all))
    print(f"{name}: create_all on an empty database (upgrade to head): {statistics.median(firsts) * 1000:.1f} ms")
    fast = [timed(Warehouse(engine).create_all) for _ in range(fast_calls)]
    print(f"{name}: create_all on a current warehouse (fast path): {statistics.median(fast) * 1000:.2f} ms "
          f"(median of {fast_calls}; max {max(fast) * 1000:.2f} ms)")
    legacy = []
    for _ in range(runs):
        drop_every_table(engine)
        unversioned(engine, findings)
        legacy.append(timed(Warehouse(engine).create_all))
    print(f"{name}: create_all on a pre-versioning warehouse of {findings} findings (path added and filled from "
          f"raw, stamped): {statistics.median(legacy):.2f} s")
    drop_every_table(engine)


@contextmanager
def postgres_database(admin_url: str) -> Iterator[Engine | None]:
    """An engine on a scratch database, dropped afterwards; None when PostgreSQL is unreachable."""
    server, _ = Postgres.parse(admin_url)
    try:
        database = server.create_database("bench_upgrade")
    except Exception as error:
        print(f"postgresql: skipped ({str(error).strip()})")
        yield None
        return
    engine = make_engine(server.url(database))
    try:
        yield engine
    finally:
        engine.dispose()
        server.drop_database(database)


def main() -> None:
    """Measure on SQLite, then on PostgreSQL when reachable."""
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fast-calls", type=int, default=200)
    parser.add_argument("--findings", type=int, default=20000)
    parser.add_argument("--pg-admin-url", default=configured_postgres().url("postgres"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'warehouse.db'}")
        measure("sqlite", engine, args.runs, args.fast_calls, args.findings)
        engine.dispose()
    with postgres_database(args.pg_admin_url) as pg:
        if pg is not None:
            measure("postgresql", pg, args.runs, args.fast_calls, args.findings)


if __name__ == "__main__":
    main()
