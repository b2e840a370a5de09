"""Admin routes under ``/_emulator`` (loopback clients only, enforced by the gateway; no token needed)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, insert, select, update

from .. import schema, timefmt
from ..errors import ApiError, invalid
from ..faults import FaultSpec
from ..generator.world import SCAN_ID_BASE
from ..mutations import rewrite_bodies
from ..responses import OrjsonResponse
from ..rows import STATE_OF_STATUS
from ..scans import FINISHED, advance, render_summary
from ..state import Emulator
from .deps import get_emulator

router = APIRouter(prefix="/_emulator", include_in_schema=False)


class ScanCreate(BaseModel):
    """A scan to add, e.g. a running one that finishes after ``finish_after`` seconds."""

    model_config = ConfigDict(extra="forbid")

    repository_id: int | None = None
    branch: str | None = None
    status: str = "SCAN_STATUS_RUNNING"
    finish_after: float | None = Field(None, ge=0)
    finish_after_reads: int | None = Field(
        None, ge=1, description="a running or pending scan finishes when its details have been read this many times")
    final_status: Literal["SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR"] = "SCAN_STATUS_COMPLETED"
    exit_code: int | None = None
    started_ago: float = Field(0.0, ge=0, description="seconds between the scan's start and now")
    is_full_scan: bool = True
    products: list[str] = Field(default_factory=lambda: ["PRODUCT_SAST", "PRODUCT_SCA"])


@router.get("/health")
def health(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Ready: the data is generated and the API answers. ``pid`` tells a starter that the answer is its process's."""
    config = emulator.config
    return OrjsonResponse({"ok": True, "deployment_id": config.deployment_id,
                           "deployment_slug": config.deployment_slug, "pid": os.getpid()})


@router.get("/requests")
def list_requests(since: int | None = Query(None, ge=0),
                  emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """API requests received after sequence number ``since`` (all when absent)."""
    return OrjsonResponse({"requests": emulator.requests.since(since)})


@router.delete("/requests")
def clear_requests(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Forget the logged requests."""
    emulator.requests.clear()
    return OrjsonResponse({"ok": True})


@router.post("/reset")
def reset(overrides: dict[str, Any] | None = Body(None),
          emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Regenerate the data (optionally with other seed, volumes or switches); clears the log and faults."""
    try:
        timings = emulator.reset(overrides or {})
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        raise ApiError(400, str(exc), field) from exc
    return OrjsonResponse({"ok": True, "load": timings})


@router.post("/faults")
def add_fault(spec: FaultSpec, emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Add a fault rule (see the README for the fields); returns its id."""
    return OrjsonResponse({"id": emulator.faults.add(spec)})


@router.get("/faults")
def list_faults(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """The fault rules and what is left of them."""
    return OrjsonResponse({"faults": emulator.faults.describe()})


@router.delete("/faults")
def clear_faults(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Remove every fault rule."""
    emulator.faults.clear()
    return OrjsonResponse({"ok": True})


@router.post("/scans")
def create_scan(spec: ScanCreate = Body(default_factory=ScanCreate),
                emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Add a scan in any status (unknown ones included); a running or pending one with ``finish_after`` moves
    to ``final_status`` when that time has passed, one with ``finish_after_reads`` when its details have been read
    that many times (``scan_get``: a test's scan then finishes while a poller watches it, however slowly the poller
    starts)."""
    now = time.time()
    started = timefmt.to_micros(now - spec.started_ago)
    finished = spec.status in FINISHED
    outcome = spec.status if finished else spec.final_status
    exit_code = spec.exit_code if spec.exit_code is not None else 0 if outcome == "SCAN_STATUS_COMPLETED" else 2
    repos = schema.repositories.c
    with emulator.transaction() as connection:
        query = select(repos.id, repos.name, repos.url, repos.primary_branch).order_by(repos.id)
        if spec.repository_id is not None:
            query = query.where(repos.id == spec.repository_id)
        repo = connection.execute(query).first()
        if repo is None:
            raise invalid("repository_id", f"no repository with id {spec.repository_id}")
        scan_id = connection.execute(
            select(func.coalesce(func.max(schema.scans.c.id) + 1, SCAN_ID_BASE))).scalar_one()
        branch = spec.branch or repo.primary_branch
        commit = f"{scan_id:040x}"
        meta = {"branch": branch, "commit": commit, "config": "semgrep ci", "repo_url": repo.url,
                "ci_job_url": f"{repo.url}/actions/runs/{scan_id}", "repository": repo.name,
                "commit_title": {"value": "Scan added through the emulator's admin route"},
                "pull_request_id": None, "pull_request_title": None, "commit_author_name": "Emulator",
                "commit_author_image_url": None, "commit_author_email": "emulator@acme.example",
                "commit_author_username": "emulator", "pull_request_author_username": None,
                "pull_request_author_image_url": None}
        connection.execute(insert(schema.scans).values(
            id=scan_id, repository_id=repo.id, branch=branch, commit=commit, started_at=started,
            completed_at=now if finished else None, status=spec.status,
            exit_code=exit_code if finished else None, is_full_scan=spec.is_full_scan,
            products="|" + "|".join(spec.products) + "|", code_count=0, sca_count=0, secrets_count=0,
            total_time=spec.started_ago if finished else None, has_logs=True, finish_after=spec.finish_after,
            reads_left=None if finished else spec.finish_after_reads,
            final_status=spec.final_status, final_exit_code=exit_code,
            meta=orjson.dumps(meta).decode()))
        advance(connection, now)
        row = connection.execute(select(schema.scans).where(schema.scans.c.id == scan_id)).one()
    return OrjsonResponse(render_summary(row, emulator.config.deployment_id, emulator.config.dialect == "real"))


@router.get("/tickets")
def list_tickets(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Every ticket created through the API since the last reset (generated ones are not listed)."""
    with emulator.transaction() as connection:
        rows = connection.execute(select(schema.tickets).order_by(schema.tickets.c.id)).all()
    return OrjsonResponse({"tickets": [
        {"id": row.id, "external_slug": row.external_slug, "url": row.url, "issue_type": row.issue_type,
         "repository": row.repository, "rule_name": row.rule_name, "issue_ids": orjson.loads(row.issue_ids),
         "tracker_project_id": row.tracker_project_id, "created_at": row.created_at}
        for row in rows
    ]})


class SbomSettings(BaseModel):
    """How new SBOM export jobs behave: ``polls`` (the poll that finishes a job), ``url_ttl`` (seconds a download
    link works), ``fail_next`` (how many next jobs fail), ``fail_repositories`` (repositories whose jobs fail;
    replaces the set), ``error_message`` (a failed job's message)."""

    model_config = ConfigDict(extra="forbid")

    polls: int | None = Field(None, ge=1)
    url_ttl: float | None = Field(None, gt=0)
    fail_next: int | None = Field(None, ge=0)
    fail_repositories: list[int] | None = None
    error_message: str | None = Field(None, min_length=1)


@router.get("/sbom")
def sbom_jobs(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """The SBOM export settings and every job since the last reset (polls, status, downloads)."""
    return OrjsonResponse({**emulator.sbom.settings(), "jobs": [job.describe() for job in emulator.sbom.jobs()]})


@router.post("/sbom")
def set_sbom(settings: SbomSettings, emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Change how new SBOM export jobs behave (until the next reset); answers the settings."""
    jobs = emulator.sbom
    if settings.polls is not None:
        jobs.polls = settings.polls
    if settings.url_ttl is not None:
        jobs.url_ttl = settings.url_ttl
    if settings.fail_next is not None:
        jobs.fail_next = settings.fail_next
    if settings.fail_repositories is not None:
        jobs.fail_repositories = set(settings.fail_repositories)
    if settings.error_message is not None:
        jobs.error_message = settings.error_message
    return OrjsonResponse(jobs.settings())


class PoliciesSwitch(BaseModel):
    """Whether the deployment's policy API is retired (it migrated to the newer policy system)."""

    model_config = ConfigDict(extra="forbid")

    retired: bool


@router.post("/policies")
def switch_policies(switch: PoliciesSwitch, emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Retire the policy API now (every policy endpoint answers ``410 Gone``, ``DEPLOYMENT_MIGRATED``), or bring it
    back, without regenerating anything: a deployment that migrates while a client works. Stays until changed
    (here or by a reset's ``retired_policies``)."""
    emulator.config = dataclasses.replace(emulator.config, retired_policies=switch.retired)
    return OrjsonResponse({"retired": emulator.config.retired_policies})


@router.get("/stats")
def stats(emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Row counts per table (findings per issue type, scans per status) and the last load's timings."""
    counts: dict[str, Any] = {}
    with emulator.transaction() as connection:
        advance(connection)
        for table in (schema.repositories, schema.policies, schema.rules, schema.dependencies, schema.tickets):
            counts[str(table.name)] = connection.execute(select(func.count()).select_from(table)).scalar_one()
        t, s = schema.findings.c, schema.scans.c
        for key, column in (("findings", t.issue_type), ("scans", s.status)):
            counts[key] = {row[0]: row[1] for row in connection.execute(select(column, func.count()).group_by(column))}
    return OrjsonResponse({"counts": counts, "load": emulator.load_timings,
                           "requests_logged": len(emulator.requests.since())})


class PersonAction(BaseModel):
    """What a person does to one finding in the service's UI: triage it, give or remove its ticket, or (as a
    scan would) reintroduce it."""

    model_config = ConfigDict(extra="forbid")

    triage_state: Literal["ignored", "reviewing", "fixing", "reopened"] | None = None
    triage_reason: str | None = None
    status: Literal["open", "fixed", "ignored", "reviewing", "fixing"] | None = None
    ticket: Literal["create", "remove"] | None = None
    reintroduce: bool = False


#: The status a triage state leaves behind (as bulk triage does).
_STATUS_OF_TRIAGE = {"ignored": "ignored", "reviewing": "reviewing", "fixing": "fixing", "reopened": "open"}


@router.post("/findings/{finding_id}/person")
def person_acts(finding_id: int, action: PersonAction,
                emulator: Emulator = Depends(get_emulator)) -> OrjsonResponse:
    """Change one finding the way a person in the service's UI would (no API request is logged for it)."""
    t = schema.findings.c
    now = time.time()
    values: dict[str, Any] = {}
    if action.triage_state is not None:
        values["triage_state"] = action.triage_state
        values["status"] = _STATUS_OF_TRIAGE[action.triage_state]
        values["triage_reason"] = (action.triage_reason or "no_triage_reason") \
            if action.triage_state == "ignored" else None
    if action.status is not None:
        values["status"] = action.status
    if action.reintroduce:
        values.update(relevant_since=now, status="open", triage_state="untriaged", triage_reason=None)
    with emulator.change_findings() as connection:
        row = connection.execute(
            select(t.id, t.issue_type, t.repo_name, t.rule_name).where(t.id == finding_id)).first()
        if row is None:
            raise ApiError(404, f"no finding with id {finding_id}", "finding_id")
        ticket_link: dict[str, Any] | None = None
        if action.ticket == "create":
            ticket_id = connection.execute(
                select(func.coalesce(func.max(schema.tickets.c.id), 0) + 1)).scalar_one()
            url = f"https://tracker.example/person/{ticket_id}"
            connection.execute(insert(schema.tickets).values(
                id=ticket_id, external_slug=f"PERSON-{ticket_id}", url=url, issue_type=row.issue_type,
                repository=row.repo_name, rule_name=row.rule_name, issue_ids=orjson.dumps([finding_id]).decode(),
                tracker_project_id=None, created_at=timefmt.iso_z(now)))
            values["ticket_id"] = ticket_id
            ticket_link = {"id": ticket_id, "externalSlug": f"PERSON-{ticket_id}", "url": url,
                           "linkedIssueIds": [finding_id]}
        elif action.ticket == "remove":
            values["ticket_id"] = None
        if values:
            connection.execute(update(schema.findings).where(t.id == finding_id).values(**values))

        def edit(finding: dict[str, Any]) -> None:
            for key in ("triage_state", "status", "triage_reason"):
                if key in values:
                    finding[key] = values[key]
            if "status" in values:
                finding["state"] = STATE_OF_STATUS[values["status"]]
                finding["state_updated_at"] = timefmt.render(now, timefmt.MILLIS_Z)
            if "relevant_since" in values:
                finding["relevant_since"] = timefmt.render(now, timefmt.MILLIS_Z)
            if action.ticket is not None:
                finding["external_ticket"] = ticket_link
                if isinstance(finding.get("usage"), dict):
                    finding["usage"]["external_ticket"] = ticket_link
            if action.triage_state is not None:
                finding["triaged_at"] = timefmt.render(now, timefmt.SPACE_OFFSET)

        rewrite_bodies(connection, [finding_id], edit)
    return OrjsonResponse({"id": finding_id, "changed": sorted(values), "ticket": ticket_link})
