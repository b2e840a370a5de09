"""Tickets of ours the service lost: a finding whose ticket a person unlinked, deleted or replaced is recorded
(``unlinked``, ``replaced``) and not ticketed again, unless its policy says ``reticket_unlinked``."""

from __future__ import annotations

from findings_provider.config import TicketPolicy
from findings_provider.pipeline import extraction, ticket_links, tickets
from findings_provider.pipeline.selection import select_findings

from .fakes import NOW, FakeApi
from .ticket_runs import POLICIES, outcomes, seed, sent, ticket_ids


def _ticket_run(api: FakeApi, warehouse, run_id: str, policies=POLICIES) -> dict:
    return tickets.run_tickets(api.client(), warehouse, policies, run_id=run_id)


def _person_changes_tickets(api: FakeApi, warehouse) -> None:
    """A person unlinks finding 1's ticket and links finding 2 to another ticket; a full pull stores both."""
    api.by_id("sast", 1)["external_ticket"] = None
    api.by_id("sast", 2)["external_ticket"] = {"id": 999, "url": "https://tracker/by-hand/999",
                                               "externalSlug": "HAND-999"}
    extraction.run_extraction(api.client(), warehouse, ["sast", "sca"], full_refresh=True, now=NOW, page_size=100)
    api.requests.clear()


def _latest(warehouse) -> dict[tuple[str, int], str]:
    latest: dict[tuple[str, int], str] = {}
    for issue_type, finding_id, outcome in outcomes(warehouse):
        if outcome != "planned":
            latest[(issue_type, finding_id)] = outcome
    return latest


def test_an_unlinked_or_replaced_ticket_of_ours_is_recorded_and_not_ticketed_again(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    first = _ticket_run(api, warehouse, "r1")
    assert first["succeeded"] == 5  # sast 1, 2, 3 and sca 20, 21
    _person_changes_tickets(api, warehouse)
    assert ticket_ids(warehouse, "sast")[1] is None

    again = _ticket_run(api, warehouse, "r2")
    assert again["tickets_lost"] == {"unlinked": 1, "replaced": 1}
    assert sent(api) == []  # neither finding is ticketed again
    latest = _latest(warehouse)
    assert latest[("sast", 1)] == "unlinked"
    assert latest[("sast", 2)] == "replaced"
    assert latest[("sast", 3)] == "succeeded"
    messages = {r.finding_id: r.message for r in _rows(warehouse, ("unlinked", "replaced"))}
    assert "no longer linked in the service" in messages[1]
    assert "replaced by ticket 999 (HAND-999" in messages[2]

    third = _ticket_run(api, warehouse, "r3")  # recorded once: the outcome is the latest from then on
    assert third["tickets_lost"] == {"unlinked": 0, "replaced": 0}
    assert sent(api) == []
    assert len(_rows(warehouse, ("unlinked", "replaced"))) == 2


def test_reticket_unlinked_tickets_an_unlinked_finding_again_never_a_replaced_one(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    _ticket_run(api, warehouse, "r1")
    _person_changes_tickets(api, warehouse)
    reticket = [TicketPolicy.model_validate({**p.model_dump(), "reticket_unlinked": True}) for p in POLICIES]
    again = _ticket_run(api, warehouse, "r2", reticket)
    assert again["tickets_lost"] == {"unlinked": 1, "replaced": 1}
    assert [int(i) for body in sent(api) for i in body["issue_ids"]] == [1]  # 2 carries a person's ticket
    assert _latest(warehouse)[("sast", 1)] == "succeeded"
    assert api.by_id("sast", 1)["external_ticket"] is not None
    assert ticket_ids(warehouse, "sast")[1] == api.by_id("sast", 1)["external_ticket"]["id"]


def test_the_default_selection_leaves_a_lost_ticket_alone_and_the_option_frees_it(api: FakeApi, warehouse) -> None:
    seed(api, warehouse)
    _ticket_run(api, warehouse, "r1")
    _person_changes_tickets(api, warehouse)
    assert ticket_links.reconcile_links(warehouse, ["sast"], "r2") == {"unlinked": 1, "replaced": 0 + 1}
    policy = next(p for p in POLICIES if p.issue_type == "sast")
    assert [f.id for f in select_findings(warehouse, "sast", policy.selector, without_ticket=True)] == []
    freed = select_findings(warehouse, "sast", policy.selector, without_ticket=True, reticket_unlinked=True)
    assert [f.id for f in freed] == [1]


def _rows(warehouse, wanted: tuple[str, ...]) -> list:
    from findings_provider.warehouse.schema import ticket_actions
    from sqlalchemy import select

    with warehouse.engine.connect() as conn:
        return list(conn.execute(select(ticket_actions).where(ticket_actions.c.outcome.in_(wanted))))
