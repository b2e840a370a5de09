"""What marking the counted copy of each finding costs (``findings_provider.warehouse.branches.recount``).

A SQLite warehouse of N generated code findings (half of them with a copy on a second and third branch of the
same repository, 50 repositories with a primary branch), then: the first recount (every copy unmarked), a recount
with nothing new, one after ``--new`` copies were stored, and one over everything (as after a primary branch
changed). Prints one JSON object of seconds and rows changed.

    PYTHONPATH=plugins python bench/branches.py --findings 1000000 --new 1000
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from findings_provider.warehouse import Warehouse, make_engine
from findings_provider.warehouse.branches import recount
from findings_provider.warehouse.schema import findings, projects
from sqlalchemy import insert

REPOSITORIES = 50
BATCH = 10_000


def rows(first: int, count: int, now: datetime, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` findings from id ``first``: odd ids share a fingerprint in threes, even ids have their own."""
    out = []
    for i in range(first, first + count):
        fingerprint = f"fp{i // 3}" if i % 2 else f"own{i}"
        out.append({"issue_type": "sast", "id": i, "repository_name": f"acme/repo-{(i // 3) % REPOSITORIES}",
                    "ref": rng.choice(("main", "develop", "feature/x")), "match_based_id": fingerprint,
                    "relevant_since": now, "status": "open", "severity": "high", "raw": "{}", "synced_at": now})
    return out


def timed(warehouse: Warehouse, work: Callable[[Any], int]) -> dict[str, float | int]:
    started = time.perf_counter()
    with warehouse.engine.begin() as conn:
        changed = work(conn)
    return {"seconds": round(time.perf_counter() - started, 3), "changed": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    now = datetime.now(timezone.utc)
    with tempfile.TemporaryDirectory() as workdir:
        warehouse = Warehouse(make_engine(f"sqlite:///{Path(workdir) / 'warehouse.db'}"))
        warehouse.create_all()
        with warehouse.engine.begin() as conn:
            for start in range(0, args.findings, BATCH):
                conn.execute(insert(findings), rows(start, min(BATCH, args.findings - start), now, rng))
            conn.execute(insert(projects), [{"name": f"acme/repo-{i}", "primary_branch": "main", "raw": "{}",
                                             "synced_at": now} for i in range(REPOSITORIES)])
        result: dict[str, Any] = {"findings": args.findings, "first": timed(warehouse, recount),
                                  "nothing_new": timed(warehouse, recount)}
        with warehouse.engine.begin() as conn:
            conn.execute(insert(findings), rows(args.findings, args.new, now, rng))
        result[f"{args.new}_new"] = timed(warehouse, recount)
        result["everything"] = timed(warehouse, lambda conn: recount(conn, everything=True))
        warehouse.engine.dispose()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
