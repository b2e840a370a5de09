"""Ticket creation: selection, grouping, outcomes per finding, and never a second ticket for a finding."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from findings_provider.client import AmbiguousWriteError, FindingsApiError
from findings_provider.config import TicketPolicy, load_pipeline_config
from findings_provider.pipeline import extraction, tickets
from findings_provider.pipeline.selection import SelectedFinding
from findings_provider.warehouse.schema import findings, ticket_actions
from sqlalchemy import select

from .fakes import NOW, FakeApi, finding

POLICIES = load_pipeline_config().ticket_creation.policies  # the shipped defaults


def seed(api: FakeApi, warehouse, sast=None, sca=None) -> None:
    api.findings["sast"] = sast if sast is not None else [
        finding(1, verdict="true_positive", severity="high", rule="r1"),
        finding(2, verdict="true_positive", severity="critical", rule="r1"),
        finding(3, verdict="true_positive", severity="critical", rule="r2"),
        finding(4, verdict="true_positive", severity="medium", rule="r1"),  # severity too low
        finding(5, verdict="false_positive", severity="high", rule="r1"),  # not a true positive
        finding(6, verdict="true_positive", severity="high", rule="r1", status="ignored"),  # not open
        finding(7, verdict="true_positive", severity="high", rule="r1", ticket=55),  # already ticketed
        finding(8, severity="high", rule="r1"),  # no verdict
    ]
    api.findings["sca"] = sca if sca is not None else [
        finding(20, reachability="reachable", severity="high", rule="CVE-1"),
        finding(21, reachability="always_reachable", severity="critical", rule="CVE-1", repo="acme/web"),
        finding(22, reachability="unreachable", severity="critical", rule="CVE-1"),
        finding(23, reachability="reachable", severity="low", rule="CVE-1"),
    ]
    extraction.run_extraction(api.client(), warehouse, ["sast", "sca"], now=NOW, page_size=100)
    api.requests.clear()


def outcomes(warehouse):
    with warehouse.engine.connect() as conn:
        return [(r.issue_type, r.finding_id, r.outcome) for r in
                conn.execute(select(ticket_actions).order_by(ticket_actions.c.id))]


def ticket_ids(warehouse, issue_type):
    with warehouse.engine.connect() as conn:
        return dict(conn.execute(select(findings.c.id, findings.c.external_ticket_id)
                                 .where(findings.c.issue_type == issue_type)).all())


def run(api, warehouse, *, dry_run=False, run_id="r1", policies=POLICIES, **kwargs):
    batches = tickets.plan_tickets(warehouse, policies, **kwargs)
    return tickets.create_tickets(api.client(), warehouse, batches, dry_run=dry_run, run_id=run_id)


def sent(api):
    return [json.loads(r.content) for r in api.calls("/tickets", "POST")]


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


def test_groups_are_capped_at_50_and_batches_at_20_tickets() -> None:
    selected = [SelectedFinding(i, f"repo{i % 45}", "rule", "main", "high") for i in range(45 * 2)]
    selected += [SelectedFinding(1000 + i, "big", "rule", "main", "high") for i in range(120)]
    keyed = tickets.group_findings(selected)
    assert sum(len(groups) for groups in keyed) == 45 + 3
    assert sorted(len(g.ids) for g in keyed[0 if keyed[0][0].repository == "big" else -1]) == [20, 50, 50]
    batches = tickets.batch_groups("sast", "p", keyed, 20)
    assert len(batches) == math.ceil(48 / 20)
    for batch in batches:
        assert len(batch.groups) <= 20
        keys = [(g.repository, g.rule) for g in batch.groups]
        assert len(keys) == len(set(keys))  # never two groups of one (repository, rule) in a request
    assert sorted(i for b in batches for i in b.ids) == sorted(f.id for f in selected)
    ungrouped = tickets.group_findings(selected[:30], group_issues=False)
    assert len(tickets.batch_groups("sast", "p", ungrouped, 20)) == 2


def test_requests_per_run_are_ceil_of_groups_over_20(api: FakeApi, warehouse) -> None:
    sast = [finding(i, verdict="true_positive", severity="high", rule=f"rule{i}") for i in range(1, 46)]
    seed(api, warehouse, sast=sast, sca=[])
    tally = run(api, warehouse)
    assert tally.requests == len(sent(api)) == math.ceil(45 / 20)
    assert tally.tickets == 45


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
    assert tickets.plan_tickets(warehouse, POLICIES) == []  # ambiguous findings are not sent again

    api._findings = original_findings  # type: ignore[method-assign]
    api.tickets_handler = None
    reconciled = tickets.reconcile_ambiguous(api.client(), warehouse, ["sast"], "r2")
    assert reconciled.succeeded == 3
    assert len(sent(api)) == 1
    assert tickets.plan_tickets(warehouse, POLICIES) == []
    assert all(v is not None for k, v in ticket_ids(warehouse, "sast").items() if k in (1, 2, 3))


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
    assert len(tickets.plan_tickets(warehouse, POLICIES)) == 2  # a dry run does not block a real run


def test_secrets_policy_is_off_by_default_and_can_be_enabled(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sast=[], sca=[])
    api.findings["secrets"] = [{**finding(900, severity="critical"), "rule_name": None, "secret_type": "aws"}]
    extraction.run_extraction(api.client(), warehouse, ["secrets"], now=NOW)
    assert tickets.plan_tickets(warehouse, POLICIES) == []
    enabled = [TicketPolicy.model_validate({**p.model_dump(), "enabled": True}) for p in POLICIES
               if p.issue_type == "secrets"]
    (batch,) = tickets.plan_tickets(warehouse, enabled)
    assert (batch.issue_type, batch.ids) == ("secrets", [900])


def test_ids_the_service_does_not_mention_are_reread_and_retryable(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sca=[])
    api.tickets_handler = lambda body: httpx.Response(200, json={"succeeded": [], "failed": [], "skipped": []})
    tally = run(api, warehouse)
    # the service acted on the request without saying what became of them: an unknown outcome, re-read
    assert api.requests[-1].url.path.endswith("/findings")
    assert tally.failed == 3
    assert tally.fail_reasons == {tickets.LOST: 3}
    assert tickets.unseen_ticket_suspects(warehouse, "sast") == {1, 2, 3}
    assert len(tickets.plan_tickets(warehouse, POLICIES)) == 1


def test_approval_body_shows_service_data_as_inert_cells(api: FakeApi, warehouse) -> None:
    from markdown_view import table_rows

    hostile = 'acme/x | 1 | ![i](http://evil) <b>x</b>'
    seed(api, warehouse, sast=[finding(1, verdict="true_positive", repo=hostile, rule="r*1*")], sca=[])
    plans = tickets.plan_policies(warehouse, POLICIES)
    subject, body = tickets.approval_text(plans, ["policy code-true-positives plans 1 tickets"])
    assert subject == "Create 1 tickets?"
    policies, groups = table_rows(body)[:2], table_rows(body)[2:]  # fails on any link, image, HTML, emphasis
    assert [row[0] for row in policies] == ["code-true-positives", "reachable-supply-chain"]
    assert groups == [[hostile, "r*1*", "1"]]


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
    monkeypatch.setattr(tickets, "RESEND_DELAYS", (0.0, 0.0))
    seed(api, warehouse, sca=[])
    handler = answers(status)
    api.tickets_handler = lambda body: handler(api, body)
    tally = run(api, warehouse)
    # the re-read proved that nothing happened (no ticket, nothing changed): the same request again, this run
    assert [sorted(int(i) for i in b["issue_ids"]) for b in sent(api)] == [[1, 2, 3], [1, 2, 3]]
    assert (tally.requests, tally.resent, tally.succeeded, tally.failed) == (2, 3, 3, 0)
    assert sorted(outcomes(warehouse)) == [("sast", i, "succeeded") for i in (1, 2, 3)]


def test_resends_are_bounded_and_what_is_left_is_retried_next_run(api: FakeApi, warehouse, monkeypatch) -> None:
    monkeypatch.setattr(tickets, "RESEND_DELAYS", (0.0, 0.0))
    seed(api, warehouse, sca=[])
    handler = answers(503, 503, 503, 503)
    api.tickets_handler = lambda body: handler(api, body)
    tally = run(api, warehouse)
    assert len(sent(api)) == 1 + len(tickets.RESEND_DELAYS)
    assert (tally.failed, tally.fail_reasons) == (3, {tickets.LOST: 3})
    assert len(tickets.plan_tickets(warehouse, POLICIES)) == 1  # the next run re-reads and sends them


@pytest.mark.parametrize("case", ["no answer", "gateway timeout", "a ticket appeared", "a person acted"])
def test_a_lost_answer_is_not_sent_again_unless_proven_undone(api: FakeApi, warehouse, monkeypatch,
                                                              case: str) -> None:
    monkeypatch.setattr(tickets, "RESEND_DELAYS", (0.0, 0.0))
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


def test_tickets_a_lost_request_created_later_are_recorded_once_the_warehouse_holds_them(api: FakeApi,
                                                                                         warehouse) -> None:
    seed(api, warehouse, sca=[])

    def lose(body: dict) -> httpx.Response:
        api.tickets_handler = None
        raise httpx.ReadTimeout("the client timed out; the service goes on working")

    api.tickets_handler = lose
    assert run(api, warehouse).failed == 3  # no ticket yet on the re-read
    assert tickets.unseen_ticket_suspects(warehouse, "sast") == {1, 2, 3}
    api.create_tickets(sent(api)[0])  # the service finishes the request after all
    extraction.run_extraction(api.client(), warehouse, ["sast"], now=NOW, full_refresh=True, page_size=100)
    assert tickets.plan_tickets(warehouse, POLICIES) == []  # the warehouse knows their tickets

    assert tickets.record_known_tickets(warehouse, "sast", "r2") == 3
    latest = {finding_id: outcome for _, finding_id, outcome in outcomes(warehouse)}  # in the order recorded
    assert latest == {1: "succeeded", 2: "succeeded", 3: "succeeded"}
    assert tickets.unseen_ticket_suspects(warehouse, "sast") == set()
    assert tickets.record_known_tickets(warehouse, "sast", "r3") == 0  # recorded once
