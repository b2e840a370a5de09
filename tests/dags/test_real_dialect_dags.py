"""All seven DAGs against an emulator that speaks the real service's dialect (``--dialect real``), with ``dag.test()``.

The same runner as the other DAG tests (``chaos/dagrun.py``); the emulator serves findings in the flat envelope
with snake_case sub-objects, proto-JSON secrets, dependencies without ids, digit-string scan ids, ... Every DAG
must succeed (``scan_monitoring`` too: the generated data has failed scans, which are alerted, not a failure), and
the warehouse must hold what the emulator serves. The same seven runs against a reference-dialect emulator of the
same seed must leave a warehouse whose canonical columns are equal (``dialect_compare``).

The two dialects' emulators start together and their runs go side by side (two runner subprocesses, each waited on
by a thread of its own): the emulators generate their timestamps relative to their own start, so a sequence of the
two would drift apart by the first one's whole run, which on a loaded machine exceeds ``dialect_compare``'s clock
slack; side by side, the module also takes the time of one run.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from chaos.dagrun import dag_stack
from dialect_compare import canonical_differences, finding_rows_of
from findings_emulator.testing import EmulatorProcess
from findings_provider.names import PIPELINE_DAGS

pytestmark = pytest.mark.integration

IN_ORDER = PIPELINE_DAGS


@contextmanager
def dialect_stack(dialect: str, work: Any) -> Iterator[Any]:
    """An emulator of ``dialect`` (same seed and size whatever the dialect) and a runner for it."""
    with EmulatorProcess(findings=600, dialect=dialect, extra_args=("--scan-duration", "2")) as emu, dag_stack(
        work, emu, config={"scan_monitoring": {"sensor_poke_interval": 0.5, "sensor_timeout": 120},
                           "findings_extraction": {"issue_types": ["sast", "sca", "secrets"]}},
        suite="dags", api_extra={"timeout": 30.0, "max_retries": 4},
    ) as runner:
        yield runner


def run_every_dag(runner: Any) -> None:
    """The seven DAGs on ``runner``, in order, each checked as it finished."""
    for dag_id in IN_ORDER:
        result = runner.run(dag_id)
        assert not result.error, result.message
        assert result.ok, (dag_id, result.tis, result.output[-3000:])


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both dialects' stacks, on which the seven DAGs ran side by side: dialect -> runner."""
    with ExitStack() as stack:
        runners = {dialect: stack.enter_context(dialect_stack(dialect, tmp_path_factory.mktemp(f"{dialect}_dialect")))
                   for dialect in ("real", "reference")}
        with ThreadPoolExecutor(max_workers=len(runners)) as pool:
            for done in [pool.submit(run_every_dag, runner) for runner in runners.values()]:
                done.result()  # a failed run's assertion, raised here
        yield runners


@pytest.fixture(scope="module")
def real_stack(stacks: dict[str, Any]) -> Any:
    return stacks["real"]


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


def test_the_dags_leave_the_same_canonical_warehouse_as_on_the_reference_dialect(stacks: dict[str, Any]) -> None:
    """Same seed, same seven runs, the reference dialect: every canonical column of every finding is equal."""
    real = finding_rows_of(stacks["real"].warehouse)
    reference = finding_rows_of(stacks["reference"].warehouse)
    assert {t for t, _ in reference} == {"sast", "sca", "secrets"}
    differences = canonical_differences(reference, real)
    assert not differences, differences[:3]
    triaged = [k for k, row in reference.items() if row["triage_reason"] == "false_positive" and k[0] == "sast"]
    ticketed = [k for k, row in reference.items() if row["external_ticket_id"] is not None]
    assert triaged  # the runs wrote to the service, and both warehouses saw the same writes
    assert ticketed
