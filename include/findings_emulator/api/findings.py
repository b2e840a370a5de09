"""List code or supply-chain findings (4.8): offset pagination over stored JSON, never re-serialised."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import Field

from ..dialect import REAL
from ..responses import raw_json
from ..selection import (
    LISTING_ONLY_FOR,
    Confidence,
    Exposure,
    FindingFilters,
    ListedIssueType,
    PolicyBoard,
    PrState,
    Severity,
    Status,
    Transitivity,
    TriageReason,
    Verdict,
    as_tuple,
)
from ..state import Emulator
from .deps import by_slug

router = APIRouter()
FINDINGS_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"description": "`sastFindings.findings` and `scaFindings.findings` (or a flat "
                         "`findings` list with --flat-findings or --dialect real)",
          "content": {"application/json": {}}}}


def page_body(issue_type: str, items: list[bytes], flat: bool) -> bytes:
    """The response body around already serialised findings."""
    joined = b",".join(items)
    if flat:
        return b'{"findings":[' + joined + b"]}"
    if issue_type == "ai_sast":
        return (b'{"sastFindings":{"findings":[]},"scaFindings":{"findings":[]},"aiSastFindings":{"findings":['
                + joined + b"]}}")
    if issue_type == "sca":
        return b'{"sastFindings":{"findings":[]},"scaFindings":{"findings":[' + joined + b"]}}"
    return b'{"sastFindings":{"findings":[' + joined + b']},"scaFindings":{"findings":[]}}'


@router.get("/deployments/{deploymentSlug}/findings", name="findings", operation_id="findings",
            summary="List code or supply chain findings", response_class=Response, responses=FINDINGS_RESPONSE)
def list_findings(
    issue_type: ListedIssueType = "sast",
    since: float | None = Query(None, description="epoch seconds; filters on relevant_since"),
    page: int = Query(0, ge=0),
    page_size: int = Query(100, ge=100, le=3000),
    dedup: bool = False,
    repos: list[str] | None = Query(None),
    repository_ids: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] | None = Query(None),
    status: Status | None = None,
    triage_reasons: list[TriageReason] | None = Query(None),
    severities: list[Severity] | None = Query(None),
    ref: str | None = None,
    policies: list[PolicyBoard] | None = Query(None),
    rules: list[str] | None = Query(None),
    categories: list[str] | None = Query(None),
    confidence: Confidence | None = None,
    autotriage_verdict: Verdict | None = None,
    component_tags: list[str] | None = Query(None),
    exposures: list[Exposure] | None = Query(None),
    transitivities: list[Transitivity] | None = Query(None),
    is_malicious: bool | None = None,
    click_to_fix_pr_state: list[PrState] | None = Query(None),
    emulator: Emulator = Depends(by_slug),
) -> Response:
    """A page of findings ordered by ``relevant_since`` (newest first), then id."""
    filters = FindingFilters(
        issue_type=issue_type, since=since, dedup=dedup, repos=as_tuple(repos),
        repository_ids=as_tuple(repository_ids), status=status, triage_reasons=as_tuple(triage_reasons),
        severities=as_tuple(severities), ref=ref, policies=as_tuple(policies), rules=as_tuple(rules),
        categories=as_tuple(categories), confidence=confidence, autotriage_verdict=autotriage_verdict,
        component_tags=as_tuple(component_tags), exposures=as_tuple(exposures),
        transitivities=as_tuple(transitivities), is_malicious=is_malicious,
        click_to_fix_pr_state=as_tuple(click_to_fix_pr_state),
    )
    filters.check_applicable(LISTING_ONLY_FOR)
    with emulator.transaction() as connection:
        items = emulator.listing.page(connection, filters, page, page_size)
    config = emulator.config
    return raw_json(page_body(issue_type, items, config.flat_findings or config.dialect == REAL))
