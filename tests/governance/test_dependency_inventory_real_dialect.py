"""The dependency inventory loads pages in the real service's dialect (no dependency ids, digit-string cursors,
``package {name, versionSpecifier}``, ``definedAt``) and reports the same licence counts as for the reference shape.

Before the canonical key, the first real page failed with "dependency has no usable id".
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.governance.dependency_inventory import (
    dependency_tables,
    extract_dependencies,
    extract_repositories,
)
from findings_provider.warehouse.schema import dependencies
from fixtures import make_warehouse
from sqlalchemy import select


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
