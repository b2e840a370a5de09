"""The extraction against both wire dialects side by side: what reading the real service's dialect costs.

Two emulators from the same seed and size, one speaking the reference's dialect and one the real service's
(``--dialect real``); the product's extraction (``extract_product.py``: the operator's code path, full refresh,
sast + sca, 3000-item pages, a SQLite warehouse) runs against each, interleaved run by run (reference, real,
reference, real, ...) so that both see the same machine load; first load into an empty warehouse, then a re-sync.
Each figure is the median of the runs; CPU seconds of the extracting process are reported next to the wall time
(the machine is shared and its load varies). The request counts and stored rows must be equal for both dialects.

    python bench/dialects.py --findings 100000 --runs 3 --out /tmp/dialects.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import child_env

HERE = Path(__file__).resolve().parent
DIALECTS = ("reference", "real")
#: The issue's target: the real dialect costs at most this share of the throughput.
MAX_COST = 0.10


def extract(emulator: Any, database: Path, mode: str, out: Path) -> dict[str, Any]:
    command = [sys.executable, str(HERE / "extract_product.py"), "--base-url", emulator.base_url,
               "--token", emulator.token, "--slug", emulator.deployment_slug,
               "--deployment-id", str(emulator.deployment_id), "--database-url", f"sqlite:///{database}",
               "--mode", mode, "--out", str(out)]
    subprocess.run(command, check=True, env=child_env(), timeout=1800)
    return json.loads(out.read_text())


def measure(findings: int, runs: int, work: Path) -> dict[str, Any]:
    from findings_emulator.testing import EmulatorProcess

    results: dict[str, dict[str, list[dict[str, Any]]]] = {d: {"first": [], "resync": []} for d in DIALECTS}
    with EmulatorProcess(findings=findings, extra_args=("--scans", "0")) as reference, EmulatorProcess(
        findings=findings, dialect="real", extra_args=("--scans", "0")
    ) as real:
        emulators = {"reference": reference, "real": real}
        for run in range(runs):
            for dialect in DIALECTS:
                database = work / f"{dialect}.db"
                for mode in ("first", "resync"):
                    out = work / f"{dialect}-{mode}-{run}.json"
                    results[dialect][mode].append(extract(emulators[dialect], database, mode, out))
                    print(f"run {run + 1} {dialect:9s} {mode:6s} "
                          f"{results[dialect][mode][-1]['findings_per_s']:9.0f} findings/s", flush=True)
    return summarise(results, findings, runs)


def summarise(results: dict[str, dict[str, list[dict[str, Any]]]], findings: int, runs: int) -> dict[str, Any]:
    summary: dict[str, Any] = {"findings": findings, "runs": runs, "modes": {}}
    problems = []
    for mode in ("first", "resync"):
        per: dict[str, Any] = {}
        for dialect in DIALECTS:
            rows = results[dialect][mode]
            per[dialect] = {
                "findings_per_s": statistics.median(r["findings_per_s"] for r in rows),
                "cpu_seconds": statistics.median(r["cpu_seconds"] for r in rows),
                "seconds": statistics.median(r["seconds"] for r in rows),
                "requests": sorted({r["requests"]["total"] for r in rows}),
                "stored_rows": sorted({r["stored_rows"] for r in rows}),
                "findings": sorted({r["findings"] for r in rows}),
            }
        for key in ("requests", "stored_rows", "findings"):
            if per["reference"][key] != per["real"][key]:
                problems.append(f"{mode}: {key} differ: reference {per['reference'][key]}, real {per['real'][key]}")
        ref, real = per["reference"], per["real"]
        per["throughput_cost"] = 1 - real["findings_per_s"] / ref["findings_per_s"]
        per["cpu_cost"] = real["cpu_seconds"] / ref["cpu_seconds"] - 1
        summary["modes"][mode] = per
    summary["problems"] = problems
    summary["met"] = not problems and all(m["throughput_cost"] <= MAX_COST for m in summary["modes"].values())
    return summary


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"Measured by `{summary['command']}` on {summary['date']}.", ""] if "command" in summary else []
    lines += [
        f"N = {summary['findings']:,} findings (sast + sca), {summary['runs']} interleaved runs per dialect, medians; "
        "SQLite warehouse, full refresh through `ExtractFindingsOperator`.",
        "",
        "| | reference: findings/s (CPU s) | real: findings/s (CPU s) | throughput cost | CPU cost |",
        "|---|---|---|---|---|",
    ]
    for mode, per in summary["modes"].items():
        ref, real = per["reference"], per["real"]
        lines.append(
            f"| {'first load' if mode == 'first' else 're-sync'} | {ref['findings_per_s']:,.0f} "
            f"({ref['cpu_seconds']:.2f}) | {real['findings_per_s']:,.0f} ({real['cpu_seconds']:.2f}) | "
            f"{per['throughput_cost']:+.1%} | {per['cpu_cost']:+.1%} |")
    lines += ["", f"Target: the real dialect costs at most {MAX_COST:.0%} of throughput: "
              f"**{'met' if summary['met'] else 'not met'}**."]
    lines += [f"- {p}" for p in summary["problems"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--findings", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", help="write the summary as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dialects-") as work:
        summary = measure(args.findings, args.runs, Path(work))
    summary["command"] = " ".join(["python bench/dialects.py", *sys.argv[1:]])
    summary["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(markdown(summary))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
