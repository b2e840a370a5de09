"""What the ticket tests share: the shipped ticket policies, a fake API and warehouse seeded with findings, a run
that plans and sends, and what was sent and recorded."""

from __future__ import annotations

import json

from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import extraction, ticket_plan, ticket_send
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
    batches = ticket_plan.plan_tickets(warehouse, policies, **kwargs)
    return ticket_send.create_tickets(api.client(), warehouse, batches, dry_run=dry_run, run_id=run_id)


def sent(api):
    return [json.loads(r.content) for r in api.calls("/tickets", "POST")]
