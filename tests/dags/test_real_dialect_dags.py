"""All seven DAGs against an emulator that speaks the real service's dialect (``--dialect real``), with ``dag.test()``.

The same runner as the other DAG tests (``chaos/dagrun.py``); the emulator serves findings in the flat envelope
with snake_case sub-objects, proto-JSON secrets, dependencies without ids, digit-string scan ids, ... Every DAG
must succeed (``scan_monitoring`` too: the generated data has failed scans, which are alerted, not a failure), and
the warehouse must hold what the emulator serves. The same seven runs against a reference-dialect emulator of the
same seed must leave a warehouse whose canonical columns are equal (``dialect_compare``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from chaos.dagrun import dag_stack
from dialect_compare import canonical_differences, finding_rows_of
from findings_emulator.testing import EmulatorProcess
from findings_provider.names import PIPELINE_DAGS

pytestmark = pytest.mark.integration

IN_ORDER = PIPELINE_DAGS


@contextmanager
def every_dag_run(dialect: str, work: Any) -> Iterator[Any]:
    """An emulator of ``dialect`` (same seed and size whatever the dialect) and a runner on which the seven DAGs
    ran in order, each checked as it finished."""
    with EmulatorProcess(findings=600, dialect=dialect, extra_args=("--scan-duration", "2")) as emu, dag_stack(
        work, emu, config={"scan_monitoring": {"sensor_poke_interval": 0.5, "sensor_timeout": 120},
                           "findings_extraction": {"issue_types": ["sast", "sca", "secrets"]}},
        suite="dags", api_extra={"timeout": 30.0, "max_retries": 4},
    ) as runner:
        for dag_id in IN_ORDER:
            result = runner.run(dag_id)
            assert not result.error, result.message
            assert result.ok, (dag_id, result.tis, result.output[-3000:])
        yield runner


@pytest.fixture(scope="module")
def real_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with every_dag_run("real", tmp_path_factory.mktemp("real_dialect_dags")) as runner:
        yield runner


def test_every_dag_succeeds_against_the_real_dialect(real_stack: Any) -> None:
    from findings_provider.warehouse import Warehouse, make_engine

    emu = real_stack.emulator
    with emu.client() as api:  # the emulator really speaks the real dialect: proto-JSON secrets, a flat envelope
        secret = api.get(f"/api/v1/deployments/{emu.deployment_id}/secrets").json()["findings"][0]
        code = api.get(f"/api/v1/deployments/{emu.deployment_slug}/findings", params={"issue_type": "sast"}).json()
    assert isinstance(secret["id"], str)
    assert secret["severity"].startswith("SEVERITY_")
    assert "findings" in code
    assert "sastFindings" not in code
    warehouse = Warehouse(make_engine(f"sqlite:///{real_stack.warehouse}"))
    counts = emu.stats()["counts"]
    for issue_type in ("sast", "sca", "secrets"):
        assert warehouse.count_findings(issue_type) == counts["findings"][issue_type] > 0
    operations = {r["operation"] for r in emu.requests()}
    assert {"findings", "secrets", "triage", "tickets", "dependencies", "scans_search"} <= operations
    assert warehouse.count_findings("sast", status="open", autotriage_verdict="false_positive") == 0


def test_the_dags_leave_the_same_canonical_warehouse_as_on_the_reference_dialect(
    real_stack: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Same seed, same seven runs, the reference dialect: every canonical column of every finding is equal."""
    real = finding_rows_of(real_stack.warehouse)
    with every_dag_run("reference", tmp_path_factory.mktemp("reference_dialect_dags")) as runner:
        reference = finding_rows_of(runner.warehouse)
    assert {t for t, _ in reference} == {"sast", "sca", "secrets"}
    differences = canonical_differences(reference, real)
    assert not differences, differences[:3]
    triaged = [k for k, row in reference.items() if row["triage_reason"] == "false_positive" and k[0] == "sast"]
    ticketed = [k for k, row in reference.items() if row["external_ticket_id"] is not None]
    assert triaged  # the runs wrote to the service, and both warehouses saw the same writes
    assert ticketed
