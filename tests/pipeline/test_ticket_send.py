"""Sending ticket requests: outcomes per finding, a lost answer re-read and never resent blindly, the same-run resend
of a request proven undone."""

from __future__ import annotations

import json

import httpx
import pytest
from findings_provider.client import AmbiguousWriteError
from findings_provider.pipeline import ticket_outcomes, ticket_plan, ticket_send
from findings_provider.warehouse.schema import findings
from sqlalchemy import select

from .fakes import FakeApi
from .ticket_runs import POLICIES, outcomes, run, seed, sent, ticket_ids


def test_exactly_the_policy_findings_get_one_ticket_each(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    tally = run(api, warehouse)

    bodies = sent(api)
    assert [(b["issue_type"], sorted(int(i) for i in b["issue_ids"])) for b in bodies] == [
        ("sast", [1, 2, 3]), ("sca", [20, 21])]
    assert all(b["group_issues"] is True and b["limit"] == 20 for b in bodies)
    assert all(isinstance(i, str) for b in bodies for i in b["issue_ids"])
    assert (tally.requests, tally.tickets, tally.succeeded) == (2, 4, 5)
    assert sorted(outcomes(warehouse)) == sorted(
        [("sast", i, "succeeded") for i in (1, 2, 3)] + [("sca", i, "succeeded") for i in (20, 21)])
    stored = ticket_ids(warehouse, "sast")
    assert stored[1] == stored[2] != stored[3]  # grouped by repository and rule
    assert stored[1] is not None
    assert stored[4] is None
    assert stored[7] == 55
    raw = json.loads(next(iter(_raw(warehouse, "sast", 1))))
    assert raw["external_ticket"]["id"] == stored[1]

    again = run(api, warehouse, run_id="r2")
    assert (again.requests, again.batches) == (0, 0)
    assert len(sent(api)) == 2


def _raw(warehouse, issue_type, finding_id):
    with warehouse.engine.connect() as conn:
        return conn.execute(select(findings.c.raw).where(findings.c.issue_type == issue_type,
                                                          findings.c.id == finding_id)).scalars()


def test_failed_findings_are_retried_by_the_next_run_and_skipped_ones_reported(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sca=[])

    def partial(body):
        ids = [int(i) for i in body["issue_ids"]]
        response = api.create_tickets({**body, "issue_ids": [i for i in ids if i not in (2, 3)]})
        out = json.loads(response.content)
        out["failed"].append({"error": "tracker unavailable", "issue_ids": [2]})
        out["skipped"].append({"reason": "cannot ticket", "issue_ids": [3]})
        return httpx.Response(200, json=out)

    api.tickets_handler = partial
    tally = run(api, warehouse)
    assert (tally.succeeded, tally.failed, tally.skipped) == (1, 1, 1)
    assert tally.skip_reasons == {"cannot ticket": 1}
    assert tally.fail_reasons == {"tracker unavailable": 1}
    assert sorted(outcomes(warehouse)) == [("sast", 1, "succeeded"), ("sast", 2, "failed"), ("sast", 3, "skipped")]

    api.tickets_handler = None
    again = run(api, warehouse, run_id="r2")
    assert [sorted(int(i) for i in b["issue_ids"]) for b in sent(api)[1:]] == [[2]]  # only the failed one
    assert again.succeeded == 1


def test_lost_response_is_resolved_by_rereading_never_by_resending(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sca=[])

    def create_then_lose(body):
        ids = [int(i) for i in body["issue_ids"]]
        api.create_tickets({**body, "issue_ids": [i for i in ids if i != 3]})  # the server acted, partly...
        return httpx.Response(502, content=b"bad gateway")  # ...and the response was lost

    api.tickets_handler = create_then_lose
    tally = run(api, warehouse)

    assert len(sent(api)) == 1  # never re-sent
    assert api.calls("/findings")  # re-read instead
    assert (tally.recovered, tally.succeeded, tally.failed) == (2, 2, 1)
    stored = ticket_ids(warehouse, "sast")
    assert stored[1] is not None
    assert stored[1] == stored[2]
    assert stored[3] is None
    assert sorted(outcomes(warehouse)) == [("sast", 1, "succeeded"), ("sast", 2, "succeeded"), ("sast", 3, "failed")]

    api.tickets_handler = None
    run(api, warehouse, run_id="r2")
    assert [sorted(int(i) for i in b["issue_ids"]) for b in sent(api)] == [[1, 2, 3], [3]]
    created = [f["external_ticket"]["id"] for f in api.findings["sast"] if f["id"] in (1, 2, 3)]
    assert len(created) == 3
    assert created[0] == created[1] != created[2]


def test_ambiguous_write_error_type_is_what_the_client_raises(api: FakeApi) -> None:
    api.tickets_handler = lambda body: httpx.Response(500)
    with pytest.raises(AmbiguousWriteError):
        api.client().create_tickets(issue_type="sast", issue_ids=["1"])


def test_dry_run_records_the_plan_and_calls_nothing(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    tally = run(api, warehouse, dry_run=True)
    assert api.requests == []
    assert tally.planned == 5
    assert tally.requests == 0
    assert {o for *_, o in outcomes(warehouse)} == {"planned"}
    assert len(ticket_plan.plan_tickets(warehouse, POLICIES)) == 2  # a dry run does not block a real run


def test_ids_the_service_does_not_mention_are_reread_and_retryable(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sca=[])
    api.tickets_handler = lambda body: httpx.Response(200, json={"succeeded": [], "failed": [], "skipped": []})
    tally = run(api, warehouse)
    # the service acted on the request without saying what became of them: an unknown outcome, re-read
    assert api.requests[-1].url.path.endswith("/findings")
    assert tally.failed == 3
    assert tally.fail_reasons == {ticket_outcomes.LOST: 3}
    assert ticket_outcomes.unseen_ticket_suspects(warehouse, "sast") == {1, 2, 3}
    assert len(ticket_plan.plan_tickets(warehouse, POLICIES)) == 1


def answers(*responses):
    """A tickets handler that answers with ``responses`` in turn (an ``int``: that status, no body), then as the
    service does."""
    queue = list(responses)

    def handler(api: FakeApi, body: dict) -> httpx.Response:
        return httpx.Response(queue.pop(0)) if queue else api.create_tickets(body)

    return handler


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_that_did_nothing_is_sent_again_in_the_same_run(api: FakeApi, warehouse, monkeypatch,
                                                                       status: int) -> None:
    monkeypatch.setattr(ticket_send, "RESEND_DELAYS", (0.0, 0.0))
    seed(api, warehouse, sca=[])
    handler = answers(status)
    api.tickets_handler = lambda body: handler(api, body)
    tally = run(api, warehouse)
    # the re-read proved that nothing happened (no ticket, nothing changed): the same request again, this run
    assert [sorted(int(i) for i in b["issue_ids"]) for b in sent(api)] == [[1, 2, 3], [1, 2, 3]]
    assert (tally.requests, tally.resent, tally.succeeded, tally.failed) == (2, 3, 3, 0)
    assert sorted(outcomes(warehouse)) == [("sast", i, "succeeded") for i in (1, 2, 3)]


def test_resends_are_bounded_and_what_is_left_is_retried_next_run(api: FakeApi, warehouse, monkeypatch) -> None:
    monkeypatch.setattr(ticket_send, "RESEND_DELAYS", (0.0, 0.0))
    seed(api, warehouse, sca=[])
    handler = answers(503, 503, 503, 503)
    api.tickets_handler = lambda body: handler(api, body)
    tally = run(api, warehouse)
    assert len(sent(api)) == 1 + len(ticket_send.RESEND_DELAYS)
    assert (tally.failed, tally.fail_reasons) == (3, {ticket_outcomes.LOST: 3})
    assert len(ticket_plan.plan_tickets(warehouse, POLICIES)) == 1  # the next run re-reads and sends them


@pytest.mark.parametrize("case", ["no answer", "gateway timeout", "a ticket appeared", "a person acted"])
def test_a_lost_answer_is_not_sent_again_unless_proven_undone(api: FakeApi, warehouse, monkeypatch,
                                                              case: str) -> None:
    monkeypatch.setattr(ticket_send, "RESEND_DELAYS", (0.0, 0.0))
    seed(api, warehouse, sca=[])

    def lose(body: dict) -> httpx.Response:
        api.tickets_handler = None
        if case == "no answer":
            raise httpx.ReadTimeout("the client timed out; the service may still be working")
        if case == "a ticket appeared":  # it did part of the work before it failed
            api.by_id("sast", 2)["external_ticket"] = {"id": 77, "url": "https://tracker/77", "externalSlug": "T-77"}
        if case == "a person acted":
            api.by_id("sast", 3)["status"] = "reviewing"
        return httpx.Response(504 if case == "gateway timeout" else 500)

    api.tickets_handler = lose
    tally = run(api, warehouse)
    assert len(sent(api)) == 1
    assert tally.resent == 0
    if case == "a ticket appeared":
        assert ("sast", 2, "succeeded") in outcomes(warehouse)  # recorded from the re-read
    else:
        assert tally.succeeded == 0
