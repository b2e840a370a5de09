"""Triage operators against the emulator, through connections: plan, approve or reject, execute the plan."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from airflow.sdk import DAG
from findings_provider.compat import AirflowFailException
from findings_provider.operators.triage import BulkTriageOperator, PlanTriageOperator, TriageApprovalOperator
from findings_provider.warehouse.schema import triage_actions
from fixtures import ops, seq_of
from hitl import answer
from sqlalchemy import select
from task_context import make_context

from .helpers import TRIAGE_POLICIES, extract

pytestmark = pytest.mark.integration


def test_plan_needs_approval_only_above_the_threshold(fresh, warehouse) -> None:
    extract()
    small = make_context("run-a")
    plan = PlanTriageOperator(task_id="plan", dry_run="False", approval_threshold="None",
                              policies=TRIAGE_POLICIES).execute(small)
    assert plan["selected"] > 0
    assert plan["needs_approval"] is False
    assert small["ti"].xcom["needs_approval"] is False
    big = make_context("run-b")
    plan = PlanTriageOperator(task_id="plan", approval_threshold=plan["selected"] - 1,
                              policies=TRIAGE_POLICIES).execute(big)
    assert plan["needs_approval"] is True
    assert big["ti"].xcom["needs_approval"] is True
    assert plan["approval_subject"].startswith(f"Bulk-triage {plan['selected']} findings")
    assert len(big["ti"].xcom["action_ids"]) == plan["requests"] >= 1


def test_negative_threshold_fails_naming_the_param(fresh, warehouse, context) -> None:
    with pytest.raises(AirflowFailException, match="approval_threshold = -1 must be >= 0"):
        PlanTriageOperator(task_id="plan", approval_threshold=-1, policies=TRIAGE_POLICIES).execute(context)


def test_planned_triage_is_executed_exactly_and_dry_runs_never(fresh, warehouse) -> None:
    extract()
    dry = make_context("dry")
    PlanTriageOperator(task_id="plan", dry_run=True, policies=TRIAGE_POLICIES).execute(dry)
    seq = seq_of(fresh)
    result = BulkTriageOperator(task_id="triage", action_ids=dry["ti"].xcom["action_ids"],
                                policies=TRIAGE_POLICIES).execute(make_context("dry"))
    assert ops(fresh, seq, "triage") == []
    assert result["skipped_dry_run"] == result["actions"] >= 1

    real = make_context("real")
    plan = PlanTriageOperator(task_id="plan", policies=TRIAGE_POLICIES).execute(real)
    result = BulkTriageOperator(task_id="triage", action_ids=real["ti"].xcom["action_ids"],
                                policies=TRIAGE_POLICIES).execute(real)
    sent = ops(fresh, seq, "triage")
    assert len(sent) == result["requests"] == plan["requests"]
    assert sum(len(r["body"]["issue_ids"]) for r in sent) == plan["selected"]


def test_rejected_approval_marks_the_plan_and_nothing_is_sent(fresh, warehouse) -> None:
    extract()
    ctx = make_context("rejected")
    PlanTriageOperator(task_id="plan", policies=TRIAGE_POLICIES).execute(ctx)
    action_ids = ctx["ti"].xcom["action_ids"]
    with DAG("approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = TriageApprovalOperator(task_id="approve", subject="s", body="b", action_ids=action_ids)
    answer(approve, ctx, "Reject")
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(triage_actions).where(triage_actions.c.id.in_(action_ids))).all()
    assert {(r.status, r.error) for r in rows} == {("failed", "rejected in the approval step by alice")}
    seq = seq_of(fresh)
    BulkTriageOperator(task_id="triage", action_ids=action_ids, policies=TRIAGE_POLICIES).execute(ctx)
    assert ops(fresh, seq, "triage") == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dry_run": "maybe"}, "dry_run = 'maybe' is not a boolean; use true or false"),
    ({"max_findings": "0"}, "max_findings = 0 must be >= 1"),
    ({"approval_threshold": "many"}, "approval_threshold = 'many' is not an integer"),
])
def test_plan_refuses_a_bad_templated_value_naming_it(fresh, warehouse, context, kwargs, message) -> None:
    assert {"is_dry_run", "approval_threshold", "max_findings"} <= set(PlanTriageOperator.template_fields)
    with pytest.raises(AirflowFailException, match=message):
        PlanTriageOperator(task_id="plan", **kwargs, policies=TRIAGE_POLICIES).execute(context)
    with warehouse.engine.connect() as conn:
        assert conn.execute(select(triage_actions)).all() == []
    assert fresh.requests() == []


def test_triage_refuses_action_ids_that_are_not_ids_before_any_request(fresh, warehouse, context) -> None:
    with pytest.raises(AirflowFailException, match=r"action_ids: \['a'\] are not integers"):
        BulkTriageOperator(task_id="triage", action_ids="['a', 2]", policies=TRIAGE_POLICIES).execute(context)
    assert fresh.requests() == []
