"""Dependency inventory operators against the emulator, through connections: complete pulls, pruning, filters,
the report; and against an emulator speaking the real service's dialect."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from findings_provider.config import DependencyFilters
from findings_provider.governance.filters import dependency_filter
from findings_provider.operators.dependencies import (
    DependencyReportOperator,
    ExtractDependenciesOperator,
    ExtractDependencyRepositoriesOperator,
)
from findings_provider.warehouse import dependency_rows
from findings_provider.warehouse.schema import dependencies, dependency_repositories
from fixtures import connect, running_emulator
from task_context import FakeTaskInstance, run_operator
from warehouse_rows import stored

pytestmark = pytest.mark.integration


def served(emulator, path: str, key: str, body: dict | None = None) -> list[dict]:
    """Everything the emulator serves on a mixed-pagination endpoint, read with plain HTTP."""
    items, cursor = [], None
    with emulator.client() as http:
        while True:
            page = http.post(
                f"/api/v1/deployments/{emulator.deployment_id}/{path}",
                json={**(body or {}), "pageSize": 100, **({"cursor": cursor} if cursor else {})},
            ).json()
            items += page[key]
            if not page["hasMore"]:
                return items
            cursor = page["cursor"]


def test_tables_hold_exactly_what_the_emulator_serves(fresh, warehouse):
    warehouse.upsert_dependencies(dependency_rows([{"id": "1", "name": "gone", "version": "0"}]))
    ti = FakeTaskInstance()

    deps = run_operator(ExtractDependenciesOperator(task_id="deps", page_size=120), ti)
    repos = run_operator(ExtractDependencyRepositoriesOperator(task_id="repos", page_size=5), ti)

    served_deps = served(fresh, "dependencies", "dependencies")
    served_repos = served(fresh, "dependencies/repositories", "repositorySummaries")
    assert len(served_deps) == 300
    assert set(stored(warehouse, dependencies, "id", "name", "version")) == {
        (d["id"], d["name"], d["version"]) for d in served_deps
    }
    assert set(stored(warehouse, dependency_repositories, "id", "name", "num_dependencies",
                  "has_dependency_path_scan")) == {
        (r["id"], r["name"], r["numDependencies"], r["hasDependencyPathScan"]) for r in served_repos
    }
    assert (deps["dependencies"], deps["pages"], deps["removed"]) == (300, 3, 1)  # the stale row is gone
    assert (repos["repositories"], repos["pages"]) == (len(served_repos), -(-len(served_repos) // 5))
    # mixed pagination: cursor and page size in the JSON body; each cursor comes from the previous page
    bodies = [r["body"] for r in fresh.requests() if r["operation"] == "dependencies"][:3]
    assert [b.get("pageSize") for b in bodies] == [120, 120, 120]
    assert "cursor" not in bodies[0]
    assert bodies[1]["cursor"] == served_deps[119]["id"]


def test_filters_from_the_yaml_reach_the_api_and_narrow_the_tables(fresh, warehouse):
    filters = DependencyFilters.model_validate(
        {
            "licenses": ["MIT", "Apache-2.0"],
            "packages": [{"name": "lodash", "version_lower_bound": "4.0", "version_upper_bound": "4.17.20"}],
        }
    )
    flt = dependency_filter(filters)
    assert flt == {
        "license": ["MIT", "Apache-2.0"],
        "packageFilters": [
            {
                "name": "lodash",
                "exactNameMatch": True,
                "versionLowerBound": "4.0",
                "versionUpperBound": "4.17.20",
            }
        ],
    }
    ti = FakeTaskInstance()

    run_operator(ExtractDependenciesOperator(task_id="deps", page_size=10000, dependency_filter=flt), ti)
    run_operator(ExtractDependencyRepositoriesOperator(task_id="repos", dependency_filter=flt), ti)

    logged = [r for r in fresh.requests() if r["operation"] in ("dependencies", "dependency_repositories")]
    assert {r["operation"] for r in logged} == {"dependencies", "dependency_repositories"}
    assert all(r["body"]["dependencyFilter"] == flt for r in logged)
    expected = served(fresh, "dependencies", "dependencies", {"dependencyFilter": flt})
    assert 0 < len(expected) < 300
    assert {d["name"] for d in expected} == {"lodash"}
    assert set(stored(warehouse, dependencies, "id")) == {(d["id"],) for d in expected}


def test_report_has_licence_and_widespread_tables_and_charts(fresh, warehouse, tmp_path: Path):
    ti = FakeTaskInstance()
    run_operator(ExtractDependenciesOperator(task_id="deps", page_size=10000), ti)
    run_operator(ExtractDependencyRepositoriesOperator(task_id="repos"), ti)

    result = run_operator(DependencyReportOperator(task_id="report", report_dir=str(tmp_path)), ti)

    deps = served(fresh, "dependencies", "dependencies")
    licences = Counter(lic for d in deps for lic in d["licenses"])
    assert result["dependencies"] == 300
    assert result["licences"] == len(licences)
    html = Path(result["report"]["html"]).read_text()
    assert html.count("<img") == 2  # licences and most widespread dependencies
    assert "<table" in html
    top_licence, top_count = licences.most_common(1)[0]
    csv_text = Path(result["report"]["csv"]["dependencies per licence"]).read_text().splitlines()
    assert csv_text[1].startswith(f"{top_licence},{top_count},")
    repos_per_name: Counter[str] = Counter()
    for name in {d["name"] for d in deps}:
        repos_per_name[name] = len({d["repositoryId"] for d in deps if d["name"] == name})
    widespread_csv = next(v for k, v in result["report"]["csv"].items() if k.startswith("most widespread"))
    first = Path(widespread_csv).read_text().splitlines()[1]
    assert int(first.split(",")[1]) == max(repos_per_name.values())


def test_without_prune_rows_no_longer_served_stay_and_an_empty_filter_sends_none(fresh, warehouse):
    warehouse.upsert_dependencies(dependency_rows([{"id": "1", "name": "gone", "version": "0"}]))
    assert ExtractDependenciesOperator.template_fields == ("findings_conn_id", "warehouse_conn_id", "dependency_filter")

    result = run_operator(ExtractDependenciesOperator(task_id="deps", page_size=10000, prune=False,
                                                      dependency_filter={}), FakeTaskInstance())

    assert (result["dependencies"], result["removed"]) == (300, 0)
    assert ("1", "gone") in set(stored(warehouse, dependencies, "id", "name"))
    assert len(set(stored(warehouse, dependencies, "id"))) == 301
    bodies = [r["body"] for r in fresh.requests() if r["operation"] == "dependencies"]
    assert len(bodies) == 1
    assert "dependencyFilter" not in bodies[0]


# --- the real service's dialect ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_emulator():
    """An emulator speaking the real service's dialect (dependencies without ids, digit-string cursors)."""
    with running_emulator(findings=50, dialect="real") as emu:
        yield emu


def test_a_real_dialect_inventory_loads_completely(real_emulator, warehouse, monkeypatch, tmp_path):
    from findings_provider.client.dependency_identity import dependency_key

    connect(monkeypatch, emulator=real_emulator, max_retries=0)
    ti = FakeTaskInstance()

    deps = run_operator(ExtractDependenciesOperator(task_id="deps", page_size=120), ti)
    repos = run_operator(ExtractDependencyRepositoriesOperator(task_id="repos", page_size=5), ti)
    result = run_operator(DependencyReportOperator(task_id="report", report_dir=str(tmp_path)), ti)

    served_deps = served(real_emulator, "dependencies", "dependencies")
    assert served_deps
    assert all("id" not in d for d in served_deps)  # the dialect under test
    # entries sharing the canonical key (the same package and version in the same lockfile) are one dependency:
    # the last one received wins, as in any upsert
    by_key = {
        dependency_key(
            d["repositoryId"],
            d["definedAt"]["path"],
            d["ecosystem"],
            d["package"]["name"],
            d["package"]["versionSpecifier"],
        ): d
        for d in served_deps
    }
    expected = {
        (key, d["package"]["name"], d["package"]["versionSpecifier"], d["repositoryId"]) for key, d in by_key.items()
    }
    assert set(stored(warehouse, dependencies, "id", "name", "version", "repository_id")) == expected
    assert deps["dependencies"] == len(expected)
    assert repos["repositories"] == len(served(real_emulator, "dependencies/repositories", "repositorySummaries"))
    licences = Counter(lic for d in by_key.values() for lic in d["licenses"])
    top_licence, top_count = licences.most_common(1)[0]
    csv_text = Path(result["report"]["csv"]["dependencies per licence"]).read_text().splitlines()
    assert csv_text[1].startswith(f"{top_licence},{top_count},")
