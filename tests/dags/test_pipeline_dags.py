"""The four findings DAGs: schedules, assets, pools and params (the conventions of every DAG are checked in
``test_dag_integrity.py``), and ``dag.test()``
runs against an emulator, checked in the warehouse and in the emulator's state and request log.

``dag.test()`` needs a metadata database: the runs happen in one long-lived subprocess with its own migrated
``AIRFLOW_HOME`` (so this test session's Airflow settings are untouched), driven one DAG run at a time.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_version import DAILY_CRON, scheduler_param_error
from chaos.dagrun import dag_stack
from findings_emulator.testing import EmulatorProcess
from findings_provider.names import FINDINGS_DAGS

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"
PYTHON = sys.executable


# --- integrity ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bags = {dag_id: DagBag(dag_folder=str(DAGS / f"{dag_id}.py")) for dag_id in FINDINGS_DAGS}
    return bags


@pytest.mark.parametrize("dag_id", FINDINGS_DAGS)
def test_findings_dags_are_tagged(dagbag: Any, dag_id: str) -> None:
    """The conventions every DAG follows are checked in ``test_dag_integrity.py``; these carry the findings tag."""
    assert "findings" in dagbag[dag_id].dags[dag_id].tags


def test_api_tasks_use_the_api_pool(dagbag: Any) -> None:
    api_tasks = {
        "scan_monitoring": ("search_scans", "wait_for_scan", "refresh_scans", "alert_failed_scans"),
        "findings_extraction": ("extract_findings",),
        "autotriage_triage": ("bulk_triage",),
        "ticket_creation": ("create_tickets",),
    }
    for dag_id, task_ids in api_tasks.items():
        dag = dagbag[dag_id].dags[dag_id]
        assert {dag.get_task(t).pool for t in task_ids} == {"findings_api"}


def test_schedules_and_asset_chain(dagbag: Any) -> None:
    from airflow.sdk import AssetAlias
    from findings_provider.assets import FINDINGS, SCANS, TICKETS, TRIAGE

    dags = {dag_id: dagbag[dag_id].dags[dag_id] for dag_id in FINDINGS_DAGS}
    assert dags["scan_monitoring"].timetable.expression == "*/15 * * * *"
    assert dags["findings_extraction"].timetable.timetable.expression == DAILY_CRON
    outlets = {(dag_id, t.task_id): (t.asset, list(t.outlets)) for dag_id, d in dags.items() for t in d.tasks
               if t.outlets}
    expected = {
        ("scan_monitoring", "publish_scans"): SCANS,
        ("findings_extraction", "publish_findings"): FINDINGS,
        ("autotriage_triage", "publish_triage"): TRIAGE,
        ("ticket_creation", "publish_tickets"): TICKETS,
    }
    assert set(outlets) == set(expected)
    for key, asset in expected.items():
        assert outlets[key] == (asset, [AssetAlias(name=f"{asset.name}/published")])
    for dag_id, asset in (("findings_extraction", SCANS), ("autotriage_triage", FINDINGS), ("ticket_creation", TRIAGE)):
        assert dags[dag_id].timetable.asset_condition == asset


def scheduler_params(dag: Any) -> Any:
    """The DAG's params as the scheduler holds them: it validates a run's conf with these when creating it."""
    from airflow.serialization.serialized_objects import DagSerialization

    return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params


@pytest.mark.parametrize(
    ("dag_id", "conf", "param"),
    [
        ("findings_extraction", {"issue_types": ["bogus"]}, "issue_types"),
        ("findings_extraction", {"issue_types": []}, "issue_types"),
        ("findings_extraction", {"full_refresh": "yes"}, "full_refresh"),
        ("autotriage_triage", {"approval_threshold": -1}, "approval_threshold"),
        ("autotriage_triage", {"dry_run": "maybe"}, "dry_run"),
        ("ticket_creation", {"tracker_project_id": "abc"}, "tracker_project_id"),
        ("scan_monitoring", {"lookback_days": 0}, "lookback_days"),
    ],
)
def test_bad_params_are_refused_naming_the_param(dagbag: Any, dag_id: str, conf: dict, param: str) -> None:
    with pytest.raises(scheduler_param_error(), match=f"Invalid input for param {param}"):
        scheduler_params(dagbag[dag_id].dags[dag_id]).deep_merge(conf).validate()


@pytest.mark.parametrize(
    ("dag_id", "conf"),
    [
        ("findings_extraction", {"issue_types": ["sast", "secrets"], "full_refresh": True}),
        ("autotriage_triage", {"approval_threshold": 0, "dry_run": True}),
        ("autotriage_triage", {"approval_threshold": None}),
        ("ticket_creation", {"tracker_project_id": "12345"}),
        ("scan_monitoring", {"lookback_days": 2}),
    ],
)
def test_good_params_pass(dagbag: Any, dag_id: str, conf: dict) -> None:
    scheduler_params(dagbag[dag_id].dags[dag_id]).deep_merge(conf).validate()


# --- dag.test() runs against the emulator --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Emulator + the shared ``dag.test()`` runner (migrated metadata DB, warehouse file, test pipeline.yaml)."""
    work = tmp_path_factory.mktemp("dag_test")
    with EmulatorProcess(findings=600, extra_args=("--scan-duration", "2")) as emu, dag_stack(
        work, emu, config={"scan_monitoring": {"sensor_poke_interval": 0.5, "sensor_timeout": 120}},
        suite="dags", api_extra={"timeout": 30.0, "max_retries": 4},
    ) as runner:
        yield {"emulator": emu, "runner": runner, "warehouse": runner.warehouse, "work": work}


def warehouse_of(stack: dict[str, Any]) -> Any:
    from findings_provider.warehouse import Warehouse, make_engine

    return Warehouse(make_engine(f"sqlite:///{stack['warehouse']}"))


def api_client(emu: EmulatorProcess) -> Any:
    from fixtures import client_of

    return client_of(emu)


def log_since(emu: EmulatorProcess, seq: int, operation: str | None = None) -> list[dict[str, Any]]:
    return [r for r in emu.requests(seq) if operation is None or r["operation"] == operation]


def last_seq(emu: EmulatorProcess) -> int:
    log = emu.requests()
    return log[-1]["seq"] if log else 0


def scalar(warehouse: Any, sql: str) -> Any:
    from sqlalchemy import text

    with warehouse.engine.connect() as conn:
        return conn.execute(text(sql)).scalar()


pytestmark_dag_test = pytest.mark.integration


@pytest.mark.integration
def test_bad_params_fail_the_run_at_once(stack: dict[str, Any]) -> None:
    emu, runner = stack["emulator"], stack["runner"]
    seq = last_seq(emu)
    result = runner.run("findings_extraction", {"issue_types": ["bogus"]})
    assert result.error == scheduler_param_error().__name__
    assert "param issue_types" in result.message
    result = runner.run("autotriage_triage", {"approval_threshold": -1})
    assert result.error == scheduler_param_error().__name__
    assert "param approval_threshold" in result.message
    assert log_since(emu, seq) == []  # nothing ran


@pytest.mark.integration
def test_scan_monitoring_waits_alerts_and_publishes(stack: dict[str, Any]) -> None:
    emu, runner = stack["emulator"], stack["runner"]
    # they finish while the mapped sensors wait, at the second read of their details, however long the tasks take
    # to start (a finishing time once passed before search_scans ran on a loaded machine, and no sensor was mapped)
    completes = emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after_reads=2)
    errors = emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after_reads=2, final_status="SCAN_STATUS_ERROR",
                             exit_code=5, branch="feature/broken")
    seq = last_seq(emu)
    result = runner.run("scan_monitoring")

    tis = result.tis
    sensors = {k: v for k, v in tis.items() if k.startswith("wait_for_scan[")}
    assert len(sensors) >= 2, result
    assert set(sensors.values()) == {"success"}
    assert (tis["search_scans"], tis["refresh_scans"], tis["publish_scans"]) == ("success",) * 3
    assert result.asset_events == ["findings://warehouse/scans"]  # scans completed: the next stage starts
    assert tis["alert_failed_scans"] == "success"  # a failed scan is alerted, not a failed pipeline
    assert result.state == "success"
    assert "no alert channel configured for scan_failed alerts" in result.output  # logged, never dropped
    assert f"scan {errors['id']} SCAN_STATUS_ERROR" in result.output
    assert "branch feature/broken" in result.output
    assert f"commit {errors['commit']}" in result.output
    assert "exit code 5" in result.output
    assert "CI job https://" in result.output  # generated failures carry their CI job URL
    gets = {r["path"].rsplit("/", 1)[1] for r in log_since(emu, seq, "scan_get")}
    assert {str(completes["id"]), str(errors["id"])} <= gets  # the sensors polled the scans

    warehouse = warehouse_of(stack)
    status = dict(warehouse.engine.connect().exec_driver_sql("SELECT id, status FROM scans").all())
    assert status[str(completes["id"])] == "SCAN_STATUS_COMPLETED"
    assert status[str(errors["id"])] == "SCAN_STATUS_ERROR"
    assert warehouse.get_state("scan_monitoring.watermark") is not None

    again = runner.run("scan_monitoring")
    assert again.tis["alert_failed_scans"] == "success"  # already alerted by the previous run
    assert again.tis["publish_scans"] == "success"
    assert again.asset_events == []  # nothing newly completed: no event, and every other task is green
    assert [k for k, v in again.tis.items() if v != "success"] == ["wait_for_scan"]  # nothing to wait for


@pytest.mark.integration
def test_findings_extraction_fills_the_warehouse_once(stack: dict[str, Any]) -> None:
    emu, runner = stack["emulator"], stack["runner"]
    seq = last_seq(emu)
    result = runner.run("findings_extraction")
    assert result.state == "success", result.message or result.tis
    assert result.tis == {"extract_findings": "success", "publish_findings": "success",
                             "summarize_findings": "success"}
    assert result.asset_events == ["findings://warehouse/findings"]
    counts = emu.stats()["counts"]["findings"]
    warehouse = warehouse_of(stack)
    assert warehouse.count_findings("sast") == counts["sast"]
    assert warehouse.count_findings("sca") == counts["sca"]
    assert warehouse.count_findings("secrets") == 0  # not in the default issue_types
    assert all(r["query"]["page_size"] == ["3000"] for r in log_since(emu, seq, "findings"))
    assert warehouse.get_state("findings_extraction.watermark.sast") is not None
    report = stack["work"] / "reports" / "findings_summary.html"
    assert report.exists()
    assert "Open findings" in report.read_text()
    assert "Open findings by severity and issue type" in result.output

    seq = last_seq(emu)
    again = runner.run("findings_extraction", {"issue_types": ["sast", "sca", "secrets"]})
    assert again.asset_events == ["findings://warehouse/findings"]  # the secrets are new
    assert warehouse.count_findings("secrets") == counts["secrets"]
    assert all("since" in r["query"] for r in log_since(emu, seq, "findings"))
    third = runner.run("findings_extraction")
    assert third.state == "success"
    assert third.asset_events == []  # nothing new: the next stage is not started
    total = scalar(warehouse, "SELECT count(*) FROM findings")
    assert total == scalar(warehouse, "SELECT count(*) FROM (SELECT DISTINCT issue_type, id FROM findings)")
    assert total == sum(counts.values())


@pytest.mark.integration
@pytest.mark.approval_in_dag_test
def test_autotriage_dry_run_then_approved_run(stack: dict[str, Any]) -> None:
    emu, runner = stack["emulator"], stack["runner"]
    client = api_client(emu)
    expected = {f.id for f in client.items(client.list_findings, "sast", status="open",
                                           autotriage_verdict="false_positive", page_size=3000)}
    assert expected

    seq = last_seq(emu)
    dry = runner.run("autotriage_triage", {"dry_run": True})
    assert dry.state == "success"
    assert dry.tis["approve_triage"] == "skipped"
    assert dry.asset_events == []  # a dry run does not start ticket creation
    assert log_since(emu, seq, "triage") == []
    warehouse = warehouse_of(stack)
    assert scalar(warehouse, "SELECT count(*) FROM triage_actions WHERE dry_run = 1 AND status = 'planned'") >= 1

    seq = last_seq(emu)
    by_hand = runner.run("autotriage_triage", {"approval_threshold": 0}, mark_success="approve_triage")
    assert by_hand.tis["approve_triage"] == "success"  # marked successful by hand: not a person's approval
    assert by_hand.tis["bulk_triage"] == "failed"
    assert "marking the approval task successful by hand is not approval" in by_hand.output
    assert log_since(emu, seq, "triage") == []

    result = runner.run("autotriage_triage", {"approval_threshold": 0}, answer=("approve_triage", "Approve"))
    assert result.state == "success", result.message or result.tis
    assert result.tis["check_approval"] == "success"
    assert result.tis["approve_triage"] == "success"
    assert result.tis["bulk_triage"] == "success"
    assert result.asset_events == ["findings://warehouse/triage_actions"]
    sent = log_since(emu, seq, "triage")
    assert sorted(i for r in sent for i in r["body"]["issue_ids"]) == sorted(expected)
    assert all(r["body"]["new_triage_state"] == "ignored" and r["body"]["new_triage_reason"] == "false_positive"
               for r in sent)
    assert all("autotriage_triage run manual__" in r["body"]["new_note"] for r in sent)
    after = {f.id: f for f in client.items(client.list_findings, "sast", page_size=3000)}
    assert all(after[i].status == "ignored" for i in expected)
    assert warehouse.count_findings("sast", status="open", autotriage_verdict="false_positive") == 0

    seq = last_seq(emu)
    nothing = runner.run("autotriage_triage", {"approval_threshold": 0})
    assert nothing.tis["approve_triage"] == "skipped"  # an empty selection needs no approval
    assert nothing.asset_events == ["findings://warehouse/triage_actions"]  # tickets follow every triage run
    assert log_since(emu, seq, "triage") == []


@pytest.mark.integration
def test_ticket_creation_tickets_each_finding_once(stack: dict[str, Any]) -> None:
    emu, runner = stack["emulator"], stack["runner"]
    client = api_client(emu)
    seq = last_seq(emu)
    dry = runner.run("ticket_creation", {"dry_run": True})
    assert dry.state == "success"
    assert dry.asset_events == []
    assert log_since(emu, seq, "tickets") == []

    result = runner.run("ticket_creation", {"tracker_project_id": "4242"})
    assert result.state == "success"
    assert result.asset_events == ["findings://warehouse/ticket_actions"]
    posts = log_since(emu, seq, "tickets")
    assert posts
    assert all(p["body"]["tracker_project_id"] == "4242" and p["body"]["group_issues"] is True for p in posts)
    sent = [int(i) for p in posts for i in p["body"]["issue_ids"]]
    assert len(sent) == len(set(sent))
    sast = {f.id: f for f in client.items(client.list_findings, "sast", page_size=3000)}
    wanted = {i for i, f in sast.items() if f.status == "open" and f.autotriage_verdict == "true_positive"
              and f.severity in ("high", "critical") and (f.external_ticket is None or i in sent)}
    assert {i for p in posts if p["body"]["issue_type"] == "sast" for i in map(int, p["body"]["issue_ids"])} == wanted
    assert all(sast[i].external_ticket is not None for i in wanted)
    warehouse = warehouse_of(stack)
    assert scalar(warehouse, "SELECT count(*) FROM ticket_actions WHERE outcome = 'succeeded'") == len(sent)

    seq = last_seq(emu)
    again = runner.run("ticket_creation")
    assert again.state == "success"
    assert again.asset_events == []
    assert log_since(emu, seq, "tickets") == []
