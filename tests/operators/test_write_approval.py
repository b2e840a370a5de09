"""The write operators check the approval themselves: above a cap nothing is sent without a person's answer.

Against the emulator, through connections; the approval task's completion handler is driven with the event the
Human-in-the-loop trigger sends (as in production), and "marked successful by hand" is a run without it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from airflow.sdk import DAG
from findings_provider.compat import AirflowFailException
from findings_provider.operators.approval import PlanApprovalOperator
from findings_provider.operators.findings import ExtractFindingsOperator
from findings_provider.operators.tickets import CreateTicketsOperator, PlanTicketsOperator
from findings_provider.operators.triage import BulkTriageOperator, PlanTriageOperator, TriageApprovalOperator

from .conftest import make_context, seq_of
from .conftest import ops as sent

pytestmark = pytest.mark.integration


def answer(operator, ctx, choice):
    event = {"chosen_options": [choice], "params_input": {}, "responded_at": datetime.now(timezone.utc),
             "responded_by_user": {"id": "7", "name": "alice"}}
    return operator.execute_complete(ctx, event)


def test_triage_above_the_cap_waits_for_a_person_and_a_hand_marked_approval_is_not_one(fresh, warehouse):
    ExtractFindingsOperator(task_id="extract", issue_types="['sast']").execute(make_context())
    ctx = make_context("capped")
    plan = PlanTriageOperator(task_id="plan", max_findings="2").execute(ctx)
    assert plan["needs_approval"] is True
    assert plan["selected"] > 2
    assert "above its cap of 2 per run (lowered for this run from 5000)" in plan["approval_reasons"][0]
    seq = seq_of(fresh)
    # the approval task "succeeded" without an answer (a person marked it by hand): the write refuses
    with pytest.raises(AirflowFailException, match="marking the approval task successful by hand is not approval"):
        BulkTriageOperator(task_id="triage", action_ids=ctx["ti"].xcom["action_ids"]).execute(ctx)
    assert sent(fresh, seq, "triage") == []

    with DAG("approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = TriageApprovalOperator(task_id="approve", subject="s", body="b",
                                         action_ids=ctx["ti"].xcom["action_ids"])
    answer(approve, ctx, "Approve")
    result = BulkTriageOperator(task_id="triage", action_ids=ctx["ti"].xcom["action_ids"]).execute(ctx)
    assert sum(len(r["body"]["issue_ids"]) for r in sent(fresh, seq, "triage")) == plan["selected"]
    assert result["requests"] >= 1


def test_triage_without_a_plan_step_stops_above_the_cap(fresh, warehouse):
    ExtractFindingsOperator(task_id="extract", issue_types="['sast']").execute(make_context())
    seq = seq_of(fresh)
    policy = {"name": "tiny", "issue_type": "sast", "max_findings": 1,
              "select": {"status": ["open"], "autotriage_verdict": ["false_positive"]},
              "set": {"triage_state": "ignored", "triage_reason": "false_positive"}}
    with pytest.raises(AirflowFailException, match=r"policy tiny plans \d+ findings to triage, above its cap of 1"):
        BulkTriageOperator(task_id="triage", policies=[policy]).execute(make_context("standalone"))
    assert sent(fresh, seq, "triage") == []


def test_tickets_above_the_cap_need_an_approval_the_write_checks(fresh, warehouse):
    ExtractFindingsOperator(task_id="extract", issue_types="['sast', 'sca']").execute(make_context())
    ctx = make_context("tickets")
    plan = PlanTicketsOperator(task_id="plan", max_tickets=1).execute(ctx)
    assert plan["needs_approval"] is True
    assert ctx["ti"].xcom["needs_approval"] is True
    seq = seq_of(fresh)
    with pytest.raises(AirflowFailException, match="none is recorded"):
        CreateTicketsOperator(task_id="create", max_tickets=1).execute(ctx)

    with DAG("ticket_approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = PlanApprovalOperator(task_id="approve", kind="tickets", subject="s", body="b")
    answer(approve, ctx, "Reject")
    with pytest.raises(AirflowFailException, match=r"a person \(alice\) rejected this plan"):
        CreateTicketsOperator(task_id="create", max_tickets=1).execute(ctx)
    assert sent(fresh, seq, "tickets") == []

    answer(approve, ctx, "Approve")
    result = CreateTicketsOperator(task_id="create", max_tickets=1).execute(ctx)
    assert result["tickets"] == plan["tickets"] > 1  # exactly what the person approved, not the cap
    assert ctx["ti"].xcom["tickets"] == result["tickets"]
