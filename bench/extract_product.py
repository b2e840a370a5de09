"""One extraction through the product's own operator, in this process only: time, requests, peak RSS.

Runs ``ExtractFindingsOperator(...).execute(context)`` — the operator's code path: the hooks build the real
``FindingsClient`` and ``Warehouse`` from ``AIRFLOW_CONN_*`` environment variables, then
``pipeline.extraction.run_extraction`` pulls each issue type with ``full_refresh`` (every finding). Requests are
counted from the emulator's request log. ``--mode first`` empties the warehouse first (untimed); ``--mode
resync`` pulls again into the loaded warehouse (unchanged rows).

    python bench/extract_product.py --base-url http://127.0.0.1:8900 --token T --slug acme --deployment-id 1 \
        --database-url sqlite:////tmp/wh.db --mode first --out result.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from collections import Counter
from typing import Any

from common import (
    checkpoint,
    children_cpu_seconds,
    children_peak_rss_mb,
    current_rss_mb,
    emulator_arguments,
    peak_rss_mb,
    reset_database,
    scratch_airflow_home,
    write_json,
)


class _TaskInstance:
    """The little of a task instance that the operator uses: ``xcom_push``."""

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def emulator_requests(admin: Any) -> list[dict[str, Any]]:
    """The API requests in the emulator's log."""
    response = admin.get("/_emulator/requests")
    response.raise_for_status()
    return list(response.json()["requests"])


def count_requests(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests by operation, and findings-list requests by issue type."""
    by_type: Counter[str] = Counter()
    for entry in entries:
        if entry.get("operation") == "findings":
            by_type[(entry.get("query") or {}).get("issue_type", ["sast"])[0]] += 1
    return {"total": len(entries), "by_operation": dict(Counter(e.get("operation") for e in entries)),
            "findings_by_issue_type": dict(by_type)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    emulator_arguments(parser)
    parser.add_argument("--mode", choices=["first", "resync"], default="first")
    parser.add_argument("--issue-types", default="sast,sca")
    parser.add_argument("--page-size", type=int, help="default: the API's maximum (client/limits.py)")
    parser.add_argument("--profile", help="profile the timed section into this file")
    parser.add_argument("--profiler", choices=["pyinstrument", "cprofile"], default="cprofile",
                        help="pyinstrument (sampling, low overhead; writes text) or cProfile (writes pstats)")
    parser.add_argument("--defer-indexes-on", metavar="DIALECTS",
                        help="comma-separated dialects whose first load builds the secondary indexes after the "
                             "pulls (default: the product's, warehouse.indexes.DEFERRED_ON; empty: none)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    if args.mode == "first":
        reset_database(args.database_url)
    checkpoint(args.database_url)
    # Connections exactly as a deployment would give them to Airflow (see shared interfaces).
    os.environ["AIRFLOW_CONN_FINDINGS_API_DEFAULT"] = json.dumps({
        "conn_type": "findings_api", "host": args.base_url, "password": args.token,
        "extra": {"deployment_slug": args.slug, "deployment_id": args.deployment_id},
    })
    os.environ["AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT"] = args.database_url
    scratch_airflow_home()

    started = time.perf_counter()
    import httpx
    from findings_provider.operators.findings import ExtractFindingsOperator

    import_s = time.perf_counter() - started
    from findings_provider.client.limits import FINDINGS_PAGE_SIZE  # loaded with the operator: not timed
    from findings_provider.warehouse import indexes

    if args.defer_indexes_on is not None:
        indexes.DEFERRED_ON = frozenset(filter(None, args.defer_indexes_on.split(",")))


    gc.collect()
    rss_after_import = current_rss_mb()

    admin = httpx.Client(base_url=args.base_url, timeout=60.0)
    admin.delete("/_emulator/requests").raise_for_status()
    operator = ExtractFindingsOperator(
        task_id="extract_findings", issue_types=args.issue_types.split(","), full_refresh=True,
        page_size=args.page_size or FINDINGS_PAGE_SIZE.maximum,
    )
    ti = _TaskInstance()
    profiler: Any = None
    if args.profile and args.profiler == "pyinstrument":
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
        profiler.start()
    elif args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    cpu_started, children_cpu_started = time.process_time(), children_cpu_seconds()
    result = operator.execute({"ti": ti})
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    worker_cpu_seconds = children_cpu_seconds() - children_cpu_started
    if args.profile and args.profiler == "pyinstrument":
        profiler.stop()
        with open(args.profile, "w") as handle:
            handle.write(profiler.output_text(unicode=False, color=False, show_all=False))
    elif args.profile:
        profiler.disable()
        profiler.dump_stats(args.profile)
    peak = peak_rss_mb()

    requests = count_requests(emulator_requests(admin))
    admin.close()
    per_type = {
        issue_type: {key: summary[key] for key in ("requests", "pages", "received", "unique", "written",
                                                   "duplicates", "not_seen")}
        for issue_type, summary in result["issue_types"].items()
    }
    stored = operator.warehouse_hook.get_warehouse().count_findings()
    write_json(args.out, {
        "mode": args.mode,
        "database": args.database_url.split(":", 1)[0],
        "findings": result["findings"],
        "written": result["written"],
        "stored_rows": stored,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "findings_per_s": result["findings"] / seconds,
        "requests": requests,
        "client_requests": result["requests"],
        "per_issue_type": per_type,
        "peak_rss_mb": peak,
        # the worker process that prepares pages (pipeline.extraction._Preparer), when one ran
        "worker_peak_rss_mb": children_peak_rss_mb(),
        "worker_cpu_seconds": worker_cpu_seconds,
        "rss_after_import_mb": rss_after_import,
        "import_s": import_s,
        "xcom_written": ti.xcom.get("written"),
    })


if __name__ == "__main__":
    main()
