"""Projects: list them (offset pagination), toggle managed scans, add and remove tags (4.9, 4.12, 4.13).

Project names contain a slash (``org/repo``); routes accept it raw or percent-encoded.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, StringConstraints, ValidationError
from sqlalchemy import Connection, select, update

from .. import schema, timefmt
from ..dialect import REAL
from ..errors import invalid, not_found
from ..models import ManagedScanBody
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


async def _tags_in_body(request: Request) -> list[str]:
    """Tags sent as a ``{"tags": [...]}`` DELETE body (as one sample client does); none when there is no body."""
    raw = await request.body()
    if not raw.strip():
        return []
    try:
        return TagsBody.model_validate_json(raw).tags
    except ValidationError as exc:
        raise invalid("tags", "send tags as repeated query keys or a JSON body {\"tags\": [...]}") from exc


@router.delete("/deployments/{deploymentSlug}/projects/{projectName:path}/tags", name="tags_remove",
               operation_id="tags_remove", summary="Remove tags from project")
def remove_tags(projectName: str,
                tags: list[str] = Query([], description="tags to remove, repeated keys"),
                body_tags: list[str] = Depends(_tags_in_body),
                emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Remove tags given as repeated ``tags`` query keys or in a ``{"tags": [...]}`` body; tags the project does
    not have are ignored."""
    tags = [*tags, *body_tags]
    if not tags:
        raise invalid("tags", "give the tags to remove as repeated query keys or a JSON body {\"tags\": [...]}")
    with emulator.transaction() as connection:
        current = orjson.loads(_project(connection, projectName).tags)
        kept = [tag for tag in current if tag not in set(tags)]
        return _set(connection, projectName, tags=orjson.dumps(kept).decode())
