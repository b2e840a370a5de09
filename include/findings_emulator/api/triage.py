"""Bulk triage (4.10): change the triage state of a selection and of its twins on other branches."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends
from sqlalchemy import select, update

from .. import schema, timefmt
from ..errors import invalid
from ..models import TriageBody
from ..mutations import fingerprint_mates, rewrite_bodies, selection_filters
from ..responses import OrjsonResponse
from ..rows import STATE_OF_STATUS
from ..selection import conditions
from ..state import Emulator
from .deps import by_slug

router = APIRouter()
STATUS_AFTER = {"ignored": "ignored", "reviewing": "reviewing", "fixing": "fixing", "reopened": "open"}


def _check(body: TriageBody) -> None:
    if body.new_triage_state is None and body.new_note is None:
        raise invalid("new_triage_state", "one of new_triage_state or new_note is required")
    if body.new_triage_reason is not None and body.new_triage_state != "ignored":
        raise invalid("new_triage_reason", "only allowed with new_triage_state=ignored, got new_triage_state="
                                           f"{body.new_triage_state}")


@router.post("/deployments/{deploymentSlug}/triage", name="triage", operation_id="triage", summary="Bulk triage")
def bulk_triage(body: TriageBody, emulator: Emulator = Depends(by_slug)) -> OrjsonResponse:
    """Triage up to ``limit`` selected findings, plus the same findings on other branches."""
    _check(body)
    filters = selection_filters(body, body.issue_ids or [])
    t = schema.findings.c
    now = time.time()
    state = body.new_triage_state
    values: dict[str, Any] = {}
    if state is not None:
        values = {"triage_state": state, "status": STATUS_AFTER[state],
                  "triage_reason": (body.new_triage_reason or "no_triage_reason") if state == "ignored" else None}

    def edit(finding: dict[str, Any]) -> None:
        if values:
            finding.update(values)
            finding["state"] = STATE_OF_STATUS[values["status"]]
            finding["state_updated_at"] = timefmt.render(now, timefmt.MILLIS_Z)
        if body.new_note is not None:
            finding["triage_comment"] = body.new_note
        finding["triaged_at"] = timefmt.render(now, timefmt.SPACE_OFFSET)

    with emulator.change_findings() as connection:
        query = select(t.id).where(*conditions(filters)).order_by(t.relevant_since.desc(), t.id).limit(body.limit)
        selected = list(connection.execute(query).scalars())
        triaged = selected + fingerprint_mates(connection, body.issue_type, selected)
        if values and triaged:
            connection.execute(update(schema.findings).where(t.id.in_(triaged)).values(**values))
        rewrite_bodies(connection, triaged, edit)
    return OrjsonResponse({"num_triaged": len(triaged), "triaged_issues": triaged})
