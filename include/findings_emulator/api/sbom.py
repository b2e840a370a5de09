"""SBOM export: start a job, poll it, download the CycloneDX document from the link the finished job gives.

The download link is served by this emulator (``/downloads/sbom/...``), carries its own expiring key and needs no
API token, like the short-lived storage link the real service hands out.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import select, union

from .. import schema
from ..dialect import REAL
from ..errors import ApiError, invalid, not_found
from ..models import DependencyFilter, SbomExportBody
from ..responses import OrjsonResponse, raw_json
from ..sbom import CYCLONEDX_VERSIONS, DOWNLOAD_PATH, SbomJob, component_type, cyclonedx
from ..state import Emulator
from .dependencies import matching_dependencies
from .deps import by_id, get_emulator

router = APIRouter()
download_router = APIRouter()


def _branches(emulator: Emulator, repository_id: int) -> set[str]:
    """Branches the repository is known to have: its primary and default ones, and those of findings and scans."""
    t, s = schema.findings.c, schema.scans.c
    with emulator.transaction() as connection:
        refs = union(select(t.ref).where(t.repo_id == repository_id).distinct(),
                     select(s.branch).where(s.repository_id == repository_id).distinct())
        return set(connection.execute(refs).scalars())


@router.post("/deployments/{deploymentId}/sbom/export", name="sbom_export", operation_id="sbom_export",
             summary="Start an SBOM export")
def start_export(body: SbomExportBody, emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """Start exporting the repository's dependencies at ``ref`` (its primary branch when absent) as CycloneDX;
    answers ``{"taskToken"}``. An unknown ``ref`` makes the job fail, as a failed export would."""
    try:
        kind = component_type(body.metadataComponentType)
    except ValueError as exc:
        raise invalid("metadataComponentType", str(exc)) from exc
    repository_id = int(body.repositoryId)
    r = schema.repositories.c
    with emulator.transaction() as connection:
        repo = connection.execute(select(r.id, r.primary_branch, r.default_branch)
                                  .where(r.id == repository_id)).first()
    if repo is None:
        raise not_found(f"repository {body.repositoryId}")
    ref = body.ref or repo.primary_branch
    known = _branches(emulator, repository_id) | {repo.primary_branch, repo.default_branch}
    error = None if ref in known else f"ref {ref!r} not found in repository {repository_id}"
    supplier = body.metadataSupplier.cyclonedx() if body.metadataSupplier else None
    job = emulator.sbom.start(repository_id, ref, CYCLONEDX_VERSIONS[body.formatVersion.cyclonedxVersion], kind,
                              supplier, error)
    return OrjsonResponse({"taskToken": job.token})


def _document(emulator: Emulator, job: SbomJob) -> bytes:
    r = schema.repositories.c
    with emulator.transaction() as connection:
        repo = connection.execute(select(r.name, r.url).where(r.id == job.repository_id)).first()
        deps = matching_dependencies(connection, DependencyFilter(repositoryId=[job.repository_id]))
    if repo is None:  # deleted while the job ran
        return b""
    for dep in deps:
        dep["licenses"] = [lic for lic in dep["licenses"].strip("|").split("|") if lic]
    return orjson.dumps(cyclonedx(job, repo.name, repo.url, deps, time.time()))


@router.get("/deployments/{deploymentId}/sbom/export/{taskToken}", name="sbom_status", operation_id="sbom_status",
            summary="Poll an SBOM export")
def poll_export(taskToken: str, request: Request, emulator: Emulator = Depends(by_id)) -> OrjsonResponse:
    """``{"status", "downloadUrl", "errorMessage"}``: in progress until the job's last poll, then completed (with a
    link) or failed (with a message). Unset strings are ``""`` in the real dialect (proto-JSON), null otherwise."""
    job = emulator.sbom.get(taskToken)
    if job is None:
        raise not_found(f"SBOM export task {taskToken!r}")
    if emulator.sbom.poll(job):
        job.document = _document(emulator, job)
        if not job.document:
            job.error = f"repository {job.repository_id} no longer exists"
    unset = "" if emulator.config.dialect == REAL else None
    url: str | None = unset
    if job.status == "SBOM_EXPORT_STATUS_COMPLETED":
        base = str(request.base_url).rstrip("/")
        url = f"{base}{DOWNLOAD_PATH}/{job.token}?expires={int(job.expires_at)}&signature={job.key}"
    return OrjsonResponse({"status": job.status, "downloadUrl": url,
                           "errorMessage": job.error if job.status == "SBOM_EXPORT_STATUS_FAILED" else unset})


@download_router.get(DOWNLOAD_PATH + "/{taskToken}", name="sbom_download", include_in_schema=False)
def download(taskToken: str, signature: str | None = Query(None), expires: str | None = Query(None),
             emulator: Emulator = Depends(get_emulator)) -> Any:
    """The finished document: no API token needed (one that is sent is ignored; the request log records whether
    one was); a missing key is 401, a wrong or expired one 403, an unknown task 404."""
    del expires  # informative, like a storage link's; the key's own expiry decides
    job = emulator.sbom.get(taskToken)
    if job is None:
        raise not_found(f"SBOM document {taskToken!r}")
    refusal = emulator.sbom.check_key(job, signature, time.time())
    if refusal is not None:
        raise ApiError(401 if signature is None else 403, f"SBOM download refused: {refusal}", "signature")
    job.downloads += 1
    assert job.document is not None
    return raw_json(job.document)
