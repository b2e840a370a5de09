"""Benchmark the findings emulator: data generation time and findings served per second.

Generation: the emulator runs as a subprocess; the wall time from starting it until ``/_emulator/health``
answers (interpreter start, data generation, SQLite load and indexes) is reported, next to the in-process time
of generation + load + indexes that the emulator measures itself.
Serving: a client fetches every page of 3000 code and supply-chain findings over loopback with httpx, decodes
each page with orjson and checks for duplicate ids. Two rates, each the median over ``--runs`` full pulls:
``served`` counts only the time spent in HTTP requests (what the route delivers), ``pulled`` the whole pull
including the client's decoding.

    python bench/bench_emulator.py --findings 1000000 --runs 3 --json bench-emulator.json
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from findings_emulator.testing import EmulatorProcess
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from pulled import ISSUE_TYPES


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident memory of a process in MB (Linux ``VmHWM``), or None where unavailable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def pull(client: httpx.Client, slug: str, issue_type: str, page_size: int) -> tuple[int, int, float]:
    """Fetch every page of one issue type; returns (findings, bytes, seconds in requests). Raises on a
    duplicate id."""
    seen: set[int] = set()
    received = 0
    in_requests = 0.0
    page = 0
    while True:
        started = time.perf_counter()
        response = client.get(f"/api/v1/deployments/{slug}/findings",
                              params={"issue_type": issue_type, "page": page, "page_size": page_size})
        in_requests += time.perf_counter() - started
        response.raise_for_status()
        received += len(response.content)
        body = orjson.loads(response.content)
        key = "sastFindings" if issue_type == "sast" else "scaFindings"
        items = body["findings"] if "findings" in body else body[key]["findings"]
        ids = {item["id"] for item in items}
        if len(ids) != len(items) or seen & ids:
            raise AssertionError(f"duplicate ids on page {page} of {issue_type}")
        seen |= ids
        del body, items, response
        gc.collect()
        if len(ids) < page_size:
            return len(seen), received, in_requests
        page += 1


def run(findings: int, runs: int, page_size: int, extra_args: list[str]) -> dict[str, Any]:
    """Start an emulator with ``findings`` findings, pull everything ``runs`` times, return the figures."""
    with EmulatorProcess(findings=findings, startup_timeout=1800, extra_args=extra_args) as emulator:
        load = emulator.stats()["load"]
        served, pulled = [], []
        with emulator.client(timeout=120.0) as client:
            for _ in range(runs):
                started = time.perf_counter()
                total = received = 0
                in_requests = 0.0
                for issue_type in ISSUE_TYPES:
                    count, size, seconds = pull(client, emulator.deployment_slug, issue_type, page_size)
                    total += count
                    received += size
                    in_requests += seconds
                elapsed = time.perf_counter() - started
                if total != findings:
                    raise AssertionError(f"pulled {total} findings, expected {findings}")
                served.append(total / in_requests)
                pulled.append(total / elapsed)
        rss = peak_rss_mb(emulator.pid)
    return {
        "findings": findings,
        "startup_until_healthy_s": round(emulator.startup_seconds, 2),
        "generation_in_process_s": round(load["total_s"], 2),
        "index_build_s": round(load["index_s"], 2),
        "page_size": page_size,
        "runs": runs,
        "served_findings_per_s_runs": [round(r) for r in served],
        "served_findings_per_s_median": round(statistics.median(served)),
        "pulled_findings_per_s_median": round(statistics.median(pulled)),
        "bytes_per_finding": round(received / findings),
        "emulator_peak_rss_mb": round(rss) if rss is not None else None,
    }


def main() -> None:
    """Parse arguments, run the benchmark, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--findings", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=FINDINGS_PAGE_SIZE.maximum)
    parser.add_argument("--db", help="serve from this SQLite file instead of memory")
    parser.add_argument("--json", dest="json_out", help="also write the figures to this file")
    args = parser.parse_args()
    figures = run(args.findings, args.runs, args.page_size, ["--db", args.db] if args.db else [])
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
