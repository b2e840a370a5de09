"""Dependency inventory: list dependencies (4.1), repositories with dependencies (4.2) and the lockfiles of one
repository, mixed pagination."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from fastapi import APIRouter, Body, Depends
from sqlalchemy import Connection, or_, select

from .. import schema
from ..dialect import REAL, dependency_to_real
from ..errors import not_found
from ..models import DependenciesBody, DependencyFilter, LockfilesBody, PackageFilter, RepositoriesBody
from ..responses import OrjsonResponse
from ..state import Emulator
from .deps import by_id

router = APIRouter()
SQLITE_INT_MAX = 2**63 - 1


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _package_matches(rule: PackageFilter, dep: dict[str, Any]) -> bool:
    if rule.name is not None:
        if rule.exactNameMatch and dep["name"] != rule.name:
            return False
        if not rule.exactNameMatch and rule.name.lower() not in dep["name"].lower():
            return False
    version = _version_key(dep["version"])
    return ((rule.exactVersion is None or dep["version"] == rule.exactVersion)
            and (rule.versionLowerBound is None or version >= _version_key(rule.versionLowerBound))
            and (rule.versionUpperBound is None or version <= _version_key(rule.versionUpperBound)))


def matching_dependencies(connection: Connection, flt: DependencyFilter | None) -> list[dict[str, Any]]:
    """Dependencies matching the filter, by id. Package filters are alternatives (any may match)."""
    d = schema.dependencies.c
    query = select(schema.dependencies).order_by(d.id)
    if flt is not None:
        if flt.license:
            query = query.where(or_(*(d.licenses.contains(f"|{lic}|", autoescape=True) for lic in flt.license)))
        for value, col in ((flt.lockfilePath, d.lockfile_path), (flt.name, d.name), (flt.version, d.version)):
            if value is not None:
                query = query.where(col == value)
        if flt.repositoryId:
            query = query.where(d.repository_id.in_(flt.repositoryId))
        if flt.ecosystem:
            ecosystems = [flt.ecosystem] if isinstance(flt.ecosystem, str) else flt.ecosystem
            query = query.where(d.ecosystem.in_([e.lower() for e in ecosystems]))
        if flt.transitivity:  # DIRECT, TRANSITIVE, UNKNOWN_TRANSITIVITY (either case)
            query = query.where(d.transitivity.in_(
                [t.lower().removesuffix("_transitivity") for t in flt.transitivity]))
    rows = [dict(row) for row in connection.execute(query).mappings()]
    if flt is not None and flt.packageFilters:
        rows = [row for row in rows if any(_package_matches(rule, row) for rule in flt.packageFilters)]
    return rows


def _render(dep: dict[str, Any]) -> dict[str, Any]:
    return {"id": str(dep["id"]), "name": dep["name"], "version": dep["version"], "ecosystem": dep["ecosystem"],
            "lockfilePath": dep["lockfile_path"], "licenses": dep["licenses"].strip("|").split("|"),
            "repositoryId": dep["repository_id"], "transitivity": dep["transitivity"]}


@router.post("/deployments/{deploymentId}/dependencies", name="dependencies", operation_id="dependencies",
             summary="List dependencies")
def list_dependencies(body: DependenciesBody = Body(default_factory=DependenciesBody),
                      emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """A page of dependencies after ``cursor`` (the last id of the previous page)."""
    after = int(body.cursor) if body.cursor else 0
    with emulator.transaction() as connection:
        deps = [d for d in matching_dependencies(connection, body.dependencyFilter) if d["id"] > after]
        r = schema.repositories.c
        repos = {row.id: row for row in connection.execute(select(r.id, r.url, r.primary_branch))}
    page = deps[: body.pageSize]
    cursor = str(page[-1]["id"]) if page else (body.cursor or "")
    if emulator.config.dialect == REAL:
        items = [dependency_to_real(d, repos[d["repository_id"]].url, repos[d["repository_id"]].primary_branch)
                 for d in page]
    else:
        items = [_render(d) for d in page]
    return OrjsonResponse({"dependencies": items, "cursor": cursor,
                           "hasMore": len(deps) > len(page)})


@router.post("/deployments/{deploymentId}/dependencies/repositories", name="dependency_repositories",
             operation_id="dependency_repositories", summary="List repositories with dependencies")
def list_repositories(body: RepositoriesBody = Body(default_factory=RepositoriesBody),
                      emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """A page of repositories that have matching dependencies, after ``cursor`` (the last repository id)."""
    after = body.cursor or 0
    with emulator.transaction() as connection:
        counts = Counter(d["repository_id"] for d in matching_dependencies(connection, body.dependencyFilter))
        r = schema.repositories.c
        repos = connection.execute(
            select(r.id, r.name, r.has_dependency_path_scan)
            .where(r.id.in_(list(counts)), r.id > after).order_by(r.id)
        ).all()
    page = repos[: body.pageSize]
    return OrjsonResponse({
        "repositorySummaries": [{"id": repo.id, "name": repo.name, "numDependencies": counts[repo.id],
                                 "hasDependencyPathScan": bool(repo.has_dependency_path_scan)} for repo in page],
        "cursor": page[-1].id if page else after,
        "hasMore": len(repos) > len(page),
    })


@router.post("/deployments/{deploymentId}/dependencies/repositories/{repositoryId}/lockfiles", name="lockfiles",
             operation_id="lockfiles", summary="List lockfiles in a repository")
def list_lockfiles(repositoryId: int, body: LockfilesBody = Body(default_factory=LockfilesBody),
                   emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """A page of the repository's lockfiles with matching dependencies, by path, each with how many it lists;
    ``cursor`` is how many lockfiles earlier pages held (a number, like the repositories' cursor)."""
    flt = (body.dependencyFilter or DependencyFilter()).model_copy(update={"repositoryId": [repositoryId]})
    with emulator.transaction() as connection:
        r = schema.repositories.c
        if repositoryId > SQLITE_INT_MAX or connection.execute(
                select(r.id).where(r.id == repositoryId)).first() is None:
            raise not_found(f"repository {repositoryId}")
        counts = Counter(d["lockfile_path"] for d in matching_dependencies(connection, flt))
    paths = sorted(counts)
    start = int(body.cursor or 0)
    page = paths[start: start + body.pageSize]
    return OrjsonResponse({
        "lockfileSummaries": [{"lockfilePath": path, "numDependencies": counts[path]} for path in page],
        "hasMore": start + len(page) < len(paths),
        "cursor": start + len(page),
    })
