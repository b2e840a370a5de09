"""Ticket operators against the emulator, through connections: dry run, parameter checks, never twice."""

from __future__ import annotations

import pytest
from findings_provider.compat import AirflowFailException
from findings_provider.operators.tickets import CreateTicketsOperator, PlanTicketsOperator
from findings_provider.pipeline import approval
from findings_provider.warehouse.schema import ticket_actions
from fixtures import ops, seq_of
from sqlalchemy import select
from task_context import make_context

from .helpers import TICKET_POLICIES, extract

pytestmark = pytest.mark.integration


def test_tickets_operator_dry_run_and_param_checks(fresh, warehouse) -> None:
    extract()
    seq = seq_of(fresh)
    ctx = make_context("dry")
    result = CreateTicketsOperator(task_id="tickets", dry_run="True", policies=TICKET_POLICIES).execute(ctx)
    assert result["planned"] > 0
    assert result["requests"] == 0
    assert ctx["ti"].xcom["tickets"] == 0
    assert fresh.requests(seq) == []
    with pytest.raises(AirflowFailException, match="tracker_project_id = 'abc' must be a numeric id"):
        CreateTicketsOperator(task_id="tickets", tracker_project_id="abc",
                              policies=TICKET_POLICIES).execute(make_context())

    ctx = make_context("real")
    result = CreateTicketsOperator(task_id="tickets", tracker_project_id=12345, policies=TICKET_POLICIES).execute(ctx)
    posts = ops(fresh, seq, "tickets")
    assert len(posts) == result["requests"] > 0
    assert ctx["ti"].xcom["tickets"] == result["tickets"] > 0
    assert all(p["body"]["tracker_project_id"] == "12345" for p in posts)
    again = CreateTicketsOperator(task_id="tickets", policies=TICKET_POLICIES).execute(make_context("again"))
    assert again["requests"] == 0
    assert again["findings_selected"] == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tickets_per_call": 21}, "tickets_per_call = 21 must be <= 20"),
    ({"max_tickets": "0"}, "max_tickets = 0 must be >= 1"),
    ({"dry_run": "perhaps"}, "dry_run = 'perhaps' is not a boolean; use true or false"),
])
def test_create_refuses_a_bad_value_naming_it_before_any_request(fresh, warehouse, context, kwargs, message) -> None:
    with pytest.raises(AirflowFailException, match=message):
        CreateTicketsOperator(task_id="tickets", **kwargs, policies=TICKET_POLICIES).execute(context)
    assert fresh.requests() == []


def test_the_plan_sends_nothing_and_records_the_counts_the_write_checks(fresh, warehouse) -> None:
    extract()
    seq = seq_of(fresh)
    ctx = make_context("planned")
    plan = PlanTicketsOperator(task_id="plan", policies=TICKET_POLICIES).execute(ctx)
    assert plan["tickets"] > 0
    assert plan["needs_approval"] is ctx["ti"].xcom["needs_approval"] is False
    assert fresh.requests(seq) == []
    with warehouse.engine.connect() as conn:
        assert conn.execute(select(ticket_actions)).all() == []
    record = approval.get_plan(warehouse, approval.TICKETS, "planned")
    assert record is not None
    assert sum(record["planned"].values()) == plan["tickets"]
    assert record["reasons"] == []
