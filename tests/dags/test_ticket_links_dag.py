"""``ticket_creation`` links findings to an existing ticket through its trigger-form params, and a ticket of ours
that a person unlinks in the service is recorded and never ticketed again: ``dag.test()`` against the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chaos.dagrun import dag_stack
from findings_emulator.testing import EmulatorProcess
from fixtures import client_of
from sqlalchemy import text

pytestmark = pytest.mark.integration

URL = "https://tracker.example/browse/SEC-4711"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("dag_links")
    with EmulatorProcess(findings=600) as emu, dag_stack(work, emu, suite="dags",
                                                         api_extra={"timeout": 30.0, "max_retries": 4}) as runner:
        yield {"emulator": emu, "runner": runner, "warehouse": runner.warehouse}


def _rows(stack: dict[str, Any], sql: str, **params: Any) -> list[Any]:
    from findings_provider.warehouse import make_engine

    with make_engine(f"sqlite:///{stack['warehouse']}").connect() as conn:
        return list(conn.execute(text(sql), params))


def _posted_ids(emu: EmulatorProcess, seq: int) -> list[int]:
    return [int(i) for r in emu.requests(seq) if r["operation"] == "tickets" for i in r["body"]["issue_ids"]]


def _last_seq(emu: EmulatorProcess) -> int:
    log = emu.requests()
    return log[-1]["seq"] if log else 0


def test_link_through_the_params_then_a_person_unlinks_one_and_it_is_not_ticketed_again(stack) -> None:
    emu, runner = stack["emulator"], stack["runner"]
    assert runner.run("findings_extraction").state == "success"
    client = client_of(emu)
    # two findings the default code policy would ticket: open, true positive, high or critical, no ticket
    a, b = [f.id for f in client.items(client.list_findings, "sast", status="open", autotriage_verdict="true_positive",
                                                  page_size=3000)
            if f.severity in ("high", "critical") and f.external_ticket is None][:2]

    seq = _last_seq(emu)
    first = runner.run("ticket_creation", {"link_ticket_url": URL, "link_finding_ids": [a, b]})
    assert first.state == "success", first.message or first.tis
    assert first.tis["link_tickets"] == "success"
    links = [r for r in emu.requests(seq) if r["operation"] == "tickets_link"]
    assert [sorted(int(i) for i in r["body"]["issue_ids"]) for r in links] == [sorted([a, b])]
    assert not {a, b} & set(_posted_ids(emu, seq))  # linked, so never sent to ticket creation
    service: dict[int, Any] = {f.id: f.external_ticket
                               for f in client.items(client.list_findings, "sast", page_size=3000) if f.id in (a, b)}
    assert service[a].url == service[b].url == URL
    stored = dict((r[0], r[1]) for r in _rows(stack, "SELECT id, external_ticket_id FROM findings WHERE "
                                                      "issue_type = 'sast' AND id IN (:a, :b)", a=a, b=b))
    assert stored == {a: service[a].id, b: service[b].id}  # the warehouse and the service agree
    linked = _rows(stack, "SELECT finding_id, ticket_id, ticket_url FROM ticket_actions WHERE outcome = 'linked' "
                          "ORDER BY finding_id")
    assert [tuple(r) for r in linked] == sorted([(a, service[a].id, URL), (b, service[b].id, URL)])

    assert client.unlink_tickets([a]).unlinked_issue_ids == [a]  # a person, through the API
    assert runner.run("findings_extraction", {"full_refresh": True}).state == "success"
    assert _rows(stack, "SELECT id FROM ticket_actions WHERE outcome = 'unlinked'") == []  # the ticket run records
    seq = _last_seq(emu)
    again = runner.run("ticket_creation")
    assert again.state == "success", again.message or again.tis
    assert a not in _posted_ids(emu, seq)
    assert not [r for r in emu.requests(seq) if r["operation"] in ("tickets_link", "tickets_unlink",
                                                                   "ticket_delete")]  # never unlinks itself
    latest = _rows(stack, "SELECT outcome, ticket_id, message FROM ticket_actions WHERE finding_id = :a AND "
                          "issue_type = 'sast' ORDER BY id", a=a)
    assert [r[0] for r in latest] == ["linked", "unlinked"]  # recorded once, as its own outcome
    assert latest[1][1] == service[a].id
    assert "no longer linked in the service" in latest[1][2]
    events = _rows(stack, "SELECT old_value, new_value FROM finding_events WHERE finding_id = :a AND "
                          "field = 'external_ticket_id' ORDER BY id", a=a)
    assert [tuple(e) for e in events][-1] == (str(service[a].id), None)  # in the findings history too
    now: dict[int, Any] = {f.id: f.external_ticket for f in client.items(client.list_findings, "sast", page_size=3000)}
    assert now[a] is None
    assert now[b].url == URL
    client.close()
