"""Extraction, summary, triage and ticket operators against the emulator, through connections."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from airflow.sdk import DAG
from findings_provider.compat import AirflowFailException
from findings_provider.operators.findings import ExtractFindingsOperator, FindingsSummaryOperator
from findings_provider.operators.tickets import CreateTicketsOperator
from findings_provider.operators.triage import (
    ApprovalBranchOperator,
    BulkTriageOperator,
    PlanTriageOperator,
    TriageApprovalOperator,
)
from findings_provider.pipeline import extraction
from findings_provider.warehouse.schema import triage_actions
from sqlalchemy import select

from .conftest import make_context, ops, seq_of

pytestmark = pytest.mark.integration


def extract(types="['sast', 'sca']"):
    return ExtractFindingsOperator(task_id="extract", issue_types=types).execute(make_context())


def test_extract_accepts_rendered_params_and_pushes_written(fresh, warehouse, context) -> None:
    result = ExtractFindingsOperator(task_id="extract", issue_types="['sast', 'secrets']",
                                     full_refresh="False").execute(context)
    assert set(result["issue_types"]) == {"sast", "secrets"}
    assert context["ti"].xcom["written"] == result["written"] == warehouse.count_findings() > 0
    assert warehouse.count_findings("sca") == 0


def test_extract_makes_a_full_pull_on_the_first_run_of_a_day(fresh, warehouse, context) -> None:
    now = datetime.now(timezone.utc)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for issue_type, last_full in (("sast", midnight - timedelta(minutes=1)), ("sca", midnight)):
        warehouse.set_state(extraction.full_refresh_key(issue_type), last_full.isoformat())
        warehouse.set_state(extraction.watermark_key(issue_type), (now - timedelta(hours=1)).isoformat())

    result = ExtractFindingsOperator(task_id="extract", issue_types="['sast', 'sca']").execute(context)

    sast, sca = result["issue_types"]["sast"], result["issue_types"]["sca"]
    assert sast["full"] is True  # pipeline.yaml: one full pull per 24 h from 00:00 UTC
    assert sast["reason"] == f"no full refresh since {midnight:%Y-%m-%d} 00:00 UTC (one per 24 h)"
    assert sca["full"] is False
    assert result["rejected"] == sast["rejected"] == 0


def test_extract_refuses_an_unknown_issue_type_naming_the_param(fresh, warehouse, context) -> None:
    with pytest.raises(AirflowFailException, match=r"issue_types: unknown value\(s\) \['bogus'\]"):
        ExtractFindingsOperator(task_id="extract", issue_types=["sast", "bogus"]).execute(context)
    assert fresh.requests() == []


def test_summary_writes_a_report_that_matches_the_warehouse(fresh, warehouse, context) -> None:
    extract()
    result = FindingsSummaryOperator(task_id="summary").execute(context)
    assert result["open_findings"] == warehouse.count_findings(status="open") > 0
    page = Path(result["report"]["html"]).read_text()
    assert page.count("<img") == 3  # by severity, over time (one snapshot day), by repository
    # the same page is in the warehouse, where the dashboard on the API server reads it
    assert warehouse.latest_report("findings_summary").html == page
    assert result["report"]["stored_id"] == warehouse.latest_report("findings_summary").id
    assert "time_to_fix" in page
    assert "sla_breaches" in page
    assert result["alerts"] == []  # the first summary only records when it looked
    by_severity = pd.read_csv(result["report"]["csv"]["by_severity"], index_col=0)
    assert int(by_severity.to_numpy().sum()) == result["open_findings"]
    assert list(by_severity.columns) == ["sast", "sca"]
    by_repo = pd.read_csv(result["report"]["csv"]["by_repository"], index_col=0)
    assert by_repo.sum(axis=1).is_monotonic_decreasing
    assert len(by_repo) == result["repositories"]


def test_plan_needs_approval_only_above_the_threshold(fresh, warehouse) -> None:
    extract()
    small = make_context("run-a")
    plan = PlanTriageOperator(task_id="plan", dry_run="False", approval_threshold="None").execute(small)
    assert plan["selected"] > 0
    assert plan["needs_approval"] is False
    assert small["ti"].xcom["needs_approval"] is False
    big = make_context("run-b")
    plan = PlanTriageOperator(task_id="plan", approval_threshold=plan["selected"] - 1).execute(big)
    assert plan["needs_approval"] is True
    assert big["ti"].xcom["needs_approval"] is True
    assert plan["approval_subject"].startswith(f"Bulk-triage {plan['selected']} findings")
    assert len(big["ti"].xcom["action_ids"]) == plan["requests"] >= 1
    branch = ApprovalBranchOperator(task_id="check", needs_approval=True, approval_task_id="approve",
                                    proceed_task_id="triage")
    assert branch.choose_branch({}) == "approve"
    branch.needs_approval = "False"
    assert branch.choose_branch({}) == "triage"


def test_negative_threshold_fails_naming_the_param(fresh, warehouse, context) -> None:
    with pytest.raises(AirflowFailException, match="approval_threshold = -1 must be >= 0"):
        PlanTriageOperator(task_id="plan", approval_threshold=-1).execute(context)


def test_planned_triage_is_executed_exactly_and_dry_runs_never(fresh, warehouse) -> None:
    extract()
    dry = make_context("dry")
    PlanTriageOperator(task_id="plan", dry_run=True).execute(dry)
    seq = seq_of(fresh)
    result = BulkTriageOperator(task_id="triage", action_ids=dry["ti"].xcom["action_ids"]).execute(make_context("dry"))
    assert ops(fresh, seq, "triage") == []
    assert result["skipped_dry_run"] == result["actions"] >= 1

    real = make_context("real")
    plan = PlanTriageOperator(task_id="plan").execute(real)
    result = BulkTriageOperator(task_id="triage", action_ids=real["ti"].xcom["action_ids"]).execute(real)
    sent = ops(fresh, seq, "triage")
    assert len(sent) == result["requests"] == plan["requests"]
    assert sum(len(r["body"]["issue_ids"]) for r in sent) == plan["selected"]


def test_rejected_approval_marks_the_plan_and_nothing_is_sent(fresh, warehouse) -> None:
    extract()
    ctx = make_context("rejected")
    PlanTriageOperator(task_id="plan").execute(ctx)
    action_ids = ctx["ti"].xcom["action_ids"]
    with DAG("approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = TriageApprovalOperator(task_id="approve", subject="s", body="b", action_ids=action_ids)
    event = {"chosen_options": ["Reject"], "params_input": {}, "responded_at": datetime.now(timezone.utc),
             "responded_by_user": {"id": "7", "name": "alice"}}
    approve.execute_complete(ctx, event)
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(triage_actions).where(triage_actions.c.id.in_(action_ids))).all()
    assert {(r.status, r.error) for r in rows} == {("failed", "rejected in the approval step by alice")}
    seq = seq_of(fresh)
    BulkTriageOperator(task_id="triage", action_ids=action_ids).execute(ctx)
    assert ops(fresh, seq, "triage") == []


def test_tickets_operator_dry_run_and_param_checks(fresh, warehouse) -> None:
    extract()
    seq = seq_of(fresh)
    ctx = make_context("dry")
    result = CreateTicketsOperator(task_id="tickets", dry_run="True").execute(ctx)
    assert result["planned"] > 0
    assert result["requests"] == 0
    assert ctx["ti"].xcom["tickets"] == 0
    assert fresh.requests(seq) == []
    with pytest.raises(AirflowFailException, match="tracker_project_id = 'abc' must be a numeric id"):
        CreateTicketsOperator(task_id="tickets", tracker_project_id="abc").execute(make_context())

    ctx = make_context("real")
    result = CreateTicketsOperator(task_id="tickets", tracker_project_id=12345).execute(ctx)
    posts = ops(fresh, seq, "tickets")
    assert len(posts) == result["requests"] > 0
    assert ctx["ti"].xcom["tickets"] == result["tickets"] > 0
    assert all(p["body"]["tracker_project_id"] == "12345" for p in posts)
    again = CreateTicketsOperator(task_id="tickets").execute(make_context("again"))
    assert again["requests"] == 0
    assert again["findings_selected"] == 0
