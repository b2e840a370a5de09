"""ScanCompletionSensor: checks once before deferring, turns events into outcomes, pokes when not deferrable."""

from __future__ import annotations

import time

import pytest
from findings_provider.compat import AirflowException, AirflowFailException, AirflowSensorTimeout, TaskDeferred
from findings_provider.operators.links import ScanLink
from findings_provider.sensors.scan import ScanCompletionSensor
from findings_provider.triggers.scan import ScanStatusTrigger

pytestmark = pytest.mark.integration
LINK = ScanLink().xcom_key


def sensor(scan_id, **kwargs) -> ScanCompletionSensor:
    kwargs.setdefault("poke_interval", 0.2)
    kwargs.setdefault("timeout", 60)
    return ScanCompletionSensor(task_id="wait", scan_id=scan_id, **kwargs)


def test_defaults_and_template_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    s = ScanCompletionSensor(task_id="wait", scan_id="{{ params.scan }}")
    assert s.deferrable is False  # Airflow's [operators] default_deferrable
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert ScanCompletionSensor(task_id="wait", scan_id="1").deferrable is True
    assert ScanCompletionSensor(task_id="wait", scan_id="1", deferrable=False).deferrable is False
    assert s.fail_on_failure is True
    assert "scan_id" in s.template_fields
    assert "findings_conn_id" in s.template_fields
    assert [link.name for link in s.operator_extra_links] == ["Scan"]


def test_finished_scan_succeeds_without_deferring(emulator, context) -> None:
    scan = emulator.create_scan(status="SCAN_STATUS_COMPLETED")
    result = sensor(str(scan["id"])).execute(context)
    assert result == {"scan_ids": [str(scan["id"])], "statuses": {str(scan["id"]): "SCAN_STATUS_COMPLETED"}}
    assert context["ti"].xcom[LINK].startswith("https://")


def test_running_scan_defers_to_the_trigger_after_one_check(emulator, context) -> None:
    scan = emulator.create_scan(status="SCAN_STATUS_RUNNING")
    seq = emulator.requests()[-1]["seq"] if emulator.requests() else 0
    with pytest.raises(TaskDeferred) as deferred:
        sensor(scan["id"], deferrable=True, timeout=600, poke_interval=7).execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, ScanStatusTrigger)
    assert deferred.value.method_name == "execute_complete"
    _, kwargs = trigger.serialize()
    assert kwargs["scan_ids"] == [str(scan["id"])]
    assert kwargs["poll_interval"] == 7.0
    assert kwargs["deployment_id"] == emulator.deployment_id
    assert kwargs["findings_conn_id"] == "findings_api_default"
    assert time.time() + 590 < kwargs["deadline"] <= time.time() + 600
    assert len([r for r in emulator.requests(seq) if r["operation"] == "scan_get"]) == 1  # checked once
    assert LINK in context["ti"].xcom  # pushed before waiting


def test_failed_scan_fails_before_deferring_or_is_tolerated(emulator, context) -> None:
    scan = emulator.create_scan(status="SCAN_STATUS_ERROR", exit_code=4)
    with pytest.raises(AirflowFailException, match=f"scan {scan['id']} finished unsuccessfully: SCAN_STATUS_ERROR"):
        sensor(scan["id"]).execute(context)
    result = sensor(scan["id"], fail_on_failure=False).execute(context)
    assert result["statuses"] == {str(scan["id"]): "SCAN_STATUS_ERROR"}


def test_never_finished_scan_fails(emulator, context) -> None:
    scan = emulator.create_scan(status="SCAN_STATUS_RUNNING", started_ago=7200)
    with pytest.raises(AirflowFailException, match="SCAN_STATUS_NEVER_FINISHED"):
        sensor(scan["id"]).execute(context)


def test_unknown_scan_fails_without_retries(emulator, context) -> None:
    with pytest.raises(AirflowFailException, match="NotFoundError"):
        sensor("999999999").execute(context)


def test_execute_complete_turns_events_into_outcomes(context) -> None:
    s = sensor(["1", "2"])
    ok = {"status": "success", "statuses": {"1": "SCAN_STATUS_COMPLETED", "2": "SCAN_STATUS_COMPLETED"},
          "message": "2 scan(s) completed"}
    assert s.execute_complete(context, ok) == {"scan_ids": ["1", "2"], "statuses": ok["statuses"]}
    failed = {"status": "failed", "message": "scan 2 finished unsuccessfully: SCAN_STATUS_CANCELLED"}
    with pytest.raises(AirflowFailException, match="scan 2 finished unsuccessfully: SCAN_STATUS_CANCELLED"):
        s.execute_complete(context, failed)
    with pytest.raises(AirflowSensorTimeout, match="timed out after 60s: still waiting"):
        s.execute_complete(context, {"status": "timeout", "message": "still waiting"})
    with pytest.raises(AirflowException, match="could not read scan status: flaky") as transient:
        s.execute_complete(context, {"status": "error", "message": "flaky", "retryable": True})
    assert not isinstance(transient.value, AirflowFailException)  # a task retry may help
    with pytest.raises(AirflowFailException, match="unknown scan status 'X'"):
        s.execute_complete(context, {"status": "error", "message": "unknown scan status 'X'", "retryable": False})
    lenient = sensor("1", fail_on_failure=False)
    assert lenient.execute_complete(context, {**failed, "statuses": {"1": "SCAN_STATUS_ERROR"}})["statuses"] == {
        "1": "SCAN_STATUS_ERROR"}


def test_poke_mode_waits_in_the_worker(emulator, context) -> None:
    scan = emulator.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0.6)
    started = time.monotonic()
    result = sensor(scan["id"], deferrable=False, poke_interval=0.2).execute(context)
    assert result == {"scan_ids": [str(scan["id"])], "statuses": {str(scan["id"]): "SCAN_STATUS_COMPLETED"}}
    assert time.monotonic() - started >= 0.5


def test_poke_mode_times_out(emulator, context) -> None:
    scan = emulator.create_scan(status="SCAN_STATUS_RUNNING")
    with pytest.raises(AirflowSensorTimeout):
        sensor(scan["id"], deferrable=False, poke_interval=0.1, timeout=0.3).execute(context)
