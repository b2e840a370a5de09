"""LinkTicketOperator against the emulator: re-read right before the write, findings with another ticket left alone,
the cap, dry run, a lost answer resolved by a re-read (never a second request), and the checks of its inputs."""

from __future__ import annotations

from typing import Any

import pytest
from findings_provider.compat import AirflowFailException
from findings_provider.operators.tickets import LinkTicketOperator
from findings_provider.pipeline.ticket_links import LinkNotDone
from findings_provider.warehouse.schema import dropped_findings, findings, ticket_actions
from fixtures import ops, seq_of
from sqlalchemy import select
from task_context import make_context

from .helpers import default_api, extract

pytestmark = pytest.mark.integration

URL = "https://tracker.example/browse/SEC-77"


def _without_ticket(count: int) -> list[int]:
    """Ids of open code findings with no ticket in the service (as the warehouse holds them after ``extract``)."""
    with default_api() as client:
        return [f.id for f in client.items(client.list_findings, "sast", status="open", page_size=3000)
                if f.external_ticket is None][:count]


def _service_tickets(ids: list[int]) -> dict[int, Any]:
    with default_api() as client:
        return {f.id: f.external_ticket
                for f in client.items(client.list_findings, "sast", page_size=3000) if f.id in ids}


def _rows(warehouse, table, *where) -> list[Any]:
    with warehouse.engine.connect() as conn:
        return list(conn.execute(select(table).where(*where)))


def _link(**kwargs: Any) -> dict[str, Any]:
    return LinkTicketOperator(task_id="link", **kwargs).execute(make_context("link"))


def test_link_rereads_first_leaves_another_ticket_alone_and_stores_what_the_service_says(fresh, warehouse) -> None:
    extract()
    a, b, c = _without_ticket(3)
    person = fresh.person_acts(c, ticket="create")["ticket"]  # after the extraction: the warehouse does not know
    seq = seq_of(fresh)
    out = _link(ticket_url=URL, finding_ids=[a, b, c])

    log = fresh.requests(seq)
    link_at = [r["seq"] for r in log if r["operation"] == "tickets_link"]
    assert len(link_at) == 1
    assert any(r["operation"] == "findings" and r["seq"] < link_at[0] for r in log)  # re-read before the write
    assert sorted(int(i) for i in ops(fresh, seq, "tickets_link")[0]["body"]["issue_ids"]) == sorted([a, b])
    assert ops(fresh, seq, "tickets") == []  # a link creates no ticket
    assert out["linked"] == 2
    assert out["left_alone"] == [{"id": c, "reason": out["left_alone"][0]["reason"]}]
    assert f"already carries ticket {person['id']} ({person['externalSlug']}" in out["left_alone"][0]["reason"]

    service = _service_tickets([a, b, c])
    assert service[a].url == service[b].url == URL
    assert service[c].id == person["id"]  # untouched
    stored = {r.id: r.external_ticket_id for r in _rows(warehouse, findings, findings.c.id.in_([a, b, c]))}
    assert stored == {a: service[a].id, b: service[b].id, c: person["id"]}  # the warehouse equals the service
    linked = _rows(warehouse, ticket_actions, ticket_actions.c.outcome == "linked")
    assert sorted((r.finding_id, r.ticket_id, r.ticket_url) for r in linked) == sorted(
        [(a, service[a].id, URL), (b, service[b].id, URL)])
    assert [r.finding_id for r in _rows(warehouse, dropped_findings, dropped_findings.c.kind == "link")] == [c]

    seq = seq_of(fresh)
    again = _link(ticket_url=URL, finding_ids=[a, b])
    assert again["already_linked"] == 2
    assert ops(fresh, seq, "tickets_link") == []  # nothing left to link: no write


def test_the_cap_bounds_the_findings_linked_in_one_run(fresh, warehouse) -> None:
    extract()
    ids = _without_ticket(3)
    seq = seq_of(fresh)
    out = _link(ticket_url=URL, finding_ids=ids, max_links=2)
    (request,) = ops(fresh, seq, "tickets_link")
    assert [int(i) for i in request["body"]["issue_ids"]] == ids[:2]
    assert out["linked"] == 2
    assert out["deferred"] == ids[2:]
    assert _service_tickets(ids[2:])[ids[2]] is None
    with pytest.raises(AirflowFailException, match="max_links = 51 must be <= 50"):
        _link(ticket_url=URL, finding_ids=ids, max_links=51)


def test_dry_run_plans_from_the_warehouse_without_a_request(fresh, warehouse) -> None:
    extract()
    ids = _without_ticket(2)
    seq = seq_of(fresh)
    out = _link(ticket_url=URL, finding_ids=ids, dry_run="True")
    assert fresh.requests(seq) == []
    assert out["planned"] == 2
    assert out["linked"] == 0
    planned = _rows(warehouse, ticket_actions)
    assert sorted((r.finding_id, r.outcome, r.ticket_url) for r in planned) == sorted(
        (i, "planned", URL) for i in ids)
    assert all(t is None for t in _service_tickets(ids).values())


def test_a_lost_answer_is_resolved_by_a_reread_never_by_a_second_request(fresh, warehouse) -> None:
    extract()
    ids = _without_ticket(2)
    fresh.add_fault(operation="tickets_link", schedule=["act_500"])  # links, then answers 500
    seq = seq_of(fresh)
    out = _link(ticket_url=URL, finding_ids=ids)
    assert len(ops(fresh, seq, "tickets_link")) == 1
    assert out["linked"] == 2
    service = _service_tickets(ids)
    linked = _rows(warehouse, ticket_actions, ticket_actions.c.outcome == "linked")
    assert sorted((r.finding_id, r.ticket_id) for r in linked) == sorted((i, service[i].id) for i in ids)
    assert all(r.message == "recorded from a re-read after a lost response" for r in linked)


def test_a_server_error_that_did_nothing_is_recorded_failed_and_fails_the_task(fresh, warehouse) -> None:
    extract()
    ids = _without_ticket(2)
    fresh.add_fault(operation="tickets_link", schedule=["503"])  # answers 503 without linking
    seq = seq_of(fresh)
    with pytest.raises(LinkNotDone, match="2 of 2 findings are not linked"):
        _link(ticket_url=URL, finding_ids=ids)
    assert len(ops(fresh, seq, "tickets_link")) == 1  # never resent blindly
    failed = _rows(warehouse, ticket_actions, ticket_actions.c.outcome == "failed")
    assert sorted(r.finding_id for r in failed) == sorted(ids)
    assert all(r.message.startswith("no ticket after a lost response") for r in failed)
    fresh.clear_faults()
    assert _link(ticket_url=URL, finding_ids=ids)["linked"] == 2  # a retry re-reads and links


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"ticket_url": "ftp://tracker.example/1", "finding_ids": [1]},
     "ticket_url = 'ftp://tracker.example/1' must be an http\\(s\\) URL"),
    ({"ticket_url": "not a url", "finding_ids": [1]}, "ticket_url = 'not a url' must be an http\\(s\\) URL"),
    ({"ticket_url": "None", "finding_ids": "[1]"}, "ticket_url is required"),
    ({"ticket_url": URL, "finding_ids": [0, 3]}, "finding_ids: \\[0\\] must be >= 1"),
    ({"ticket_url": URL, "finding_ids": "[-4]"}, "finding_ids: \\[-4\\] must be >= 1"),
    ({"ticket_url": URL, "finding_ids": ["x1"]}, "finding_ids: \\['x1'\\] are not integers"),
    ({"ticket_url": URL, "finding_ids": [1], "dry_run": "perhaps"}, "dry_run = 'perhaps' is not a boolean"),
])
def test_bad_inputs_are_refused_naming_them_before_any_request(fresh, warehouse, kwargs, message) -> None:
    with pytest.raises(AirflowFailException, match=message):
        _link(**kwargs)
    assert fresh.requests() == []


def test_no_ids_does_nothing(fresh, warehouse) -> None:
    ctx = make_context("empty")
    out = LinkTicketOperator(task_id="link", ticket_url="None", finding_ids="[]").execute(ctx)
    assert out["linked"] == 0
    assert ctx["ti"].xcom["linked"] == 0
    assert fresh.requests() == []
