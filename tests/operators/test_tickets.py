"""Ticket operators against the emulator, through connections: dry run, parameter checks, never twice."""

from __future__ import annotations

import pytest
from findings_provider.compat import AirflowFailException
from findings_provider.operators.tickets import CreateTicketsOperator

from .conftest import make_context, ops, seq_of
from .helpers import extract

pytestmark = pytest.mark.integration


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
