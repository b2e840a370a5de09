"""OpenLineage: the operators report the API operations they read and the warehouse tables they wrote, naming the
real service and the real database; without the OpenLineage provider nothing of it is imported."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from findings_provider.operators.dependencies import ExtractDependenciesOperator
from findings_provider.operators.policies import ListPolicyRulesOperator
from findings_provider.operators.triage import PlanTriageOperator
from findings_provider.warehouse import make_engine
from sqlalchemy import exc
from task_context import make_context

from devtools.services import skip_or_fail

from .helpers import TRIAGE_POLICIES

pytestmark = pytest.mark.integration


def names(datasets) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def test_a_run_reports_the_endpoint_it_read_and_the_sqlite_table_it_wrote(fresh, warehouse, tmp_path) -> None:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    operator = ExtractDependenciesOperator(task_id="deps")
    assert operator.execute(make_context())["dependencies"] > 0
    lineage = operator.get_openlineage_facets_on_complete(None)

    assert isinstance(lineage, OperatorLineage)
    assert all(isinstance(d, Dataset) for d in (*lineage.inputs, *lineage.outputs))
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(fresh.base_url))
    assert names(lineage.inputs) == [(origin, f"/api/v1/deployments/{fresh.deployment_id}/dependencies")]
    assert names(lineage.outputs) == [(f"sqlite://{tmp_path / 'wh.db'}", "dependencies")]


def test_without_a_run_the_connection_names_the_service_and_unknown_path_keys_stay_placeholders(
        fresh, warehouse) -> None:
    lineage = ListPolicyRulesOperator(task_id="rules").get_openlineage_facets_on_complete(None)
    paths = [name for _, name in names(lineage.inputs)]
    assert paths == [f"/api/v1/deployments/{fresh.deployment_id}/policies",
                     f"/api/v1/deployments/{fresh.deployment_id}/policies/{{policy_id}}"]
    assert names(lineage.outputs)[0][1] == "policy_rules"
    assert fresh.requests() == []  # naming the datasets made no request


def test_a_postgres_warehouse_is_named_by_host_port_database_and_schema(monkeypatch) -> None:
    url = "postgresql://postgres@127.0.0.1:5432/test"
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
    except exc.OperationalError as error:
        skip_or_fail(f"PostgreSQL at {url} is unreachable: {error.orig}")
    finally:
        engine.dispose()
    monkeypatch.setenv("AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT", url)
    lineage = PlanTriageOperator(task_id="plan", policies=TRIAGE_POLICIES).get_openlineage_facets_on_complete(None)
    assert lineage.inputs == []
    assert names(lineage.outputs) == [("postgres://127.0.0.1:5432", f"test.{schema}.triage_actions")]


def test_the_operators_import_nothing_of_openlineage() -> None:
    """(Airflow itself reads every installed provider's ``get_provider_info``; the lineage classes stay unloaded.)"""
    code = ("import sys, findings_provider.operators.triage, findings_provider.operators.tickets, "
            "findings_provider.operators.dependencies, findings_provider.operators.policies\n"
            "print([m for m in sys.modules if m.split('.')[0] == 'openlineage' or "
            "m.startswith(('airflow.providers.openlineage.extractors', 'airflow.providers.openlineage.plugins'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_extraction_reports_the_findings_it_read_and_the_history_it_wrote(fresh, warehouse, tmp_path) -> None:
    from findings_provider.operators.findings import ExtractFindingsOperator

    operator = ExtractFindingsOperator(task_id="extract", issue_types=["sast"])
    assert operator.execute(make_context())["findings"] > 0
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert [name for _, name in names(lineage.inputs)] == [
        f"/api/v1/deployments/{fresh.deployment_slug}/findings", f"/api/v1/deployments/{fresh.deployment_id}/secrets"]
    assert [name for _, name in names(lineage.outputs)] == ["findings", "finding_events", "finding_snapshots"]
