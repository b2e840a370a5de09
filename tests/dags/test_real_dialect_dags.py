"""All seven DAGs against an emulator that speaks the real service's dialect (``--dialect real``), with ``dag.test()``.

The same runner as the other DAG tests (``chaos/dagrun.py``); the emulator serves findings in the flat envelope
with snake_case sub-objects, proto-JSON secrets, dependencies without ids, digit-string scan ids, ... Every DAG
must succeed (``scan_monitoring`` fails only its alert task, on purpose: the generated data has failed scans), and
the warehouse must hold what the emulator serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chaos.dagrun import dag_stack
from findings_emulator.testing import EmulatorProcess

pytestmark = pytest.mark.integration

IN_ORDER = ("scan_monitoring", "findings_extraction", "autotriage_triage", "ticket_creation", "policy_tuning",
            "project_settings", "dependency_inventory")


@pytest.fixture(scope="module")
def real_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    work = tmp_path_factory.mktemp("real_dialect_dags")
    with EmulatorProcess(findings=600, dialect="real", extra_args=("--scan-duration", "2")) as emu, dag_stack(
        work, emu, config={"scan_monitoring": {"sensor_poke_interval": 0.5, "sensor_timeout": 120},
                           "findings_extraction": {"issue_types": ["sast", "sca", "secrets"]}},
        suite="dags", api_extra={"timeout": 30.0, "max_retries": 4},
    ) as runner:
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
    for dag_id in IN_ORDER:
        result = real_stack.run(dag_id)
        assert not result.error, result.message
        failed = result.failed_tasks()
        if dag_id == "scan_monitoring":
            assert failed == ["alert_failed_scans"], result.tis  # the generated failed scans, on purpose
        else:
            assert result.ok, (dag_id, result.tis, result.output[-3000:])
    warehouse = Warehouse(make_engine(f"sqlite:///{real_stack.warehouse}"))
    counts = emu.stats()["counts"]
    for issue_type in ("sast", "sca", "secrets"):
        assert warehouse.count_findings(issue_type) == counts["findings"][issue_type] > 0
    operations = {r["operation"] for r in emu.requests()}
    assert {"findings", "secrets", "triage", "tickets", "dependencies", "scans_search"} <= operations
    assert warehouse.count_findings("sast", status="open", autotriage_verdict="false_positive") == 0
