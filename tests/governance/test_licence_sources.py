"""The licence table of the dependency inventory report: a repository's licences come from its stored SBOM's
components when it has any, else from its dependencies in the inventory; each row says which."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from findings_provider.governance.dependency_inventory import SOURCE_INVENTORY, SOURCE_SBOM, dependency_tables
from findings_provider.governance.sbom import COMPLETED, FAILED, ExportJob, store_export
from findings_provider.operators.dependencies import DependencyReportOperator
from findings_provider.warehouse import dependency_repository_rows, dependency_rows
from fixtures import connect
from task_context import FakeTaskInstance, run_operator


def inventory(warehouse) -> None:
    """Repository 7: two GPL dependencies; repository 8: one MIT and one without a licence."""
    warehouse.upsert_dependencies(dependency_rows([
        {"id": "1", "name": "a", "version": "1", "ecosystem": "npm", "licenses": ["GPL-3.0"], "repositoryId": "7"},
        {"id": "2", "name": "b", "version": "1", "ecosystem": "npm", "licenses": ["GPL-3.0"], "repositoryId": "7"},
        {"id": "3", "name": "c", "version": "1", "ecosystem": "npm", "licenses": ["MIT"], "repositoryId": "8"},
        {"id": "4", "name": "d", "version": "1", "ecosystem": "npm", "licenses": [], "repositoryId": "8"},
    ]))
    warehouse.upsert_dependency_repositories(dependency_repository_rows([
        {"id": 7, "name": "acme/api", "numDependencies": 2}, {"id": 8, "name": "acme/web", "numDependencies": 2}]))


def licences(warehouse) -> dict[Any, dict[Any, Any]]:
    return dependency_tables(warehouse)["dependencies per licence"].to_dict("index")


def test_without_an_sbom_every_licence_comes_from_the_inventory(warehouse):
    inventory(warehouse)
    store_export(warehouse, ExportJob(7, "t", FAILED, error="boom"))  # a failed export stores no components
    assert licences(warehouse) == {
        "GPL-3.0": {"dependencies": 2, "repositories": 1, "source": SOURCE_INVENTORY},
        "(unknown)": {"dependencies": 1, "repositories": 1, "source": SOURCE_INVENTORY},
        "MIT": {"dependencies": 1, "repositories": 1, "source": SOURCE_INVENTORY},
    }
    assert dependency_tables(warehouse)["totals"].loc["repositories whose licences come from their SBOM",
                                                      "value"] == 0


def test_a_repository_with_sbom_components_is_counted_from_them_and_the_others_from_the_inventory(warehouse):
    inventory(warehouse)
    # repository 7's SBOM says its components are Apache-2.0 (one of them also MIT): its GPL inventory rows are
    # no longer counted; repository 8 has no SBOM and keeps its inventory licences
    store_export(warehouse, ExportJob(7, "t", COMPLETED), {"components": [
        {"name": "a", "version": "1", "licenses": [{"license": {"id": "Apache-2.0"}}]},
        {"name": "b", "version": "1", "licenses": [{"license": {"id": "Apache-2.0"}}, {"license": {"id": "MIT"}}]},
    ]})
    assert licences(warehouse) == {
        "Apache-2.0": {"dependencies": 2, "repositories": 1, "source": SOURCE_SBOM},
        "MIT": {"dependencies": 2, "repositories": 2, "source": f"{SOURCE_SBOM} + {SOURCE_INVENTORY}"},
        "(unknown)": {"dependencies": 1, "repositories": 1, "source": SOURCE_INVENTORY},
    }
    assert "GPL-3.0" not in licences(warehouse)
    assert dependency_tables(warehouse)["totals"].loc["repositories whose licences come from their SBOM",
                                                      "value"] == 1


def test_the_report_shows_the_source_of_each_row(warehouse, warehouse_path: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch):
    connect(monkeypatch, warehouse=warehouse_path)
    inventory(warehouse)
    store_export(warehouse, ExportJob(8, "t", COMPLETED), {"components": [
        {"name": "c", "licenses": [{"expression": "MIT OR Apache-2.0"}]}]})

    result = run_operator(DependencyReportOperator(task_id="report", report_dir=str(tmp_path)), FakeTaskInstance())

    rows = Path(result["report"]["csv"]["dependencies per licence"]).read_text().splitlines()
    assert rows == ["licence,dependencies,repositories,source", "GPL-3.0,2,1,dependency inventory",
                    "MIT OR Apache-2.0,1,1,SBOM"]
    assert "dependency inventory" in Path(result["report"]["html"]).read_text()
