"""Extra links: each operator with a dashboard link stores it when the task starts, before anything can fail or
wait, and the link leads to the page about that run."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from findings_provider import get_provider_info
from findings_provider.config import PipelineConfig
from findings_provider.dashboard.app import create_app
from findings_provider.dashboard.links import NAV_ROUTE
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.operators.dependencies import DependencyReportOperator
from findings_provider.operators.findings import FindingsSummaryOperator
from findings_provider.operators.links import DashboardLink
from findings_provider.operators.policies import ApplyPolicyChangesOperator, ProposePolicyChangesOperator
from findings_provider.operators.tickets import CreateTicketsOperator
from findings_provider.operators.triage import BulkTriageOperator
from findings_provider.warehouse import TicketAction, Warehouse
from task_context import make_context

LINKED: dict[type[FindingsBaseOperator], dict[str, tuple[str, dict[str, list[str]]]]] = {
    BulkTriageOperator: {"Findings triaged": ("findings", {"touched": ["triage"]})},
    CreateTicketsOperator: {"Findings ticketed": ("findings", {"touched": ["ticket"]}),
                            "Tickets created": ("run", {})},
    ApplyPolicyChangesOperator: {"Rules changed": ("run", {})},
    ProposePolicyChangesOperator: {"Policy report": ("reports", {"name": ["policy_tuning"]})},
    FindingsSummaryOperator: {"Findings report": ("reports", {"name": ["findings_summary"]})},
    DependencyReportOperator: {"Inventory report": ("reports", {"name": ["dependency_inventory"]})},
}

#: The arguments without a default, where a class has some.
REQUIRED: dict[type, dict[str, Any]] = {
    ApplyPolicyChangesOperator: {"propose_task_id": "propose"}, BulkTriageOperator: {"policies": []},
    CreateTicketsOperator: {"policies": []}, ProposePolicyChangesOperator: {"thresholds": []},
}


class Boom(Exception):
    pass


@pytest.mark.parametrize("operator_class", list(LINKED), ids=lambda c: c.__name__)
def test_links_are_stored_before_the_task_does_anything(operator_class: type[FindingsBaseOperator],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: Any, context: Any) -> None:
        raise Boom

    monkeypatch.setattr(operator_class, "run", fail)
    kwargs: dict[str, Any] = REQUIRED.get(operator_class, {})
    operator = operator_class(task_id="t", **kwargs)
    context = make_context("scheduled__2026-11-25T00:00:00+00:00")
    with pytest.raises(Boom):
        operator.execute(context)
    stored = {link.name: context["ti"].xcom.get(link.xcom_key) for link in operator.operator_extra_links}
    assert set(stored) == set(LINKED[operator_class])
    for name, (page, query) in LINKED[operator_class].items():
        url = urlsplit(stored[name])
        assert url.path == f"/plugin/{NAV_ROUTE}"  # the dashboard's React app in Airflow's UI
        assert parse_qs(url.query) == {"view": [page], **query, "run_id": ["scheduled__2026-11-25T00:00:00+00:00"]}


def test_every_link_class_is_declared_in_the_provider_info() -> None:
    declared = set(get_provider_info()["extra-links"])
    used = {f"{type(link).__module__}.{type(link).__name__}" for links in
            (c.operator_extra_links for c in LINKED) for link in links}
    assert used <= declared
    assert all(isinstance(link, DashboardLink) for c in LINKED for link in c.operator_extra_links)


def test_the_links_pages_show_what_that_run_wrote(warehouse: Warehouse) -> None:
    from dashboard.conftest import finding

    warehouse.upsert_findings([finding(i) for i in range(1, 8)])
    ours = warehouse.record_triage_action(run_id="r1", dag_id="d", issue_type="sast", dry_run=False,
                                          issue_ids=[2, 3], request={})
    warehouse.update_triage_action(ours, status="succeeded", num_triaged=2)
    warehouse.record_triage_action(run_id="r2", dag_id="d", issue_type="sast", dry_run=False, issue_ids=[4],
                                   request={})
    warehouse.record_ticket_actions([
        TicketAction("sast", 5, "succeeded", run_id="r1", ticket_id=91, ticket_url="https://jira/SEC-91",
                     external_slug="SEC-91"),
        TicketAction("sast", 6, "failed", run_id="r1"),
    ])
    web = TestClient(create_app(lambda: (warehouse, PipelineConfig()), auth=lambda: None))
    triaged = web.get("/api/findings", params={"run_id": "r1", "touched": "triage"}).json()
    assert [r["id"] for r in triaged["rows"]] == [2, 3]
    assert triaged["total"] == 2
    ticketed = web.get("/api/findings", params={"run_id": "r1", "touched": "ticket"}).json()
    assert [r["id"] for r in ticketed["rows"]] == [5]
    run = web.get("/api/run", params={"run_id": "r1"}).json()
    created = [t for t in run["tickets"] if t["outcome"] == "succeeded"]
    assert [(t["ticket_id"], t["ticket_url"], t["external_slug"]) for t in created] == [
        (91, "https://jira/SEC-91", "SEC-91")]
