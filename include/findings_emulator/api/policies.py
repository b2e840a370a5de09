"""Policies: list them, list a policy's rules (cursor pagination), change one rule's mode (4.5, 4.6)."""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Query
from sqlalchemy import Connection, select, update

from .. import schema, timefmt
from ..errors import ApiError, invalid, not_found
from ..models import PolicyUpdateBody
from ..responses import OrjsonResponse
from ..state import Emulator
from .deps import by_id

router = APIRouter()
CHANGED_BY = "api-token"


def live_policies(emulator: Emulator = Depends(by_id)) -> Emulator:
    """The emulator, unless the deployment has moved to the newer policy system (then 410 Gone)."""
    if emulator.config.retired_policies:
        raise ApiError(410, "the policy endpoints are retired for this deployment: it has migrated to the newer "
                            "policy system; manage rule modes there", code="DEPLOYMENT_MIGRATED")
    return emulator


def _policy(row: Any) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "slug": row.slug, "isDefault": bool(row.is_default),
            "productType": row.product_type}


def _rule(row: Any) -> dict[str, Any]:
    body = orjson.loads(row.body)
    body["policyMode"] = row.mode
    body["lastChangeAt"] = row.last_change_at
    if row.last_change_by:
        body["lastChangeBy"] = row.last_change_by
    return body


def _get_policy(connection: Connection, policy_id: str) -> Any:
    row = connection.execute(select(schema.policies).where(schema.policies.c.id == policy_id)).first()
    if row is None:
        raise not_found(f"policy {policy_id}")
    return row


@router.get("/deployments/{deploymentId}/policies", name="policies_list", operation_id="policies_list",
            summary="List the deployment's policies")
def list_policies(emulator: Emulator = Depends(live_policies)) -> OrjsonResponse:
    """Every policy of the deployment."""
    with emulator.transaction() as connection:
        rows = connection.execute(select(schema.policies).order_by(schema.policies.c.id)).all()
    return OrjsonResponse({"policies": [_policy(row) for row in rows]})


@router.get("/deployments/{deploymentId}/policies/{policyId}", name="policy_rules", operation_id="policy_rules",
            summary="List policy rules")
def list_rules(policyId: str, cursor: str = Query(""), limit: int = Query(500, ge=1, le=2000),
               emulator: Emulator = Depends(live_policies)) -> OrjsonResponse:
    """A page of the policy's rules by id; ``cursor`` is the last rule id of the previous page."""
    if cursor and not cursor.isdigit():
        raise invalid("cursor", f"{cursor!r} is not a cursor returned by this endpoint")
    r = schema.rules.c
    with emulator.transaction() as connection:
        policy = _get_policy(connection, policyId)
        query = select(schema.rules).where(r.policy_id == policyId)
        if cursor:
            query = query.where(r.id > cursor)
        rows = connection.execute(query.order_by(r.id).limit(limit + 1)).all()
    page = rows[:limit]
    next_cursor = page[-1].id if len(rows) > limit else ""
    return OrjsonResponse({"cursor": next_cursor, "policy": _policy(policy), "rules": [_rule(row) for row in page]})


@router.put("/deployments/{deploymentId}/policies/{policyId}", name="policy_update",
            operation_id="policy_update", summary="Update policy: set one rule's mode")
def update_rule_mode(policyId: str, body: PolicyUpdateBody,
                     emulator: Emulator = Depends(live_policies)) -> OrjsonResponse:
    """Set the mode of the rule ``rulePath`` in the policy and return the updated rule."""
    r = schema.rules.c
    with emulator.change_findings() as connection:  # the findings' `policies` filter follows rule modes
        _get_policy(connection, policyId)
        match = (r.policy_id == policyId) & (r.path == body.rulePath)
        if connection.execute(select(r.id).where(match)).first() is None:
            raise ApiError(404, f"rule {body.rulePath!r} not found in policy {policyId}", "rulePath")
        connection.execute(update(schema.rules).where(match).values(
            mode=body.policyMode, last_change_at=timefmt.render(time.time(), timefmt.MILLIS_Z),
            last_change_by=CHANGED_BY))
        row = connection.execute(select(schema.rules).where(match)).one()
    rule = _rule(row)
    if emulator.config.dialect != "real":  # the real service always sends a list
        rule["vulnerabilityClass"] = (rule.get("vulnerabilityClass") or [""])[0]
    rule["hasValidators"] = False
    rule["secretType"] = ""
    return OrjsonResponse({"policyId": policyId, "updatedRule": rule})
