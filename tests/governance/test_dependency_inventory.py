"""Tests of ``governance/dependency_inventory.py``: the filter built from the YAML, the report's CSV files from names
the service sent, the licence table's sources (a stored SBOM's components, else the inventory), and the inventory
from the real service's dialect.

The operators that pull and report are tested in ``tests/operators/test_dependencies.py``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.config import DependencyFilters
from findings_provider.governance.dependency_inventory import (
    SOURCE_INVENTORY,
    SOURCE_SBOM,
    dependency_tables,
    extract_dependencies,
    extract_repositories,
)
from findings_provider.governance.filters import dependency_filter
from findings_provider.governance.sbom import COMPLETED, FAILED, ExportJob, store_export
from findings_provider.operators.dependencies import DependencyReportOperator
from findings_provider.warehouse import dependency_repository_rows, dependency_rows
from findings_provider.warehouse.schema import dependencies
from fixtures import connect, make_warehouse
from sqlalchemy import select
from task_context import FakeTaskInstance, run_operator

# --- dependency inventory: The dependency inventory's filter, built from the YAML. The operators that pull and
# report are tested in ``tests/operators/test_dependencies.py``.

def test_no_filters_send_no_filter():
    assert dependency_filter(DependencyFilters()) is None


# --- dependency report csv: The dependency inventory report's CSV files, from names the service sent: text stays
# text, numbers stay numbers. Package, licence and repository names are chosen by whoever published the package or
# named the repository. The report is written by the real operator from a real SQLite warehouse and read back.

PACKAGE = "=cmd|' /C calc'!A0"
REPOSITORY = "@SUM(1)"


def read_csv(path: str) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_report_csv_marks_formula_like_names_as_text(
    warehouse, warehouse_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    connect(monkeypatch, warehouse=warehouse_path)
    warehouse.upsert_dependencies(
        dependency_rows(
            [
                {"id": "1", "name": PACKAGE, "version": "-1.0", "ecosystem": "npm", "licenses": ["+GPL"],
                 "repositoryId": "7"},
                {"id": "2", "name": PACKAGE, "version": "2.0", "ecosystem": "npm", "licenses": ["+GPL"],
                 "repositoryId": "8"},
            ]
        )
    )
    warehouse.upsert_dependency_repositories(
        dependency_repository_rows(
            [{"id": 7, "name": REPOSITORY, "numDependencies": 2, "hasDependencyPathScan": True}]
        )
    )

    result = run_operator(DependencyReportOperator(task_id="report", report_dir=str(tmp_path)), FakeTaskInstance())

    files = result["report"]["csv"]
    assert read_csv(files["dependencies per licence"]) == [
        ["licence", "dependencies", "repositories", "source"],
        ["'+GPL", "2", "2", "dependency inventory"],
    ]
    widespread = next(v for k, v in files.items() if k.startswith("most widespread"))
    assert read_csv(widespread) == [
        ["dependency", "repositories", "occurrences", "versions"],
        ["'" + PACKAGE + " (npm)", "2", "2", "'-1.0, 2.0"],  # a version is text, even one that looks negative
    ]
    largest = next(v for k, v in files.items() if k.startswith("repositories with the most"))
    assert read_csv(largest) == [
        ["name", "id", "num_dependencies", "has_dependency_path_scan"],
        ["'" + REPOSITORY, "7", "2", "True"],
    ]


# --- licence sources: The licence table of the dependency inventory report: a repository's licences come from its
# stored SBOM's components when it has any, else from its dependencies in the inventory; each row says which.

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


# --- dependency inventory real dialect: The dependency inventory loads pages in the real service's dialect (no
# dependency ids, digit-string cursors, ``package {name, versionSpecifier}``, ``definedAt``) and reports the same
# licence counts as for the reference shape. Before the canonical key, the first real page failed with "dependency
# has no usable id".

def location(path: str) -> dict[str, Any]:
    return {"path": path, "url": "u", "committedAt": "1970-01-01T00:00:00Z", "startLine": "4", "endLine": "4"}


def real_dep(repo: str, name: str, version: str, licences: list[str], path: str = "go.sum") -> dict[str, Any]:
    return {
        "repositoryId": repo,
        "package": {"name": name, "versionSpecifier": version},
        "ecosystem": "gomod",
        "transitivity": "DIRECT",
        "licenses": licences,
        "definedAt": location(path),
        "manifestDefinition": location("go.mod"),
        "pathToTransitivity": [],
    }


def ref_dep(ident: str, repo: int, name: str, version: str, licences: list[str]) -> dict[str, Any]:
    return {
        "id": ident,
        "name": name,
        "version": version,
        "ecosystem": "gomod",
        "licenses": licences,
        "repositoryId": repo,
        "lockfilePath": "go.sum",
    }


REAL_PAGES: list[dict[str, Any]] = [
    {
        "dependencies": [
            real_dep("101", "github.com/pkg/errors", "v0.9.1", ["BSD-2-Clause"]),
            real_dep("101", "golang.org/x/net", "v0.17.0", ["BSD-3-Clause", "MIT"]),
        ],
        "hasMore": True,
        "cursor": "123456789",
    },
    {
        "dependencies": [
            real_dep("102", "github.com/pkg/errors", "v0.9.1", ["BSD-2-Clause"]),
            real_dep("102", "example.com/unlicensed", "v1.0.0", []),
        ],
        "hasMore": False,
        "cursor": "123456790",
    },
]
REF_PAGES = [
    {
        "dependencies": [
            ref_dep("a", 101, "github.com/pkg/errors", "v0.9.1", ["BSD-2-Clause"]),
            ref_dep("b", 101, "golang.org/x/net", "v0.17.0", ["BSD-3-Clause", "MIT"]),
            ref_dep("c", 102, "github.com/pkg/errors", "v0.9.1", ["BSD-2-Clause"]),
            ref_dep("d", 102, "example.com/unlicensed", "v1.0.0", []),
        ],
        "hasMore": False,
        "cursor": "9",
    }
]
REAL_REPOS = [
    {
        "repositorySummaries": [{"id": 101, "name": "org/a", "numDependencies": 2, "hasDependencyPathScan": True}],
        "hasMore": True,
        "cursor": 1,
    },
    {
        "repositorySummaries": [{"id": 102, "name": "org/b", "numDependencies": 2, "hasDependencyPathScan": False}],
        "hasMore": False,
        "cursor": 2,
    },
]


class Api:
    """Answers the dependency endpoints from scripted pages; records the request bodies."""

    def __init__(self, dependency_pages: list[dict], repository_pages: list[dict]) -> None:
        self.pages = {"dependencies": list(dependency_pages), "repositories": list(repository_pages)}
        self.bodies: dict[str, list[dict]] = {"dependencies": [], "repositories": []}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        kind = "repositories" if request.url.path.endswith("/repositories") else "dependencies"
        self.bodies[kind].append(json.loads(request.content))
        return httpx.Response(200, json=self.pages[kind].pop(0))


def client_for(api: Api) -> FindingsClient:
    return FindingsClient(
        "https://findings.example.com",
        "tok-value",
        deployment_id="42",
        deployment_slug="acme",
        transport=httpx.MockTransport(api),
        retry_policy=RetryPolicy(max_retries=0),  # a failure must show, not be retried
    )


def licence_counts(warehouse) -> dict[str, int]:
    table = dependency_tables(warehouse)["dependencies per licence"]
    return {str(k): int(v) for k, v in table["dependencies"].items()}


def test_a_real_dialect_inventory_loads_and_reports_like_the_reference(warehouse, tmp_path):
    real_api = Api(REAL_PAGES, REAL_REPOS)
    with client_for(real_api) as client:
        deps = extract_dependencies(client, warehouse)
        repos = extract_repositories(client, warehouse)

    assert (deps["dependencies"], deps["pages"]) == (4, 2)
    assert (repos["repositories"], repos["pages"]) == (2, 2)
    assert real_api.bodies["dependencies"][1]["cursor"] == "123456789"
    assert real_api.bodies["repositories"][1]["cursor"] == 1
    with warehouse.engine.connect() as conn:
        ids = sorted(conn.execute(select(dependencies.c.id)).scalars())
    assert ids == [
        "101|go.sum|gomod|github.com/pkg/errors|v0.9.1",
        "101|go.sum|gomod|golang.org/x/net|v0.17.0",
        "102|go.sum|gomod|example.com/unlicensed|v1.0.0",
        "102|go.sum|gomod|github.com/pkg/errors|v0.9.1",
    ]
    real_counts = licence_counts(warehouse)
    assert real_counts == {"BSD-2-Clause": 2, "BSD-3-Clause": 1, "MIT": 1, "(unknown)": 1}
    widespread = next(v for k, v in dependency_tables(warehouse).items() if k.startswith("most widespread"))
    assert widespread.loc["github.com/pkg/errors (gomod)", "repositories"] == 2

    # the same inventory in the reference's shape: the same report
    reference = make_warehouse(tmp_path / "reference.db")
    try:
        with client_for(Api(REF_PAGES, REAL_REPOS[:1])) as client:
            extract_dependencies(client, reference)
        assert licence_counts(reference) == real_counts
    finally:
        reference.engine.dispose()


def test_a_real_page_is_pruned_by_its_canonical_keys(warehouse):
    with client_for(Api(REAL_PAGES, [])) as client:
        extract_dependencies(client, warehouse)
    second = [{**REAL_PAGES[0], "hasMore": False}]
    with client_for(Api(second, [])) as client:
        result = extract_dependencies(client, warehouse)
    assert (result["dependencies"], result["removed"]) == (2, 2)


@pytest.mark.parametrize("missing", ["repositoryId", "package"])
def test_a_real_dependency_without_identity_is_still_refused(warehouse, missing):
    page = {"dependencies": [{k: v for k, v in REAL_PAGES[0]["dependencies"][0].items() if k != missing}]}
    with client_for(Api([{**page, "hasMore": False}], [])) as client, pytest.raises(ValueError, match="no usable id"):
        extract_dependencies(client, warehouse)
