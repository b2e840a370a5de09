"""Projects: list them (offset pagination), read, change and delete one, toggle managed scans, add and remove
tags (4.9, 4.12, 4.13 and the real service's project operations).

Project names contain a slash (``org/repo``); routes accept it raw or percent-encoded. The routes with a suffix
after the name (``/tags``, ``/managed-scan``) are declared before the bare ``/projects/{projectName}`` ones, so
they win.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, StringConstraints, ValidationError
from sqlalchemy import Connection, Integer, delete, select, update

from .. import schema, timefmt
from ..dialect import REAL
from ..errors import invalid, not_found
from ..models import ManagedScanBody, ProjectPatchBody
from ..responses import OrjsonResponse
from ..state import Emulator
from .deps import by_slug

router = APIRouter()
Tag = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class TagsBody(BaseModel):
    """Tags as the real service takes them: ``{"tags": [...]}`` (other keys, such as the path's, ignored)."""

    tags: list[Tag]


def render_project(row: Any) -> dict[str, Any]:
    """A project (reference 2.14)."""
    return {
        "id": row.id, "name": row.name, "tags": orjson.loads(row.tags),
        "created_at": timefmt.iso_z(row.created_at), "default_branch": row.default_branch,
        "primary_branch": row.primary_branch,
        "latest_scan_at": timefmt.iso_z(row.latest_scan_at) if row.latest_scan_at else None, "url": row.url,
        "managed_scan_config": {"diff_scan": {"enabled": bool(row.diff_scan)},
                                "full_scan": {"enabled": bool(row.full_scan)}},
    }


def _project(connection: Connection, name: str) -> Any:
    row = connection.execute(select(schema.repositories).where(schema.repositories.c.name == name)).first()
    if row is None:
        raise not_found(f"project {name!r}")
    return row


def _set(connection: Connection, name: str, **values: Any) -> OrjsonResponse:
    repo = schema.repositories
    connection.execute(update(repo).where(repo.c.name == name).values(**values))
    return OrjsonResponse({"project": render_project(_project(connection, name))})


@router.get("/deployments/{deploymentSlug}/projects", name="projects", operation_id="projects",
            summary="List all projects")
def list_projects(page: int = Query(0, ge=0, le=2**32 - 1), page_size: int = Query(100, ge=1, le=1000),
                  emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """A page of projects by name; a page shorter than ``page_size`` is the last. The real dialect leaves
    ``managed_scan_config`` out of list items."""
    repo = schema.repositories
    with emulator.transaction() as connection:
        rows = connection.execute(
            select(repo).order_by(repo.c.name).offset(page * page_size).limit(page_size)).all()
    projects = [render_project(row) for row in rows]
    if emulator.config.dialect == REAL:
        for project in projects:
            del project["managed_scan_config"]
    return OrjsonResponse({"projects": projects})


@router.patch("/deployments/{deploymentSlug}/projects/{projectName:path}/managed-scan", name="managed_scan",
              operation_id="managed_scan", summary="Toggle managed scans for a project")
def set_managed_scan(projectName: str, body: ManagedScanBody,
                     emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Switch diff and/or full managed scans on or off."""
    if body.diff_scan is None and body.full_scan is None:
        raise invalid("diff_scan", "give diff_scan and/or full_scan, each as {\"enabled\": true|false}")
    values = {name: toggle.enabled for name, toggle in (("diff_scan", body.diff_scan),
                                                        ("full_scan", body.full_scan)) if toggle is not None}
    with emulator.transaction() as connection:
        _project(connection, projectName)
        return _set(connection, projectName, **values)


@router.put("/deployments/{deploymentSlug}/projects/{projectName:path}/tags", name="tags_add",
            operation_id="tags_add", summary="Add tags to project")
def add_tags(projectName: str,
             tags: list[Tag] | TagsBody = Body(..., description="tags to add: a JSON array or {\"tags\": [...]}"),
             emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Add tags (a JSON array in the body, or the real service's ``{"tags": [...]}``); tags the project has
    already are kept once."""
    if isinstance(tags, TagsBody):
        tags = tags.tags
    with emulator.transaction() as connection:
        current = orjson.loads(_project(connection, projectName).tags)
        merged = list(dict.fromkeys([*current, *tags]))
        return _set(connection, projectName, tags=orjson.dumps(merged).decode())


async def _tags_in_body(request: Request) -> list[str] | None:
    """Tags sent as a DELETE body, ``{"tags": [...]}`` (as one sample client does) or a bare JSON array; ``[]``
    when there is no body, ``None`` when the body is not one of those shapes (the caller decides)."""
    raw = await request.body()
    if not raw.strip():
        return []
    try:
        parsed = orjson.loads(raw)
        if isinstance(parsed, list):
            return TagsBody.model_validate({"tags": parsed}).tags
        return TagsBody.model_validate(parsed).tags
    except (orjson.JSONDecodeError, ValidationError):
        return None


@router.delete("/deployments/{deploymentSlug}/projects/{projectName:path}/tags", name="tags_remove",
               operation_id="tags_remove", summary="Remove tags from project")
def remove_tags(projectName: str,
                tags: list[str] = Query([], description="tags to remove, repeated keys"),
                body_tags: list[str] | None = Depends(_tags_in_body),
                emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Remove tags given as repeated ``tags`` query keys and/or in a ``{"tags": [...]}`` (or bare array) body;
    tags the project does not have are ignored. A body of another shape is ignored when the query names tags."""
    if body_tags is None and not tags:
        raise invalid("tags", "send tags as repeated query keys or a JSON body {\"tags\": [...]}")
    tags = [*tags, *(body_tags or [])]
    if not tags:
        raise invalid("tags", "give the tags to remove as repeated query keys or a JSON body {\"tags\": [...]}")
    with emulator.transaction() as connection:
        current = orjson.loads(_project(connection, projectName).tags)
        kept = [tag for tag in current if tag not in set(tags)]
        return _set(connection, projectName, tags=orjson.dumps(kept).decode())


@router.get("/deployments/{deploymentSlug}/projects/{projectName:path}", name="project_get",
            operation_id="project_get", summary="Get a project")
def get_project(projectName: str, emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """One project, ``{"project": Project}`` (with ``managed_scan_config`` in both dialects)."""
    with emulator.transaction() as connection:
        return OrjsonResponse({"project": render_project(_project(connection, projectName))})


@router.patch("/deployments/{deploymentSlug}/projects/{projectName:path}", name="project_update",
              operation_id="project_update", summary="Update a project")
def update_project(projectName: str, body: ProjectPatchBody,
                   emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Replace the tags, set the primary branch and/or switch managed scans; answers the project. A new primary
    branch changes which occurrence ``dedup=true`` keeps."""
    values: dict[str, Any] = {}
    if body.tags is not None:
        values["tags"] = orjson.dumps(list(dict.fromkeys(body.tags))).decode()
    if body.primary_branch is not None:
        values["primary_branch"] = body.primary_branch
    config = body.managed_scan_config
    if config is not None:
        values.update({name: toggle.enabled for name, toggle in (("diff_scan", config.diff_scan),
                                                                   ("full_scan", config.full_scan))
                       if toggle is not None})
    if not values:
        raise invalid("body", "give tags, primary_branch and/or managed_scan_config")
    with emulator.change_findings() as connection:
        project = _project(connection, projectName)
        if body.primary_branch is not None and body.primary_branch != project.primary_branch:
            t = schema.findings.c
            connection.execute(update(schema.findings).where(t.repo_id == project.id)
                               .values(is_primary=(t.ref == body.primary_branch).cast(Integer)))
        return _set(connection, projectName, **values)


@router.delete("/deployments/{deploymentSlug}/projects/{projectName:path}", name="project_delete",
               operation_id="project_delete", summary="Delete a project")
def delete_project(projectName: str, emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Delete the project and, as the service does, its findings (every issue type), scans and dependencies;
    answers ``{"project_name": ...}``. Tickets stay in the tracker."""
    t = schema.findings.c
    with emulator.change_findings() as connection:
        repo_id = _project(connection, projectName).id
        connection.execute(delete(schema.finding_bodies).where(
            schema.finding_bodies.c.id.in_(select(t.id).where(t.repo_id == repo_id))))
        connection.execute(delete(schema.findings).where(t.repo_id == repo_id))
        connection.execute(delete(schema.scans).where(schema.scans.c.repository_id == repo_id))
        connection.execute(delete(schema.dependencies).where(schema.dependencies.c.repository_id == repo_id))
        connection.execute(delete(schema.repositories).where(schema.repositories.c.id == repo_id))
    return OrjsonResponse({"project_name": projectName})
