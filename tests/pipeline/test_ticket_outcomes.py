"""What became of ticket requests: unknown outcomes reconciled, tickets a lost request created recorded once the
warehouse holds them."""

from __future__ import annotations

import httpx
import pytest
from findings_provider.client import FindingsApiError
from findings_provider.pipeline import extraction, ticket_outcomes, ticket_plan

from .fakes import NOW, FakeApi
from .ticket_runs import POLICIES, outcomes, run, seed, sent, ticket_ids


def test_unresolvable_loss_is_ambiguous_until_reconciled(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sca=[])
    original_findings = api._findings

    def create_then_lose(body):
        api.create_tickets(body)
        return httpx.Response(502)

    api.tickets_handler = create_then_lose
    api._findings = lambda request: httpx.Response(401, json={})  # type: ignore[method-assign]
    with pytest.raises(FindingsApiError):
        run(api, warehouse)
    assert sorted(outcomes(warehouse)) == [("sast", i, "ambiguous") for i in (1, 2, 3)]
    assert ticket_plan.plan_tickets(warehouse, POLICIES) == []  # ambiguous findings are not sent again

    api._findings = original_findings  # type: ignore[method-assign]
    api.tickets_handler = None
    reconciled = ticket_outcomes.reconcile_ambiguous(api.client(), warehouse, ["sast"], "r2")
    assert reconciled.succeeded == 3
    assert len(sent(api)) == 1
    assert ticket_plan.plan_tickets(warehouse, POLICIES) == []
    assert all(v is not None for k, v in ticket_ids(warehouse, "sast").items() if k in (1, 2, 3))


def test_tickets_a_lost_request_created_later_are_recorded_once_the_warehouse_holds_them(api: FakeApi,
                                                                                         warehouse) -> None:
    seed(api, warehouse, sca=[])

    def lose(body: dict) -> httpx.Response:
        api.tickets_handler = None
        raise httpx.ReadTimeout("the client timed out; the service goes on working")

    api.tickets_handler = lose
    assert run(api, warehouse).failed == 3  # no ticket yet on the re-read
    assert ticket_outcomes.unseen_ticket_suspects(warehouse, "sast") == {1, 2, 3}
    api.create_tickets(sent(api)[0])  # the service finishes the request after all
    extraction.run_extraction(api.client(), warehouse, ["sast"], now=NOW, full_refresh=True, page_size=100)
    assert ticket_plan.plan_tickets(warehouse, POLICIES) == []  # the warehouse knows their tickets

    assert ticket_outcomes.record_known_tickets(warehouse, "sast", "r2") == 3
    latest = {finding_id: outcome for _, finding_id, outcome in outcomes(warehouse)}  # in the order recorded
    assert latest == {1: "succeeded", 2: "succeeded", 3: "succeeded"}
    assert ticket_outcomes.unseen_ticket_suspects(warehouse, "sast") == set()
    assert ticket_outcomes.record_known_tickets(warehouse, "sast", "r3") == 0  # recorded once
