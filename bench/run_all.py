"""Run every benchmark against the emulator and write ``results.md`` and ``results.json``.

    python bench/run_all.py                      # what `make bench` runs: N = 100,000 and 1,000,000
    python bench/run_all.py --quick --out-dir /tmp/b   # tiny N, one run (the smoke test)

Each product measurement runs in a child process of its own (its peak RSS is the extracting process's); the
emulator runs as its own subprocess, started once per N and shared by every run of that N. Per N: the emulator's
serving rate (``bench_emulator.pull``), then for each run the naive baseline, the product's first load and its
re-sync into SQLite (interleaved, so that every ratio compares runs made side by side), then the PostgreSQL
ceiling (``pg_ceiling.py``) and the product into PostgreSQL, then (at the smallest N) the bulk actions, and a
profiled run of the product. DAG parse times come first. See ``bench/README.md``.

This module runs the measurements (and the command line); ``verdicts.py`` turns the results into verdicts
against the targets, ``report.py`` writes ``results.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dashboard
import dialects
from common import (
    BENCH_DIR,
    PROJECT_DIR,
    child_env,
    expected_requests,
    machine_facts,
    median,
    minimal_requests,
    run_child,
)
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from pulled import ISSUE_TYPES
from report import write_markdown
from verdicts import ADJACENT_VARIANTS, LARGE, TARGETS, verdicts

# importable: common put the repository's root on sys.path
from devtools.services import Postgres, configured_postgres

TOKEN = "bench-token"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- PostgreSQL database of the run ---------------------------------------------------------------------------


def create_pg_database(admin_url: str) -> str | None:
    """Create a dedicated, empty database; return its URL, or None (with a reason logged) when unreachable."""
    server, _ = Postgres.parse(admin_url)
    try:
        return server.url(server.create_database("findings_bench"))
    except Exception as exc:
        log(f"PostgreSQL unreachable at {server.host}:{server.port} ({exc}); PostgreSQL benchmarks skipped")
        return None


def drop_pg_database(url: str) -> None:
    """Drop the database of ``url`` (its sessions ended first)."""
    server, database = Postgres.parse(url)
    server.drop_database(database)


# --- measurements ---------------------------------------------------------------------------------------------


class Runner:
    """Runs the children of one invocation in a private work directory."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.log_path = workdir / "children.log"
        self.env = child_env({"AIRFLOW_HOME": str(workdir / "airflow-home")})
        self.counter = 0

    def child(self, script: str, *args: str) -> dict[str, Any]:
        self.counter += 1
        out = self.workdir / f"child-{self.counter}.json"
        return run_child(script, list(args), out, self.log_path, env=self.env)


def emulator_args(emulator: Any) -> list[str]:
    return ["--base-url", emulator.base_url, "--token", emulator.token, "--slug", emulator.deployment_slug,
            "--deployment-id", emulator.deployment_id]


def measure_dag_parse(runner: Runner, runs: int) -> dict[str, Any]:
    """Parse time of every DAG file, each run in a fresh interpreter; the median per file."""
    files = sorted((PROJECT_DIR / "dags").glob("*.py"))
    out: dict[str, Any] = {}
    for path in files:
        if path.name.startswith("_"):
            continue
        samples = [runner.child("dag_parse.py", "--file", str(path)) for _ in range(runs)]
        out[path.name] = {
            "parse_s_median": median(s["parse_s"] for s in samples),
            "parse_s_runs": [s["parse_s"] for s in samples],
            "dag_ids": samples[0]["dag_ids"],
            "import_errors": samples[0]["import_errors"],
        }
        log(f"parse {path.name}: {out[path.name]['parse_s_median']:.3f} s (median of {runs})")
    return out


def measure_serving(emulator: Any, runs: int) -> dict[str, Any]:
    """Findings served per second on 3000-item pages, by the emulator author's ``bench_emulator.pull``."""
    import bench_emulator

    served, pulled = [], []
    with emulator.client(timeout=300.0) as client:
        for _ in range(runs):
            started = time.perf_counter()
            total = 0
            in_requests = 0.0
            for issue_type in ISSUE_TYPES:
                count, _size, seconds = bench_emulator.pull(client, emulator.deployment_slug, issue_type,
                                                            FINDINGS_PAGE_SIZE.maximum)
                total += count
                in_requests += seconds
            served.append(total / in_requests)
            pulled.append(total / (time.perf_counter() - started))
    return {"served_per_s_median": median(served), "served_per_s_runs": served,
            "pulled_per_s_median": median(pulled), "runs": runs}


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of a list of child results (rate, seconds, peak RSS) plus the raw runs."""
    return {
        "runs": len(samples),
        "findings_per_s_median": median(s["findings_per_s"] for s in samples),
        "seconds_median": median(s["seconds"] for s in samples),
        "peak_rss_mb_median": median(s["peak_rss_mb"] for s in samples),
        "peak_rss_mb_max": max(s["peak_rss_mb"] for s in samples),
        # the extraction's worker process (0: none ran, e.g. the naive baseline)
        "worker_peak_rss_mb_max": max(s.get("worker_peak_rss_mb", 0.0) for s in samples),
        "worker_cpu_seconds_median": median(s.get("worker_cpu_seconds", 0.0) for s in samples),
        "rss_after_import_mb_median": median(s["rss_after_import_mb"] for s in samples),
        "cpu_seconds_median": median(s.get("cpu_seconds", float("nan")) for s in samples),
        "load_average_max": max(max(s["load_average"]) for s in samples),
        "findings_per_s_runs": [s["findings_per_s"] for s in samples],
        "requests": samples[-1]["requests"],
        "findings": samples[-1]["findings"],
        "per_issue_type": samples[-1].get("per_issue_type"),
        "samples": samples,
    }


def measure_size(runner: Runner, size: int, pg_url: str | None, *, with_bulk: bool) -> dict[str, Any]:
    """Everything measured against one emulator of ``size`` findings."""
    from findings_emulator.testing import EmulatorProcess

    args = runner.args
    large = size > LARGE
    runs = args.runs_large if large else args.runs
    naive_runs = 0 if args.skip_naive or size > args.naive_max else 1 if large else args.runs
    pg_runs = args.pg_runs_large if large else args.runs
    result: dict[str, Any] = {"findings": size, "runs": {"sqlite": runs, "naive": naive_runs, "postgres": pg_runs}}
    log(f"N={size}: starting the emulator")
    with EmulatorProcess(findings=size, token=TOKEN, startup_timeout=1800,
                         log_path=runner.workdir / f"emulator-{size}.log") as emulator:
        counts = emulator.stats()["counts"]["findings"]
        per_type = {t: int(counts.get(t, 0)) for t in ISSUE_TYPES}
        result["emulator"] = {"startup_s": emulator.startup_seconds, "findings_by_issue_type": per_type}
        result["requests_target"] = {t: expected_requests(n, FINDINGS_PAGE_SIZE.maximum) for t, n in per_type.items()}
        result["requests_minimal"] = {t: minimal_requests(n, FINDINGS_PAGE_SIZE.maximum) for t, n in per_type.items()}
        log(f"N={size}: emulator up in {emulator.startup_seconds:.1f} s ({per_type}); serving rate")
        result["serving"] = measure_serving(emulator, 1 if large or args.quick else args.runs)
        log(f"N={size}: served {result['serving']['served_per_s_median']:,.0f} findings/s")

        sqlite_url = f"sqlite:///{runner.workdir / f'warehouse-{size}.db'}"
        naive_url = f"sqlite:///{runner.workdir / f'naive-{size}.db'}"
        base = emulator_args(emulator)
        first, resync, naive = [], [], []
        for run in range(max(runs, naive_runs)):
            if run < naive_runs:
                naive.append(runner.child("naive_baseline.py", *base[:6], "--database-url", naive_url))
                log(f"N={size} run {run + 1}: naive {naive[-1]['findings_per_s']:,.0f} findings/s")
            if run < runs:
                first.append(runner.child("extract_product.py", *base, "--database-url", sqlite_url,
                                          "--mode", "first"))
                resync.append(runner.child("extract_product.py", *base, "--database-url", sqlite_url,
                                           "--mode", "resync"))
                log(f"N={size} run {run + 1}: SQLite first load {first[-1]['findings_per_s']:,.0f}/s, "
                    f"re-sync {resync[-1]['findings_per_s']:,.0f}/s, peak RSS {first[-1]['peak_rss_mb']:.0f} MB")
        for path in runner.workdir.glob(f"naive-{size}.db*"):
            path.unlink()
        result["sqlite"] = {"first_load": summarise(first), "resync": summarise(resync)}
        if naive:
            result["naive_sqlite"] = summarise(naive)
        for path in runner.workdir.glob(f"warehouse-{size}.db*"):
            path.unlink()

        if not args.skip_ceilings:
            result["sqlite_ceiling"] = measure_sqlite_ceilings(runner, size, emulator, runs)

        if pg_url:
            log(f"N={size}: PostgreSQL ceiling")
            ceiling_args = [*base, "--database-url", pg_url, "--findings", str(size),
                            "--sample", str(min(size, args.ceiling_sample)),
                            "--passes", "first" if large else "first,resync"]
            result["postgres_ceiling"] = runner.child("pg_ceiling.py", *ceiling_args)
            log(f"N={size}: ceiling first load {result['postgres_ceiling']['best_first_load_per_s']:,.0f}/s "
                f"({result['postgres_ceiling']['best_first_load']})")
            pg_first, pg_resync = [], []
            for run in range(pg_runs):
                pg_first.append(runner.child("extract_product.py", *base, "--database-url", pg_url, "--mode", "first"))
                pg_resync.append(runner.child("extract_product.py", *base, "--database-url", pg_url,
                                              "--mode", "resync"))
                log(f"N={size} run {run + 1}: PostgreSQL first load {pg_first[-1]['findings_per_s']:,.0f}/s, "
                    f"re-sync {pg_resync[-1]['findings_per_s']:,.0f}/s")
            result["postgres"] = {"first_load": summarise(pg_first), "resync": summarise(pg_resync)}
            if not args.skip_ceilings:
                result["postgres_pages"] = measure_postgres_pages(runner, size, emulator, pg_url, pg_runs)

        if args.profile and with_bulk:
            result["profiles"] = {}
            profiler = "pyinstrument" if importlib.util.find_spec("pyinstrument") else "cprofile"
            for name, url in (("sqlite", sqlite_url), ("postgres", pg_url)):
                if url is None:
                    continue
                prof = runner.workdir / f"extract-{name}-{size}.{'txt' if profiler == 'pyinstrument' else 'prof'}"
                profiled = runner.child("extract_product.py", *base, "--database-url", url, "--mode", "first",
                                        "--profile", str(prof), "--profiler", profiler)
                result["profiles"][name] = profile_summary(prof, profiler)
                result["profiles"][name]["findings_per_s_while_profiled"] = profiled["findings_per_s"]
                log(f"N={size}: profiled the {name} first load with {profiler} ({prof})")
            for path in runner.workdir.glob(f"warehouse-{size}.db*"):
                path.unlink()

        if with_bulk:
            log(f"N={size}: bulk actions")
            bulk_url = f"sqlite:///{runner.workdir / 'bulk.db'}"
            result["bulk"] = runner.child("bulk_actions.py", *base, "--database-url", bulk_url,
                                          "--triage", str(args.triage), "--groups", str(args.groups))
            log(f"N={size}: triage {result['bulk']['triage']['selected']} in "
                f"{result['bulk']['triage']['seconds']:.1f} s, {result['bulk']['tickets']['groups']} ticket groups "
                f"in {result['bulk']['tickets']['seconds']:.1f} s")
    return result


def measure_postgres_pages(runner: Runner, size: int, emulator: Any, pg_url: str, runs: int) -> dict[str, Any]:
    """The product's PostgreSQL first load against the page server (``page_server.py``: the emulator's pages,
    prebuilt), as :func:`measure_sqlite_ceilings` runs the SQLite one: what the PostgreSQL verdict compares with
    ``pg_ceiling.py`` (which pulls nothing), so that the emulator's page building does not take its share of the two
    cores from the product's side of the comparison only."""
    from page_server import PageServerProcess

    log(f"N={size}: page server (the emulator's pages, prebuilt) for the PostgreSQL first load against its ceiling")
    samples: list[dict[str, Any]] = []
    with PageServerProcess(token=TOKEN, from_url=emulator.base_url, env=runner.env,
                           log_path=runner.workdir / f"page-server-postgres-{size}.log") as server:
        base = ["--base-url", server.base_url, "--token", TOKEN, "--slug", server.deployment_slug,
                "--deployment-id", server.deployment_id]
        for run in range(runs):
            samples.append(runner.child("extract_product.py", *base, "--database-url", pg_url, "--mode", "first"))
            log(f"N={size} run {run + 1}: against the page server, PostgreSQL first load "
                f"{samples[-1]['findings_per_s']:,.0f}/s")
    return summarise(samples)


def measure_sqlite_ceilings(runner: Runner, size: int, emulator: Any, runs: int) -> dict[str, Any]:
    """The product's first load and the SQLite ceilings (``sqlite_ceiling.py``), side by side, against the page
    server (``page_server.py``: the emulator's pages, prebuilt), run by run: the product and the same-schema
    ceilings with ``counted`` (``ADJACENT_VARIANTS``) next to each other (alternating which goes first), then the
    other variants."""
    from page_server import PageServerProcess

    workdir = runner.workdir
    product_db = workdir / f"product-pages-{size}.db"
    ceiling_db = workdir / f"ceiling-{size}.db"
    log(f"N={size}: page server (the emulator's pages, prebuilt) for the SQLite ceilings")
    with PageServerProcess(token=TOKEN, from_url=emulator.base_url, env=runner.env,
                           log_path=workdir / f"page-server-{size}.log") as server:
        base = ["--base-url", server.base_url, "--token", TOKEN, "--slug", server.deployment_slug]
        names = runner.args.ceiling_variants.split(",")
        product: list[dict[str, Any]] = []
        ceilings: list[dict[str, Any]] = []
        for run in range(runs):
            def run_product() -> None:
                product.append(runner.child("extract_product.py", *base, "--deployment-id", server.deployment_id,
                                            "--database-url", f"sqlite:///{product_db}", "--mode", "first"))

            def run_ceiling(variants: list[str], check: bool = False) -> dict[str, Any]:
                if not variants:
                    return {"variants": {}, "check": None}
                return runner.child("sqlite_ceiling.py", *base, "--database-path", str(ceiling_db),
                                    "--variants", ",".join(variants), *(["--check", str(product_db)] if check else []))

            # the same-schema ceilings and `counted` right next to the product (alternating which goes first), the
            # others after
            same = [v for v in names if v in ADJACENT_VARIANTS]
            if run % 2 == 0:
                run_product()
                adjacent = run_ceiling(same, check=run == 0)  # the product's rows of this run are there to compare
            else:
                adjacent = run_ceiling(same)
                run_product()
            others = run_ceiling([v for v in names if v not in ADJACENT_VARIANTS])
            ceilings.append({"variants": {**adjacent["variants"], **others["variants"]},
                             "check": adjacent["check"]})
            shown = ", ".join(f"{v} {c['findings_per_s']:,.0f}" for v, c in ceilings[-1]["variants"].items())
            log(f"N={size} run {run + 1}: against the page server, product first load "
                f"{product[-1]['findings_per_s']:,.0f}/s; ceilings /s: {shown}")
    for path in workdir.glob(f"product-pages-{size}.db*"):
        path.unlink()
    first = summarise(product)
    rate = first["findings_per_s_median"]
    variants: dict[str, Any] = {}
    for name in ceilings[0]["variants"]:
        samples = [c["variants"][name] for c in ceilings]
        ceiling = median(s["findings_per_s"] for s in samples)
        variants[name] = {
            "findings_per_s_median": ceiling,
            "findings_per_s_runs": [s["findings_per_s"] for s in samples],
            "cpu_seconds_median": median(s["cpu_seconds"] for s in samples),
            "index_build_s_median": median(s["index_build_s"] for s in samples),
            "database_mb": samples[-1]["database_mb"],
            "requests": samples[-1]["requests"],
            "findings": samples[-1]["findings"],
            # the product's median over the ceiling's median, and run by run (runs made side by side)
            "product_share": rate / ceiling,
            "product_share_runs": [p["findings_per_s"] / s["findings_per_s"]
                                   for p, s in zip(product, samples, strict=True)],
        }
    return {"page_server": {"build_s": server.build_seconds, "startup_s": server.startup_seconds,
                            "pages": server.description},
            "product_first_load": first, "variants": variants, "check": ceilings[0]["check"], "runs": runs}


def profile_summary(path: Path, profiler: str, top: int = 15) -> dict[str, Any]:
    """pyinstrument: its call tree (text). cProfile: total time and the functions with the most own time."""
    if profiler == "pyinstrument":
        lines = path.read_text().splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("Profile at")), 0)
        return {"profiler": profiler, "tree": "\n".join(lines[start + 1:start + 61]).strip("\n")}
    import pstats

    stats = pstats.Stats(str(path))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = name if filename == "~" else f"{_short(filename)}:{line}({name})"
        rows.append({"function": where, "calls": calls, "own_s": tottime, "cumulative_s": cumtime,
                     "share": tottime / total if total else 0.0})
    rows.sort(key=lambda r: r["own_s"], reverse=True)
    return {"profiler": profiler, "total_s": total, "top": rows[:top]}


def _short(filename: str) -> str:
    for marker in ("site-packages/", "plugins/", "include/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --- main -------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny N, one run (the smoke test)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--runs-large", type=int, default=3, help=f"SQLite runs for N > {LARGE:,}")
    parser.add_argument("--pg-runs-large", type=int, default=2, help=f"PostgreSQL runs for N > {LARGE:,}")
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated N")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--naive-max", type=int, default=10**12, metavar="N",
                        help="run the naive baseline only at sizes up to N (its target is at 100,000; at 1,000,000 "
                             "one run takes it several minutes)")
    parser.add_argument("--skip-ceilings", action="store_true",
                        help="leave out the SQLite ceilings against the page server (bench/sqlite_ceiling.py)")
    parser.add_argument("--ceiling-variants", default="schema,indexes_after,counted,no_secondary,unkeyed,integer_key,"
                        "without_rowid,minimal,minimal_unkeyed", help="variants of bench/sqlite_ceiling.py")
    parser.add_argument("--skip-dashboard", action="store_true",
                        help="leave out the dashboard pages from a warehouse of the largest N (bench/dashboard.py)")
    parser.add_argument("--skip-dialects", action="store_true",
                        help="leave out the side-by-side extraction against both wire dialects (bench/dialects.py)")
    parser.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument("--dag-runs", type=int, default=3, help="fresh-interpreter parses per DAG file")
    parser.add_argument("--triage", type=int, default=10_000, help="findings to bulk-triage")
    parser.add_argument("--groups", type=int, default=500, help="ticket groups to create")
    parser.add_argument("--ceiling-sample", type=int, default=100_000,
                        help="distinct findings behind the PostgreSQL ceiling")
    parser.add_argument("--pg-admin-url",
                        default=os.environ.get("BENCH_PG_ADMIN_URL") or configured_postgres().url("postgres"))
    parser.add_argument("--out-dir", default=str(BENCH_DIR), help="where results.md and results.json go")
    parser.add_argument("--workdir", help="scratch directory (default: a new temporary one, removed after)")
    parser.add_argument("--render", metavar="RESULTS_JSON",
                        help="measure nothing: rewrite results.md (and the verdicts) from an earlier results.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.runs, args.runs_large, args.pg_runs_large, args.dag_runs = "9000", 1, 1, 1, 1
        args.triage, args.groups, args.ceiling_sample = 500, 10, 9000
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        results: dict[str, Any] = json.loads(Path(args.render).read_text())
        results["verdicts"] = verdicts(results)
        Path(args.render).write_text(json.dumps(results, indent=2, default=str) + "\n")
        write_markdown(results, Path(args.render).with_suffix(".md"))
        return 0
    # a terminated run still stops its emulator and drops its database (the `with` and `finally` blocks)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    started = time.perf_counter()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="findings-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runner = Runner(args, workdir)
    pg_url = None if args.skip_postgres else create_pg_database(args.pg_admin_url)
    results = {
        "command": " ".join(["python bench/run_all.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_facts(None if args.skip_postgres else args.pg_admin_url),
        "targets": TARGETS,
        "settings": {k: v for k, v in vars(args).items() if k != "pg_admin_url"},
        "postgres": "skipped (--skip-postgres)" if args.skip_postgres else ("used" if pg_url else "unreachable"),
        "sizes": {},
    }
    log(f"work directory {workdir}; children's output in {runner.log_path}")
    try:
        results["dag_parse"] = measure_dag_parse(runner, args.dag_runs)
        for index, size in enumerate(sizes):
            results["sizes"][str(size)] = measure_size(runner, size, pg_url, with_bulk=index == 0)
        if not args.skip_dialects:
            log(f"N={sizes[0]}: the extraction against both wire dialects")
            results["dialects"] = dialects.measure(sizes[0], args.runs, workdir)
        if not args.skip_dashboard:
            log(f"N={sizes[-1]}: the dashboard's pages")
            (workdir / "dashboard.db").unlink(missing_ok=True)  # a --workdir used before: build afresh
            results["dashboard"] = dashboard.measure(sizes[-1], args.runs, workdir / "dashboard.db")
    finally:
        if pg_url:
            drop_pg_database(pg_url)
    results["load_average_at_end"] = os.getloadavg()
    results["elapsed_s"] = time.perf_counter() - started
    results["verdicts"] = verdicts(results)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    write_markdown(results, out_dir / "results.md")
    log(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'} in {results['elapsed_s'] / 60:.1f} min")
    for v in results["verdicts"]:
        status = {True: "MET ", False: "MISS", None: "INFO"}[v["met"]]
        log(f"{status} {v['target']}: {v['measured']}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
