"""Dependency inventory: pull dependencies and repository summaries into the warehouse, summarise them.

Both pulls are complete on every run (mixed cursor pagination, the cursor and page size in the JSON body);
rows the API no longer serves are removed afterwards, so the tables mirror the (filtered) inventory.

Dependencies arrive in the reference's shape (with ``id``) or the real service's (no id): a row's ``id`` is the
service's id or the canonical key of :mod:`findings_provider.client.dependency_identity`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Table, select

from findings_provider.governance.common import model_json, prune_missing, read_frame
from findings_provider.warehouse import dependency_repository_rows, dependency_rows
from findings_provider.warehouse.schema import dependencies, dependency_repositories, sbom_components

if TYPE_CHECKING:
    import pandas as pd

    from findings_provider.client import FindingsClient
    from findings_provider.warehouse import Warehouse

log = logging.getLogger(__name__)

UNKNOWN_LICENCE = "(unknown)"
#: Where a repository's licences come from in the licence table: its stored SBOM's components when it has any,
#: else its dependencies in the inventory.
SOURCE_SBOM = "SBOM"
SOURCE_INVENTORY = "dependency inventory"


def _mirror(
    warehouse: Warehouse, pages: Iterable[Any], table: Table, what: str, key: str, prune: bool
) -> dict[str, int]:
    """Upsert every page's items into ``table`` (one transaction per page), then drop rows the API no longer serves."""
    build_rows, upsert = {
        "dependencies": (dependency_rows, warehouse.upsert_dependencies),
        "dependency_repositories": (dependency_repository_rows, warehouse.upsert_dependency_repositories),
    }[table.name]
    seen: set[Any] = set()
    pages_read = written = 0
    for page in pages:
        rows = build_rows([model_json(item) for item in page.items])
        written += upsert(rows)
        seen.update(row[0] for row in rows)
        pages_read += 1
        log.info("pulled %d %s, page %d, %d total", len(rows), what, pages_read, len(seen))
    removed = prune_missing(warehouse, table, seen) if prune else 0
    if removed:
        log.info("removed %d %s the API no longer serves", removed, what)
    return {key: len(seen), "pages": pages_read, "written": written, "removed": removed}


def extract_dependencies(
    client: FindingsClient,
    warehouse: Warehouse,
    *,
    page_size: int | None = None,
    dependency_filter: dict[str, Any] | None = None,
    prune: bool = True,
) -> dict[str, int]:
    """Pull every dependency into ``dependencies``; return counts (dependencies, pages, written, removed)."""
    pages = client.pages(client.list_dependencies, page_size=page_size, dependency_filter=dependency_filter)
    return _mirror(warehouse, pages, dependencies, "dependencies", "dependencies", prune)


def extract_repositories(
    client: FindingsClient,
    warehouse: Warehouse,
    *,
    page_size: int | None = None,
    dependency_filter: dict[str, Any] | None = None,
    prune: bool = True,
) -> dict[str, int]:
    """Pull every repository summary into ``dependency_repositories``; return counts."""
    pages = client.pages(
        client.list_repositories_with_dependencies, page_size=page_size, dependency_filter=dependency_filter
    )
    return _mirror(warehouse, pages, dependency_repositories, "repository summaries", "repositories", prune)


# --- summary ------------------------------------------------------------------------------------------------


def _licences(column: str | None) -> list[str]:
    """Licences of one dependency from the ``license`` column (several are joined with ``, `` by the row builder).

    A NULL column (no licence sent, or an empty list) reads as NaN in the frame: the dependency counts under
    ``(unknown)``."""
    text = column if isinstance(column, str) else ""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    return parts or [UNKNOWN_LICENCE]


def _raw_field(raw: str | None, *keys: str) -> Any:
    if not raw:
        return None
    data = orjson.loads(raw)
    return next((data[k] for k in keys if data.get(k) is not None), None)


def _repository_key(value: Any) -> str | None:
    """A repository id as text (``dependencies`` keeps it as text, ``sbom_components`` as a number)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = str(value).strip()
    return str(int(float(text))) if text.replace(".", "", 1).isdigit() else text or None


def licence_items(warehouse: Warehouse, deps: pd.DataFrame | None = None, *, inventory: bool = True) -> pd.DataFrame:
    """One row per counted item and licence: ``item`` (``sbom:<id>`` or ``dependency:<id>``), ``repository_id``
    (text), ``licence``, ``source``.

    A repository with components in ``sbom_components`` (its newest completed SBOM) is counted from them
    (:data:`SOURCE_SBOM`); any other repository from its dependencies (:data:`SOURCE_INVENTORY`, ``deps``: the
    frame of ``dependencies`` with ``id``, ``license``, ``repository_id``; read here when None). ``inventory``
    False: the SBOM components only.
    """
    import pandas as pd

    c = sbom_components.c
    sbom = read_frame(warehouse, select(c.id, c.repository_id, c.licences))
    sbom = pd.DataFrame({"item": [f"sbom:{i}" for i in sbom["id"]],
                         "repository_id": [_repository_key(r) for r in sbom["repository_id"]],
                         "licence": [_licences(v) for v in sbom["licences"]], "source": SOURCE_SBOM})
    frames = [sbom]
    if inventory:
        if deps is None:
            d = dependencies.c
            deps = read_frame(warehouse, select(d.id, d.license, d.repository_id))
        with_sbom = set(sbom["repository_id"].dropna())
        repos = [_repository_key(r) for r in deps["repository_id"]]
        keep = [r is None or r not in with_sbom for r in repos]
        frames.append(pd.DataFrame({
            "item": [f"dependency:{i}" for i, k in zip(deps["id"], keep, strict=True) if k],
            "repository_id": [r for r, k in zip(repos, keep, strict=True) if k],
            "licence": [_licences(v) for v, k in zip(deps["license"], keep, strict=True) if k],
            "source": SOURCE_INVENTORY}))
    items = pd.concat(frames, ignore_index=True)
    return items.explode("licence") if not items.empty else items


def per_licence(items: pd.DataFrame, count: str = "dependencies") -> pd.DataFrame:
    """Items (``count``) and repositories per licence of :func:`licence_items`, and the ``source`` they came
    from (``SBOM``, ``dependency inventory``, or both joined with ``+``); most items first."""
    import pandas as pd

    if items.empty:
        return pd.DataFrame({count: pd.Series(dtype=int), "repositories": pd.Series(dtype=int),
                             "source": pd.Series(dtype=str)}, index=pd.Index([], name="licence"))
    table = (
        items.groupby("licence")
        .agg(**{count: ("item", "nunique")}, repositories=("repository_id", "nunique"),
             source=("source", lambda v: " + ".join(sorted(set(v)))))
        .sort_values([count, "repositories"], ascending=False)
    )
    table.index.name = "licence"
    return table


def dependency_tables(warehouse: Warehouse, top: int = 20) -> dict[str, pd.DataFrame]:
    """Licences (from each repository's SBOM when stored, else its inventory: :func:`licence_items`), the most
    widespread dependencies and the largest repositories, as report tables."""
    import pandas as pd

    d = dependencies.c
    deps = read_frame(warehouse, select(d.id, d.name, d.version, d.ecosystem, d.license, d.repository_id, d.raw))
    r = dependency_repositories.c
    repos = read_frame(warehouse, select(r.id, r.name, r.num_dependencies, r.has_dependency_path_scan))

    if deps.empty:
        widespread = pd.DataFrame(
            {"repositories": pd.Series(dtype=int), "occurrences": pd.Series(dtype=int), "versions": []}
        )
    else:
        missing_repo = deps["repository_id"].isna()
        if missing_repo.any():
            deps.loc[missing_repo, "repository_id"] = [
                _raw_field(raw, "repositoryId", "repository_id") for raw in deps.loc[missing_repo, "raw"]
            ]
        deps["ecosystem"] = deps["ecosystem"].fillna("")
        widespread = (
            deps.groupby(["name", "ecosystem"])
            .agg(
                repositories=("repository_id", "nunique"),
                occurrences=("id", "size"),
                versions=("version", lambda v: ", ".join(sorted(set(map(str, v.dropna())))[:6])),
            )
            .sort_values(["repositories", "occurrences"], ascending=False)
            .head(top)
        )
        widespread.index = [f"{n} ({e})" if e else str(n) for n, e in widespread.index]
        widespread.index.name = "dependency"
    items = licence_items(warehouse, deps)
    licences = per_licence(items)
    from_sbom = int(items.loc[items["source"] == SOURCE_SBOM, "repository_id"].nunique()) if len(items) else 0
    largest = (
        repos.sort_values("num_dependencies", ascending=False)
        .head(top)
        .set_index("name")[["id", "num_dependencies", "has_dependency_path_scan"]]
    )
    return {
        "dependencies per licence": licences,
        f"most widespread dependencies (top {top}, by repositories)": widespread,
        f"repositories with the most dependencies (top {top})": largest,
        "totals": pd.DataFrame(
            {
                "value": [
                    len(deps),
                    int(deps["name"].nunique()) if not deps.empty else 0,
                    len(repos),
                    int(repos["has_dependency_path_scan"].fillna(False).astype(bool).sum()) if len(repos) else 0,
                    from_sbom,
                ]
            },
            index=pd.Index(
                [
                    "dependencies",
                    "distinct packages",
                    "repositories",
                    "repositories with dependency path scan",
                    "repositories whose licences come from their SBOM",
                ],
                name="total",
            ),
        ),
    }
