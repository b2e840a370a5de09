"""The same data in both wire dialects gives the same canonical warehouse, through extraction, triage and tickets.

One emulator seed served as the reference describes it and as the real service speaks (`--dialect real`); the
product's pipeline runs against each into its own SQLite warehouse; every canonical column must be equal (only
``raw`` differs, and the columns the real service does not send for secrets). In each, the copies the warehouse
counts (a finding on several branches once) are the findings the service lists with ``dedup=true``.
"""

from __future__ import annotations

import pytest
from dialect_compare import canonical_differences, finding_rows_of
from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import extraction, tickets, triage
from findings_provider.warehouse.branches import is_counted
from findings_provider.warehouse.schema import findings
from fixtures import client_of, make_warehouse, running_emulator
from sqlalchemy import select

pytestmark = pytest.mark.integration
CONFIG = load_pipeline_config()

def run_pipeline(dialect: str, path) -> dict:
    with running_emulator(findings=600, dialect=dialect) as emu, client_of(emu) as client:
        warehouse = make_warehouse(path)
        extraction.run_extraction(client, warehouse, ["sast", "sca", "secrets"], full_refresh=True)
        # the copies the warehouse counts are the findings the service lists with dedup=true (its web UI's count)
        service = {(t, f.id) for t in ("sast", "sca") for f in client.items(client.list_findings, t, dedup=True)}
        every = {(t, f.id) for t in ("sast", "sca") for f in client.items(client.list_findings, t)}
        with warehouse.engine.connect() as conn:
            counted = {(t, int(i)) for t, i in conn.execute(
                select(findings.c.issue_type, findings.c.id).where(findings.c.issue_type != "secrets", is_counted()))}
        assert counted == service
        assert len(service) < len(every)  # the data has findings on several branches
        policies = CONFIG.autotriage_triage.policies
        ids = triage.record_plan(warehouse, triage.plan_triage(warehouse, policies), dry_run=False, dag_id="d",
                                 run_id="both")
        triaged = triage.execute_plan(client, warehouse, ids, policies)
        ticketed = tickets.run_tickets(client, warehouse, CONFIG.ticket_creation.policies, run_id="both")
    return {"rows": finding_rows_of(path), "triaged": triaged["triaged"], "tickets": ticketed["tickets"]}


def test_the_warehouse_is_the_same_whichever_dialect_the_service_speaks(tmp_path) -> None:
    reference = run_pipeline("reference", tmp_path / "reference.db")
    real = run_pipeline("real", tmp_path / "real.db")

    assert reference["triaged"] == real["triaged"] > 0
    assert reference["tickets"] == real["tickets"] > 0
    assert set(reference["rows"]) == set(real["rows"])
    assert {t for t, _ in reference["rows"]} == {"sast", "sca", "secrets"}
    differences = canonical_differences(reference["rows"], real["rows"])
    assert not differences, differences[:3]
    assert reference["rows"][next(iter(reference["rows"]))]["raw"] != real["rows"][next(iter(real["rows"]))]["raw"]
