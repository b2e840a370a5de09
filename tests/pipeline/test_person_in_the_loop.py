"""A person acts in the service while the pipelines run: nothing the person touched is overridden or ticketed.

The person acts through the emulator's admin route ``/_emulator/findings/{id}/person`` (the way the service's UI
changes a finding: no API request of ours), between the extraction and the write. Against a real emulator
subprocess and a real SQLite warehouse.
"""

from __future__ import annotations

import math

import pytest
from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import approval, extraction, ticket_outcomes, ticket_plan, tickets, triage
from findings_provider.pipeline.approval import ApprovalError
from findings_provider.warehouse.schema import dropped_findings, findings, triage_actions
from present import present
from sqlalchemy import select
from warehouse_rows import stored_finding

pytestmark = pytest.mark.integration
CONFIG = load_pipeline_config()
TRIAGE_POLICY = CONFIG.autotriage_triage.policies[0]
TICKET_POLICIES = CONFIG.ticket_creation.policies


def service(client, issue_type):
    return {f.id: f for f in client.items(client.list_findings, issue_type, page_size=3000)}


def drops(warehouse):
    with warehouse.engine.connect() as conn:
        return {r.finding_id: r.reason for r in conn.execute(select(dropped_findings))}


def sent_ids(emulator, operation, since):
    return [int(i) for r in emulator.requests(since) if r["operation"] == operation for i in r["body"]["issue_ids"]]


def last_seq(emulator):
    log = emulator.requests()
    return log[-1]["seq"] if log else 0


def triage_run(client, warehouse, run_id, policies=(TRIAGE_POLICY,)):
    plans = triage.plan_triage(warehouse, policies)
    ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="autotriage_triage", run_id=run_id)
    return plans, triage.execute_plan(client, warehouse, ids, policies)


def twins_free(client, warehouse, candidates, count):
    """``count`` candidates whose fingerprint no other candidate shares (a twin would be triaged with them)."""
    with warehouse.engine.connect() as conn:
        fingerprint = dict(conn.execute(select(findings.c.id, findings.c.match_based_id)
                                        .where(findings.c.issue_type == "sast")).all())
    shared = {fp for fp in fingerprint.values() if list(fingerprint.values()).count(fp) > 1}
    return [i for i in candidates if fingerprint[i] not in shared][:count]


def test_triage_never_overrides_what_a_person_did_after_the_extraction(fresh, emulator_client, warehouse):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    (plan,) = triage.plan_triage(warehouse, [TRIAGE_POLICY])
    candidates = [f.id for f in plan.selected]
    reviewing, ignored, reopened, ticketed = twins_free(emulator_client, warehouse, candidates, 4)
    fresh.person_acts(reviewing, triage_state="reviewing")
    fresh.person_acts(ignored, triage_state="ignored", triage_reason="acceptable_risk")
    fresh.person_acts(reopened, triage_state="reopened")
    fresh.person_acts(ticketed, ticket="create")
    touched = {reviewing, ignored, reopened, ticketed}
    seq = last_seq(fresh)

    _, counts = triage_run(emulator_client, warehouse, "r1")

    reread = [r for r in fresh.requests(seq) if r["operation"] == "findings"]
    sent = sent_ids(fresh, "triage", seq)
    assert touched.isdisjoint(sent)
    assert sorted(sent) == sorted(set(candidates) - touched)
    now = service(emulator_client, "sast")
    assert (now[reviewing].status, now[reviewing].triage_state) == ("reviewing", "reviewing")
    assert (now[ignored].triage_reason, now[reopened].triage_state) == ("acceptable_risk", "reopened")
    assert now[ticketed].status == "open"
    assert now[ticketed].external_ticket is not None
    assert all(now[i].status == "ignored" for i in set(candidates) - touched)
    reasons = drops(warehouse)
    assert set(reasons) == touched
    assert "status 'open' -> 'reviewing'" in reasons[reviewing]
    assert "triage_state 'untriaged' -> 'reopened'" in reasons[reopened]
    assert "external_ticket_id None ->" in reasons[ticketed]
    assert all(r.startswith("changed in the service since the last extraction") for r in reasons.values())
    # what the person did is in the warehouse now, without waiting for the next extraction
    assert stored_finding(warehouse, "sast", reviewing).status == "reviewing"
    assert stored_finding(warehouse, "sast", ticketed).external_ticket_id is not None
    # the re-reads' cost: before the write at most ceil(candidates / 3000) + 1 requests for the policy, after it
    # (what it wrote read back) as many again at most
    assert len(reread) == counts["reread_requests"] + counts["settle_requests"]
    assert counts["reread_requests"] <= math.ceil(len(candidates) / 3000) + 1
    assert 1 <= counts["settle_requests"] <= math.ceil(len(candidates) / 3000) + 1


def test_a_finding_a_person_reopened_is_not_triaged_again_until_reintroduced(
    fresh, emulator_client, warehouse
):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    (plan,) = triage.plan_triage(warehouse, [TRIAGE_POLICY])
    first, second, bystander = twins_free(emulator_client, warehouse, [f.id for f in plan.selected], 3)
    triage_run(emulator_client, warehouse, "r1")
    assert service(emulator_client, "sast")[first].status == "ignored"

    fresh.person_acts(first, triage_state="reopened")  # the UI's "reopen"
    fresh.person_acts(second, status="open")  # open again, triage state left as it was
    extraction.run_extraction(emulator_client, warehouse, ["sast"], full_refresh=True)
    assert stored_finding(warehouse, "sast", first).status == stored_finding(warehouse, "sast", second).status == "open"
    seq = last_seq(fresh)
    plans, _ = triage_run(emulator_client, warehouse, "r2")
    assert plans[0].held_back == 2
    assert {first, second}.isdisjoint(sent_ids(fresh, "triage", seq))
    now = service(emulator_client, "sast")
    assert (now[first].status, now[second].status, now[bystander].status) == ("open", "open", "ignored")

    fresh.person_acts(first, reintroduce=True)  # a scan finds it again: new work
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    seq = last_seq(fresh)
    triage_run(emulator_client, warehouse, "r3")
    assert sent_ids(fresh, "triage", seq) == [first]
    assert service(emulator_client, "sast")[first].status == "ignored"


def test_a_twin_a_person_triaged_keeps_its_group_out_of_the_request(fresh, emulator_client, warehouse):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(findings.c.id, findings.c.match_based_id, findings.c.status)
                            .where(findings.c.issue_type == "sast")).all()
    (plan,) = triage.plan_triage(warehouse, [TRIAGE_POLICY])
    candidates = {f.id for f in plan.selected}
    by_fp: dict[str, list] = {}
    for row in rows:
        by_fp.setdefault(row.match_based_id, []).append(row)
    # two candidates that are twins: the person triages one; the service would triage it again with the other
    candidate, twin = next([m.id for m in members if m.id in candidates][:2] for members in by_fp.values()
                           if len([m for m in members if m.id in candidates]) >= 2)
    fresh.person_acts(twin, triage_state="reviewing")
    seq = last_seq(fresh)
    triage_run(emulator_client, warehouse, "r1")
    sent = sent_ids(fresh, "triage", seq)
    assert candidate not in sent
    assert twin not in sent
    assert service(emulator_client, "sast")[twin].status == "reviewing"
    assert drops(warehouse)[candidate].startswith(f"a twin on another branch (id {twin},")


def test_tickets_leave_alone_what_a_person_did_and_a_closed_ticket_stays_closed(
    fresh, emulator_client, warehouse
):
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    (code, supply) = ticket_plan.plan_policies(warehouse, TICKET_POLICIES)  # the secrets policy is disabled
    ticketed_by_person, ignored_by_person = [f.id for f in code.selected[:2]]
    fresh.person_acts(ticketed_by_person, ticket="create")
    fresh.person_acts(ignored_by_person, triage_state="ignored", triage_reason="acceptable_risk")
    seq = last_seq(fresh)

    out = tickets.run_tickets(emulator_client, warehouse, TICKET_POLICIES, run_id="t1")

    sent = sent_ids(fresh, "tickets", seq)
    expected = {f.id for f in code.selected[2:]} | {f.id for f in supply.selected}
    assert sorted(sent) == sorted(expected)
    assert out["dropped"] == 2
    now = service(emulator_client, "sast")
    assert now[ignored_by_person].external_ticket is None
    assert present(ticket_outcomes.ticket_of(now[ticketed_by_person]))["externalSlug"].startswith("PERSON-")

    closed = code.selected[2].id
    fresh.person_acts(closed, ticket="remove")  # a person closes the ticket we created
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"], full_refresh=True)
    assert stored_finding(warehouse, "sast", closed).external_ticket_id is None
    seq = last_seq(fresh)
    tickets.run_tickets(emulator_client, warehouse, TICKET_POLICIES, run_id="t2")
    assert closed not in sent_ids(fresh, "tickets", seq)

    fresh.person_acts(closed, reintroduce=True)  # a scan finds it again: new work
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    seq = last_seq(fresh)
    tickets.run_tickets(emulator_client, warehouse, TICKET_POLICIES, run_id="t3")
    assert sent_ids(fresh, "tickets", seq) == [closed]


def test_caps_stop_a_run_without_approval_and_a_param_only_lowers_them(fresh, emulator_client, warehouse):
    extraction.run_extraction(emulator_client, warehouse, ["sast", "sca"])
    small = [p.model_copy(update={"max_tickets": 1}) for p in TICKET_POLICIES]
    seq = last_seq(fresh)
    with pytest.raises(ApprovalError, match=r"policy code-true-positives plans \d+ tickets, above its cap of 1"):
        tickets.run_tickets(emulator_client, warehouse, small, run_id="c1")
    assert sent_ids(fresh, "tickets", seq) == []

    # the plan step records that a person must approve; the write refuses until one has
    plans = ticket_plan.plan_policies(warehouse, small)
    reasons = [r for p in plans if (r := p.over_cap)]
    approval.record_plan(warehouse, approval.TICKETS, "c2", reasons=reasons,
                         planned={p.policy.name: p.tickets for p in plans})
    with pytest.raises(ApprovalError, match="needs a person's approval and none is recorded"):
        tickets.run_tickets(emulator_client, warehouse, small, run_id="c2")
    approval.record_decision(warehouse, approval.TICKETS, "c2", approved=False, by="alice")
    with pytest.raises(ApprovalError, match=r"a person \(alice\) rejected this plan"):
        tickets.run_tickets(emulator_client, warehouse, small, run_id="c2")
    assert sent_ids(fresh, "tickets", seq) == []
    approval.record_decision(warehouse, approval.TICKETS, "c2", approved=True, by="alice")
    out = tickets.run_tickets(emulator_client, warehouse, small, run_id="c2")
    assert out["tickets"] == sum(p.tickets for p in plans) > 2

    # a run's parameter lowers a cap; a larger one does not raise it
    (plan,) = triage.plan_triage(warehouse, [TRIAGE_POLICY], max_findings=1)
    assert present(plan.cap).value == 1
    assert "lowered for this run from 5000" in present(plan.over_cap)
    (plan,) = triage.plan_triage(warehouse, [TRIAGE_POLICY], max_findings=10**6)
    assert present(plan.cap).value == TRIAGE_POLICY.max_findings == 5000


def test_a_plan_needing_approval_is_not_sent_without_one(fresh, emulator_client, warehouse):
    extraction.run_extraction(emulator_client, warehouse, ["sast"])
    capped = TRIAGE_POLICY.model_copy(update={"max_findings": 1})
    plans = triage.plan_triage(warehouse, [capped])
    reasons = triage.approval_reasons(plans, None)
    assert reasons
    ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="d", run_id="a1", reasons=reasons)
    record = approval.get_plan(warehouse, approval.TRIAGE, "a1")
    assert "none is recorded" in present(approval.missing_approval(record))
    approval.record_decision(warehouse, approval.TRIAGE, "a1", approved=True, by="bob")
    assert approval.missing_approval(approval.get_plan(warehouse, approval.TRIAGE, "a1")) is None
    seq = last_seq(fresh)
    triage.execute_plan(emulator_client, warehouse, ids, [capped])
    assert sorted(sent_ids(fresh, "triage", seq)) == sorted(f.id for f in plans[0].selected)
    with warehouse.engine.connect() as conn:
        assert {r.status for r in conn.execute(select(triage_actions))} == {"succeeded"}
