"""The benchmark suite runs end to end on a tiny N and writes well-formed results (no timing assertions)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
RUN_ALL = PROJECT / "bench" / "run_all.py"

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench-results")
    completed = subprocess.run(
        [sys.executable, str(RUN_ALL), "--quick", "--out-dir", str(out), "--workdir", str(out / "work")],
        cwd=PROJECT, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(PROJECT / "plugins"), str(PROJECT / "include"), os.environ.get("PYTHONPATH", "")])},
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    return out


def test_writes_results_outside_the_committed_ones(quick_results: Path) -> None:
    assert (quick_results / "results.md").is_file()
    assert (quick_results / "results.json").is_file()


def test_results_json_is_well_formed(quick_results: Path) -> None:
    results = json.loads((quick_results / "results.json").read_text())
    machine = results["machine"]
    for key in ("cpu_model", "cpu_cores", "ram_gb", "python", "sqlite", "date"):
        assert machine[key], key
    (size,) = results["sizes"].values()
    for backend in ("sqlite",) + (("postgres",) if results["postgres"] == "used" else ()):
        for mode in ("first_load", "resync"):
            figures = size[backend][mode]
            assert figures["findings"] == size["findings"]
            assert figures["findings_per_s_median"] > 0
            assert figures["peak_rss_mb_max"] > 0
            assert sum(figures["requests"]["findings_by_issue_type"].values()) > 0
    if results["postgres"] == "used":
        methods = size["postgres_ceiling"]["methods"]  # the first load's ceiling with the indexes built after it too
        assert set(methods) == {"execute_values", "copy", "copy_direct", "copy_indexes_after"}
        assert all(method["first_load_per_s"] > 0 for method in methods.values())
        assert size["postgres_ceiling"]["best_first_load_per_s"] > 0
        # the product's PostgreSQL first load against the page server, which the verdict compares with the ceiling
        assert size["postgres_pages"]["findings"] == size["findings"]
        assert size["postgres_pages"]["findings_per_s_median"] > 0
    ceiling = size["sqlite_ceiling"]  # the product and the SQLite ceilings against the page server
    assert ceiling["product_first_load"]["findings"] == size["findings"]
    assert ceiling["check"]["equal"]  # the same-schema ceiling stores the product's rows
    assert set(ceiling["variants"]) == {"schema", "indexes_after", "counted", "no_secondary", "unkeyed", "integer_key",
                                        "without_rowid", "minimal", "minimal_unkeyed"}
    for variant in ceiling["variants"].values():
        assert variant["findings"] == size["findings"]
        assert variant["findings_per_s_median"] > 0
        assert variant["product_share"] > 0
        assert len(variant["product_share_runs"]) == ceiling["runs"]
    assert ceiling["variants"]["indexes_after"]["index_build_s_median"] > 0
    assert size["naive_sqlite"]["findings"] == size["findings"]
    assert size["serving"]["served_per_s_median"] > 0
    assert size["bulk"]["triage"]["requests"] >= 1
    assert size["bulk"]["tickets"]["requests"] >= 1
    for write in ("triage", "tickets"):  # the fresh re-read before each write, within its budget
        assert 1 <= size["bulk"][write]["reread_requests"] <= size["bulk"][write]["reread_budget"]
    assert results["dag_parse"]
    assert all(not parse["import_errors"] for parse in results["dag_parse"].values())
    assert results["verdicts"]
    assert all(set(v) == {"target", "measured", "met", "note"} for v in results["verdicts"])


def test_results_md_states_every_target(quick_results: Path) -> None:
    text = (quick_results / "results.md").read_text()
    results = json.loads((quick_results / "results.json").read_text())
    for heading in ("## Machine", "## Targets", "## Extraction", "## SQLite ceilings", "## Bulk actions",
                    "## Airflow costs"):
        assert heading in text
    targets = [v["target"] for v in results["verdicts"]]
    assert any(t.startswith("SQLite first load >= 90% of the same-schema ceiling") for t in targets)
    assert any(t.startswith("SQLite first load as a share of the minimal table's ceiling") for t in targets)
    for verdict in results["verdicts"]:
        assert verdict["target"] in text


def test_phases_accounts_for_a_first_load_and_a_resync(tmp_path: Path) -> None:
    """``bench/phases.py`` at a tiny N: every pull stores the findings, and the phases land where they belong."""
    out = tmp_path / "phases.json"
    completed = subprocess.run(
        [sys.executable, str(PROJECT / "bench" / "phases.py"), "--findings", "4000", "--out", str(out),
         "--workdir", str(tmp_path / "work")],
        cwd=PROJECT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(PROJECT / "plugins"), str(PROJECT / "include"), str(PROJECT / "bench"),
             os.environ.get("PYTHONPATH", "")])},
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    results = json.loads(out.read_text())
    assert set(results["backends"]) == ({"sqlite"} if "postgres_skipped" in results else {"sqlite", "postgres"})
    for backend, runs in results["backends"].items():
        assert set(runs) == {"first_isolation", "first_pipeline", "resync_isolation", "resync_pipeline"}
        for name, run in runs.items():
            phases = run["phases"]
            assert run["findings"] == results["findings_requested"], (backend, name)
            assert run["written"] == (run["findings"] if name.startswith("first") else 0), (backend, name)
            first = name.startswith("first")
            for phase in ("fetch", "decode", "recount", "snapshot", "not_seen", "indexes"):
                assert phases[phase] > 0, (backend, name, phase)
            # an upsert commits its transaction; a re-sync of unchanged findings makes none
            assert (phases["commit"] > 0) == first, (backend, name)
            # a first load prepares its pages whole (in the pipeline in the worker process, whose phases stay there);
            # a re-sync screens them and builds no row (none changed)
            for phase in ("finding_rows", "digests"):
                if first:
                    assert phases[phase] > 0 if name.endswith("isolation") else math.isnan(phases[phase]), (name, phase)
                else:
                    assert phases[phase] == 0, (backend, name, phase)
            assert (phases["screen"] > 0) != first, (backend, name)
            assert phases["screened_rows"] == 0, (backend, name)
            assert 0 < sum(v for k, v in phases.items() if k in ("fetch", "screen", "finding_rows", "digests")
                           and not math.isnan(v)) < run["wall_s"] * 2
            # a first load reads the stored digests in its upserts and inserts; a re-sync of unchanged findings asks
            # which are new or changed (none) and sends no row to the database (no upsert, no COPY, no merge)
            assert (phases["lookup"] > 0) == first, (backend, name)
            assert (phases["to_write"] > 0) != first, (backend, name)
            if backend == "sqlite":
                assert (phases["insert"] > 0) == first, (backend, name)
                assert phases["upsert"] == 0, (backend, name)
            else:
                # new rows go by COPY straight into findings; no finding is changed, so nothing is staged
                for phase in ("lock", "fingerprints", "copy_new"):
                    assert (phases[phase] > 0) == first, (backend, name, phase)
                # the rows' COPY text: formatted in the main thread in isolation, by the worker process in the pipeline
                assert (phases["copy_text"] > 0) == (name == "first_isolation"), (backend, name)
                for phase in ("stage", "copy", "history_diff", "merge"):
                    assert phases[phase] == 0, (backend, name, phase)
            if name.endswith("isolation"):  # no fetch thread: nothing to wait for, the canonical form split out
                assert phases["wait"] == 0, (backend, name)
                if first:
                    assert 0 < phases["canonical"] < phases["finding_rows"], (backend, name)
            else:
                assert phases["wait"] > 0, (backend, name)
        table = ("SQLite" if backend == "sqlite" else "PostgreSQL") + ": seconds per 100,000 findings"
        assert table in completed.stdout


def test_a_benchmark_child_removes_the_airflow_home_it_made_and_keeps_a_given_one(tmp_path: Path) -> None:
    """``common.scratch_airflow_home``: a child without ``AIRFLOW_HOME`` works in a new empty one, gone when it
    exits; a child given one uses it, keeps it, and makes none."""
    scratch = tmp_path / "tmp"  # where the child's temporary directories go
    scratch.mkdir()
    script = ("import os, common; common.scratch_airflow_home(); home = os.environ['AIRFLOW_HOME']; "
              "print(home, os.path.isdir(home) and not os.listdir(home))")
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": os.pathsep.join(
        [str(PROJECT / "bench"), str(PROJECT / "plugins"), str(PROJECT / "include")])}
    env.pop("AIRFLOW_HOME", None)

    def child(**extra: str) -> tuple[str, str]:
        out = subprocess.run([sys.executable, "-c", script], env={**env, **extra}, capture_output=True, text=True,
                             check=True, timeout=120).stdout.split()
        return out[0], out[1]

    made, empty = child()
    assert Path(made).parent == scratch
    assert empty == "True"
    assert not Path(made).exists()
    given = tmp_path / "given-home"
    given.mkdir()
    home, empty = child(AIRFLOW_HOME=str(given))
    assert (home, empty) == (str(given), "True")
    assert given.is_dir()
    assert list(scratch.iterdir()) == []
