"""The approval step: the branch to it, the answer it records, and the write operators that check that record.

Above a cap nothing is sent without a person's answer. Against the emulator, through connections; the approval
task's completion handler is driven with the event the Human-in-the-loop trigger sends (as in production), and
"marked successful by hand" is a run without it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG
from findings_provider.compat import AirflowFailException, DownstreamTasksSkipped
from findings_provider.operators.approval import ApprovalBranchOperator, PlanApprovalOperator
from findings_provider.operators.tickets import CreateTicketsOperator, PlanTicketsOperator
from findings_provider.operators.triage import BulkTriageOperator, PlanTriageOperator, TriageApprovalOperator
from findings_provider.pipeline import approval
from findings_provider.values import ParamError
from fixtures import ops as sent
from fixtures import seq_of
from hitl import answer
from present import present
from task_context import make_context

from .helpers import TICKET_POLICIES, TRIAGE_POLICIES, extract

pytestmark = pytest.mark.integration


def branch(needs_approval: object) -> ApprovalBranchOperator:
    return ApprovalBranchOperator(task_id="check", needs_approval=needs_approval, approval_task_id="approve",
                                  proceed_task_id="triage")


@pytest.mark.parametrize(("needs_approval", "chosen"), [(True, "approve"), ("True", "approve"), ("1", "approve"),
                                                        (False, "triage"), ("False", "triage"), ("0", "triage")])
def test_the_branch_asks_a_person_only_when_the_plan_needs_approval(needs_approval, chosen) -> None:
    assert branch(needs_approval).choose_branch({}) == chosen


def test_the_branch_refuses_a_value_that_is_not_a_boolean_naming_it() -> None:
    assert ApprovalBranchOperator.template_fields == ("needs_approval",)
    with pytest.raises(ParamError, match="needs_approval = 'maybe' is not a boolean; use true or false"):
        branch("maybe").choose_branch({})


@pytest.mark.parametrize(("choice", "approved"), [("Approve", True), ("Reject", False)])
def test_the_answer_is_recorded_for_the_run_with_who_gave_it(warehouse, choice, approved) -> None:
    with DAG("record_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = PlanApprovalOperator(task_id="approve", kind="tickets", subject="s", body="b")
    answer(approve, make_context("answered"), choice, by="bob")
    record = approval.get_plan(warehouse, approval.TICKETS, "answered")
    assert record is not None
    decision = record["decision"]
    assert (decision["approved"], decision["by"]) == (approved, "bob")
    assert approval.get_plan(warehouse, approval.TICKETS, "another run") is None
    assert approval.get_plan(warehouse, approval.TRIAGE, "answered") is None


def test_triage_above_the_cap_waits_for_a_person_and_a_hand_marked_approval_is_not_one(fresh, warehouse):
    extract("['sast']")
    ctx = make_context("capped")
    plan = PlanTriageOperator(task_id="plan", max_findings="2", policies=TRIAGE_POLICIES).execute(ctx)
    assert plan["needs_approval"] is True
    assert plan["selected"] > 2
    assert "above its cap of 2 per run (lowered for this run from 5000)" in plan["approval_reasons"][0]
    seq = seq_of(fresh)
    # the approval task "succeeded" without an answer (a person marked it by hand): the write refuses
    with pytest.raises(AirflowFailException, match="marking the approval task successful by hand is not approval"):
        BulkTriageOperator(task_id="triage", action_ids=ctx["ti"].xcom["action_ids"],
                           policies=TRIAGE_POLICIES).execute(ctx)
    assert sent(fresh, seq, "triage") == []

    with DAG("approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = TriageApprovalOperator(task_id="approve", subject="s", body="b",
                                         action_ids=ctx["ti"].xcom["action_ids"])
    answer(approve, ctx, "Approve")
    result = BulkTriageOperator(task_id="triage", action_ids=ctx["ti"].xcom["action_ids"],
                                policies=TRIAGE_POLICIES).execute(ctx)
    assert sum(len(r["body"]["issue_ids"]) for r in sent(fresh, seq, "triage")) == plan["selected"]
    assert result["requests"] >= 1


def test_triage_without_a_plan_step_stops_above_the_cap(fresh, warehouse):
    extract("['sast']")
    seq = seq_of(fresh)
    policy = {"name": "tiny", "issue_type": "sast", "max_findings": 1,
              "select": {"status": ["open"], "autotriage_verdict": ["false_positive"]},
              "set": {"triage_state": "ignored", "triage_reason": "false_positive"}}
    with pytest.raises(AirflowFailException, match=r"policy tiny plans \d+ findings to triage, above its cap of 1"):
        BulkTriageOperator(task_id="triage", policies=[policy]).execute(make_context("standalone"))
    assert sent(fresh, seq, "triage") == []


def test_tickets_above_the_cap_need_an_approval_the_write_checks(fresh, warehouse):
    extract()
    ctx = make_context("tickets")
    plan = PlanTicketsOperator(task_id="plan", max_tickets=1, policies=TICKET_POLICIES).execute(ctx)
    assert plan["needs_approval"] is True
    assert ctx["ti"].xcom["needs_approval"] is True
    seq = seq_of(fresh)
    with pytest.raises(AirflowFailException, match="none is recorded"):
        CreateTicketsOperator(task_id="create", max_tickets=1, policies=TICKET_POLICIES).execute(ctx)

    with DAG("ticket_approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = PlanApprovalOperator(task_id="approve", kind="tickets", subject="s", body="b")
    answer(approve, ctx, "Reject")
    with pytest.raises(AirflowFailException, match=r"a person \(alice\) rejected this plan"):
        CreateTicketsOperator(task_id="create", max_tickets=1, policies=TICKET_POLICIES).execute(ctx)
    assert sent(fresh, seq, "tickets") == []

    answer(approve, ctx, "Approve")
    result = CreateTicketsOperator(task_id="create", max_tickets=1, policies=TICKET_POLICIES).execute(ctx)
    assert result["tickets"] == plan["tickets"] > 1  # exactly what the person approved, not the cap
    assert ctx["ti"].xcom["tickets"] == result["tickets"]


def test_every_write_kind_of_pipeline_approval_is_asked_and_recorded_alike(warehouse):
    """The approval task takes the kinds of ``pipeline.approval`` (policy tuning's included), refuses any other,
    and records the answer where the write of that kind reads it."""
    with DAG("kinds_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approvals = {kind: PlanApprovalOperator(task_id=f"approve_{kind}", kind=kind, subject="s", body="b")
                     for kind in approval.KINDS}
        with pytest.raises(ValueError, match="expected one of 'triage', 'tickets', 'policies'"):
            PlanApprovalOperator(task_id="approve_projects", kind="projects", subject="s", body="b")
    assert set(approvals) == {"triage", "tickets", "policies"}
    for kind, operator in approvals.items():
        ctx = make_context(f"run_{kind}")
        approval.record_plan(warehouse, kind, ctx["run_id"], reasons=["asked"], planned={"p": 1})
        assert "none is recorded" in str(approval.missing_approval(approval.get_plan(warehouse, kind, ctx["run_id"])))
        answer(operator, ctx, "Approve")
        assert approval.missing_approval(approval.get_plan(warehouse, kind, ctx["run_id"])) is None
        assert present(approval.get_plan(warehouse, kind, ctx["run_id"]))["decision"]["by"] == "alice"


def test_a_rejection_is_recorded_before_airflow_skips_the_write(warehouse):
    """With a write downstream (as in every DAG), Airflow 3 skips it after a Reject by raising from the completion
    handler: the rejection is recorded first, so the write (if it runs anyway) names who rejected."""
    with DAG("reject_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = PlanApprovalOperator(task_id="approve", kind="policies", subject="s", body="b")
        approve >> EmptyOperator(task_id="apply")
    ctx = {**make_context("rejected"), "task": approve}
    approval.record_plan(warehouse, "policies", "rejected", reasons=["asked"], planned={"2101": 1})

    with pytest.raises(DownstreamTasksSkipped):
        answer(approve, ctx, "Reject")

    problem = present(approval.missing_approval(approval.get_plan(warehouse, "policies", "rejected")))
    assert problem.startswith("a person (alice) rejected this plan")
