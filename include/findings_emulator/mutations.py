"""Building blocks of the operations that change findings: select them, find their other-branch twins,
and rewrite their stored JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, select, update

from . import schema
from .dialect import REAL, VALIDATION_FILTER, finding_to_real
from .errors import invalid
from .models import SelectionBody
from .selection import SELECTION_ONLY_FOR, FindingFilters, as_tuple


def selection_filters(body: SelectionBody, ids: list[int]) -> FindingFilters:
    """The filters of a triage or ticket selection (4.11); 400 when it would select everything or names a
    filter of another issue type."""
    since = None
    if body.since not in (None, ""):
        try:
            since = float(body.since)
        except ValueError as exc:
            raise invalid("since", f"{body.since!r} is not epoch seconds") from exc
    filters = FindingFilters(
        issue_type=body.issue_type, ids=tuple(ids), since=since, repos=as_tuple(body.repos),
        status=body.status, triage_reasons=as_tuple(body.triage_reasons), severities=as_tuple(body.severities),
        ref=body.ref or None, policies=as_tuple(body.policies), policy_mode=as_tuple(body.policy_mode),
        rules=as_tuple(body.rules), ruleset=as_tuple(body.ruleset), categories=as_tuple(body.categories),
        confidence=body.confidence, autotriage_verdict=body.autotriage_verdict,
        component_tags=as_tuple(body.component_tags), exposures=as_tuple(body.exposures),
        transitivities=as_tuple(body.transitivities), dependencies=as_tuple(body.dependencies),
        epss_probability=as_tuple(body.epss_probability), pro_only=body.pro_only,
        project_tags=as_tuple(body.project_tags), include_historical=body.include_historical,
        repository_visibility=as_tuple(body.repository_visibility), secret_types=as_tuple(body.secret_types),
        validation_state=tuple(VALIDATION_FILTER.get(v, v) for v in body.validation_state or ()),
    )
    if not ids and not filters.given():
        raise invalid("issue_ids", "give issue_ids or at least one filter; a selection of every finding is "
                                   "refused")
    filters.check_applicable(SELECTION_ONLY_FOR)
    return filters


def fingerprint_mates(connection: Connection, issue_type: str, ids: list[int]) -> list[int]:
    """Ids of other findings with the same fingerprint (``match_based_id``) as ``ids``: the same finding on
    other branches."""
    if not ids:
        return []
    t = schema.findings.c
    fingerprints = select(t.match_based_id).where(t.issue_type == issue_type, t.id.in_(ids), t.has_mates == 1)
    query = select(t.id).where(t.issue_type == issue_type, t.match_based_id.in_(fingerprints),
                               t.id.not_in(ids)).order_by(t.id)
    return list(connection.execute(query).scalars())


def rewrite_bodies(connection: Connection, ids: list[int], edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` to the stored JSON of each finding in ``ids`` and store it again (code and supply-chain
    findings converted to the real dialect when the emulator serves it: ``edit`` writes the reference form)."""
    if not ids:
        return
    b = schema.finding_bodies.c
    changed = []
    real = connection.info.get("dialect") == REAL
    for finding_id, body in connection.execute(select(b.id, b.body).where(b.id.in_(ids))):
        finding = orjson.loads(body)
        edit(finding)
        if real and "secret_type" not in finding:  # secrets stay in the reference form, converted when served
            finding_to_real(finding)
        changed.append({"key": finding_id, "new_body": orjson.dumps(finding)})
    connection.execute(
        update(schema.finding_bodies).where(b.id == bindparam("key")).values(body=bindparam("new_body")), changed)
