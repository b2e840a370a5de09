"""The race window is one request long: each triage or ticket request's findings are re-read right before it.

Against a real emulator subprocess and a real SQLite warehouse. The request log (ordered by ``seq``) shows each
write request right after the re-read of its own findings, narrowed to its repositories and rules; a person who
acts (through the emulator's admin route, as the service's UI does) after the first request and before the second
request's re-read is respected: the finding is not written.
"""

from __future__ import annotations

import math

import pytest
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.config import TicketPolicy, load_pipeline_config
from findings_provider.pipeline import extraction, ticket_plan, ticket_send, tickets, triage
from findings_provider.pipeline.selection import select_by_ids
from findings_provider.warehouse.schema import dropped_findings, findings
from sqlalchemy import select

pytestmark = pytest.mark.integration
TRIAGE_POLICY = load_pipeline_config().autotriage_triage.policies[0]
#: Every open code finding, one ticket per finding: enough requests of a few findings each.
TICKET_POLICY = TicketPolicy(name="window-open-code", issue_type="sast", select={"status": ["open"]})


def last_seq(emulator):
    log = emulator.requests()
    return log[-1]["seq"] if log else 0


def drops(warehouse):
    with warehouse.engine.connect() as conn:
        return {r.finding_id: r.reason for r in conn.execute(select(dropped_findings))}


def single_fingerprints(warehouse, ids):
    """Of ``ids``, those whose fingerprint no other finding shares (a twin would be triaged with them)."""
    with warehouse.engine.connect() as conn:
        by_id = dict(conn.execute(select(findings.c.id, findings.c.match_based_id)
                                  .where(findings.c.issue_type == "sast")).tuples().all())
    prints = list(by_id.values())
    return [i for i in ids if prints.count(by_id[i]) == 1]


def writes_and_their_rereads(log, operation):
    """Each write request of ``operation`` (in ``seq`` order) with the findings reads since the write before it."""
    out, reads = [], []
    for entry in sorted(log, key=lambda e: e["seq"]):
        if entry["operation"] == "findings":
            reads.append(entry)
        elif entry["operation"] == operation:
            out.append((reads, entry))
            reads = []
    return out


def test_each_triage_request_is_sent_right_after_the_re_read_of_its_own_findings(
    fresh, emulator_client, warehouse
):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    plans = triage.plan_triage(warehouse, [TRIAGE_POLICY], chunk_size=10)
    assert len(plans[0].chunks) >= 3
    action_ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="d", run_id="w1")
    seq = last_seq(fresh)

    counts = triage.execute_plan(emulator_client, warehouse, action_ids, [TRIAGE_POLICY])

    log = fresh.requests(seq)
    pairs = writes_and_their_rereads(log, "triage")
    dropped = drops(warehouse)  # only twins triaged with an earlier request: nobody acted
    assert all(r.startswith("already done") for r in dropped.values())
    assert len(pairs) == len(plans[0].chunks)
    for chunk, (reads, write) in zip(plans[0].chunks, pairs, strict=True):
        # the re-read of this request's findings, and nothing else, sits between the previous write and this one
        assert 1 <= len(reads) <= math.ceil(len(chunk) / FINDINGS_PAGE_SIZE.maximum) + 1
        assert reads[-1]["seq"] < write["seq"]
        assert sorted(write["body"]["issue_ids"]) == sorted(set(chunk) - set(dropped))
        # narrowed to the request's repositories (and rules), within the policy's own filters
        rows = select_by_ids(warehouse, "sast", chunk)
        assert sorted(reads[0]["query"]["repos"]) == sorted({str(r.repository_name) for r in rows})
        assert sorted(reads[0]["query"]["rules"]) == sorted({str(r.rule_name) for r in rows})
        assert reads[0]["query"]["status"] == ["open"]
        assert reads[0]["query"]["autotriage_verdict"] == ["false_positive"]
    # the read-back of what was written comes after the last request
    assert log[-1]["operation"] == "findings"
    assert counts["reread_requests"] == sum(len(reads) for reads, _ in pairs)
    assert counts["window_max_s"] is not None
    assert counts["window_max_s"] < 5


def test_a_person_acting_between_two_triage_requests_is_respected(fresh, emulator_client, warehouse):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    plans = triage.plan_triage(warehouse, [TRIAGE_POLICY], chunk_size=10)
    first, second = plans[0].chunks[:2]
    reviewing, ticketed = single_fingerprints(warehouse, second)[:2]
    action_ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="d", run_id="w2")
    seq = last_seq(fresh)

    # the person acts right after the first request was answered, before the second one's re-read
    sent = emulator_client.bulk_triage
    acted: list[int] = []

    def bulk_triage_then_a_person_acts(*args, **kwargs):
        result = sent(*args, **kwargs)
        if not acted:
            fresh.person_acts(reviewing, triage_state="reviewing")
            fresh.person_acts(ticketed, ticket="create")
            acted.append(last_seq(fresh))
        return result

    emulator_client.bulk_triage = bulk_triage_then_a_person_acts
    triage.execute_plan(emulator_client, warehouse, action_ids, [TRIAGE_POLICY])

    pairs = writes_and_their_rereads(fresh.requests(seq), "triage")
    assert sorted(pairs[0][1]["body"]["issue_ids"]) == sorted(first)
    reasons = drops(warehouse)
    assert sorted(pairs[1][1]["body"]["issue_ids"]) == sorted(set(second) - set(reasons))
    assert {reviewing, ticketed} <= set(second) & set(reasons)
    written = {i for _, write in pairs for i in write["body"]["issue_ids"]}
    assert {reviewing, ticketed}.isdisjoint(written)
    now = {f.id: f for f in emulator_client.items(emulator_client.list_findings, "sast", page_size=3000)}
    assert (now[reviewing].status, now[reviewing].triage_state) == ("reviewing", "reviewing")
    assert now[ticketed].status == "open"
    assert now[ticketed].external_ticket is not None
    # the rest dropped are twins an earlier request triaged with its own findings
    assert all(r.startswith("already done") for i, r in reasons.items() if i not in (reviewing, ticketed))
    assert "status 'open' -> 'reviewing'" in reasons[reviewing]
    assert "external_ticket_id None ->" in reasons[ticketed]


def test_each_ticket_request_is_sent_right_after_the_re_read_of_its_own_findings_and_a_person_is_respected(
    fresh, emulator_client, warehouse
):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    (plan,) = ticket_plan.plan_policies(warehouse, [TICKET_POLICY])
    batches, rereads = tickets.fresh_batches(emulator_client, warehouse, [plan], allowed={TICKET_POLICY.name: 12},
                                             tickets_per_call=4, run_id="t1")
    assert len(batches) == 3
    later = [i for b in batches[1:] for i in b.ids]
    ticketed, ignored = later[0], later[-1]
    seq = last_seq(fresh)

    sent = emulator_client.create_tickets
    acted: list[int] = []

    def create_tickets_then_a_person_acts(*args, **kwargs):
        result = sent(*args, **kwargs)
        if not acted:
            fresh.person_acts(ticketed, ticket="create")
            fresh.person_acts(ignored, triage_state="ignored", triage_reason="acceptable_risk")
            acted.append(last_seq(fresh))
        return result

    emulator_client.create_tickets = create_tickets_then_a_person_acts
    tally = ticket_send.create_tickets(emulator_client, warehouse, batches, run_id="t1", reread=rereads)

    pairs = writes_and_their_rereads(fresh.requests(seq), "tickets")
    assert len(pairs) == len(batches)
    for batch, (reads, write) in zip(batches, pairs, strict=True):
        assert 1 <= len(reads) <= math.ceil(len(batch.ids) / FINDINGS_PAGE_SIZE.maximum) + 1
        assert reads[-1]["seq"] < write["seq"]
        assert sorted(reads[0]["query"]["repos"]) == sorted({str(g.repository) for g in batch.groups})
        assert sorted(reads[0]["query"]["rules"]) == sorted({str(g.rule) for g in batch.groups})
        assert sorted(int(i) for i in write["body"]["issue_ids"]) == sorted(set(batch.ids) - {ticketed, ignored})
    now = {f.id: f for f in emulator_client.items(emulator_client.list_findings, "sast", page_size=3000)}
    assert now[ignored].external_ticket is None
    assert now[ticketed].external_ticket is not None
    reasons = drops(warehouse)
    assert set(reasons) == {ticketed, ignored}
    assert rereads.stats["dropped"] == 2
    assert rereads.stats["reread_requests"] == sum(len(reads) for reads, _ in pairs)
    assert tally.requests == len(batches)
    assert len(tally.windows) == len(batches)
