"""Alerts reach people: the channels of ``alerts`` in pipeline.yaml, a real SMTP server, a notifier class; an alert no
channel takes is logged, a broken channel does not hide the alert from the others."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from airflow_version import AIRFLOW_3_3
from findings_provider.alerts import Alert, deliver
from findings_provider.config import AlertsConfig, ConfigError, PipelineConfig, load_pipeline_config
from findings_provider.notifications import FindingsAlertNotifier, context_alert
from smtp_inbox import Mailbox

ROOT = Path(__file__).resolve().parents[1]
SENT: list[dict[str, Any]] = []


class RecordingNotifier:
    """Stands for any Airflow notifier class named in a ``notifier`` channel (built with the channel's kwargs)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def notify(self, context: Any) -> None:
        if self.kwargs.get("broken"):
            raise RuntimeError("chat is down")
        SENT.append(self.kwargs)


@pytest.fixture
def mailbox(monkeypatch: pytest.MonkeyPatch):
    with Mailbox() as box:
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", box.connection_json())
        yield box


def config(*channels: dict[str, Any], **rest: Any) -> AlertsConfig:
    return AlertsConfig.model_validate({"channels": list(channels), **rest})


def test_an_alert_is_mailed_through_the_smtp_connection(mailbox: Mailbox) -> None:
    alert = Alert("scan_failed", "2 scan(s) failed or never finished", "scan 7 <error> in acme/api",
                  "https://ci.example.test/job/7")
    done = deliver([alert], config({"type": "smtp", "to": ["appsec@example.test", "lead@example.test"]}))
    assert done.as_dict() == {"sent": 1, "failed": 0, "unrouted": 0}
    (mail,) = mailbox.wait_for(lambda m: True)
    assert mail.subject == "2 scan(s) failed or never finished"
    assert set(mail.recipients) == {"appsec@example.test", "lead@example.test"}
    assert mail.sender == "findings-airflow@example.test"  # the connection's from_email
    assert "scan 7 &lt;error&gt; in acme/api" in mail.text  # escaped in the HTML body
    assert 'href="https://ci.example.test/job/7"' in mail.text


def test_channels_take_their_events_and_a_broken_one_hides_nothing(mailbox: Mailbox, caplog) -> None:
    SENT.clear()
    cfg = config(
        {"type": "notifier", "class": f"{__name__}.RecordingNotifier", "kwargs": {"broken": True}},
        {"type": "notifier", "class": f"{__name__}.RecordingNotifier",
         "kwargs": {"text": "{subject} -> {link} {unknown} {", "channel": "#appsec"}, "events": ["scan_failed"]},
        {"type": "smtp", "to": ["oncall@example.test"], "events": ["pipeline_failed"]},
    )
    alerts = [Alert("scan_failed", "1 scan(s) failed", "scan 9", "https://ci/9"),
              Alert("pipeline_failed", "task failed", "ValueError: x"),
              Alert("approval_waiting", "approve me", "")]
    with caplog.at_level(logging.WARNING):
        done = deliver(alerts, cfg)
    # the broken notifier takes every kind and fails each time; the others still send theirs
    assert done.as_dict() == {"sent": 2, "failed": 3, "unrouted": 0}
    assert SENT == [{"text": "1 scan(s) failed -> https://ci/9 {unknown} {", "channel": "#appsec"}]
    assert [m.subject for m in mailbox.wait_for(lambda m: True)] == ["task failed"]
    assert caplog.text.count("chat is down") == 3
    assert "no alert channel configured" not in caplog.text  # a failed channel is not a missing one


def test_an_alert_no_channel_takes_is_logged_saying_so(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        done = deliver([Alert("scan_failed", "3 scan(s) failed", "...")], config())
    assert done.as_dict() == {"sent": 0, "failed": 0, "unrouted": 1}
    assert "no alert channel configured for scan_failed alerts" in caplog.text
    assert "3 scan(s) failed" in caplog.text


@pytest.mark.parametrize(("alerts", "message"), [
    ({"channels": [{"type": "smtp"}]}, "alerts.channels.0.smtp.to"),
    ({"channels": [{"type": "smtp", "to": []}]}, "alerts.channels.0.smtp.to"),
    ({"channels": [{"type": "pager"}]}, "alerts.channels.0"),
    ({"channels": [{"type": "smtp", "to": ["a@b"], "events": ["scan_exploded"]}]}, "scan_exploded"),
    ({"fail_on_alert": "sometimes"}, "alerts.fail_on_alert"),
])
def test_a_bad_alerts_section_names_the_field(tmp_path: Path, alerts: dict, message: str) -> None:
    data = yaml.safe_load((ROOT / "include" / "pipeline.yaml").read_text())
    data["alerts"] = alerts
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_pipeline_config(path)


def test_the_shipped_file_routes_nothing_and_keeps_runs_green() -> None:
    shipped = load_pipeline_config(ROOT / "include" / "pipeline.yaml").alerts
    assert shipped.channels == []
    assert shipped.fail_on_alert is False


def with_channels(tmp_path, channels: list[dict]) -> PipelineConfig:
    """The shipped configuration with ``alerts.channels`` set, loaded from a file as a DAG file loads it."""
    data = yaml.safe_load((ROOT / "include" / "pipeline.yaml").read_text())
    data["alerts"] = {"channels": channels}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_pipeline_config(path)


def test_the_failure_callback_mails_the_task_and_its_error(mailbox: Mailbox, tmp_path) -> None:
    from findings_provider.dag_defaults import dag_settings

    cfg = with_channels(tmp_path, [{"type": "smtp", "to": ["oncall@example.test"]}])
    # the callback every task of a pipeline DAG gets, with the channels of the file the DAG was parsed with
    (callback,) = dag_settings(cfg, "findings_extraction", schedule=None)["default_args"]["on_failure_callback"]
    assert isinstance(callback, FindingsAlertNotifier)
    ti = SimpleNamespace(dag_id="findings_extraction", task_id="extract_findings", run_id="manual__1",
                         try_number=4, log_url="http://airflow.test/dags/findings_extraction/runs/manual__1")
    callback.notify({"ti": ti, "exception": ValueError("the warehouse is gone")})
    (mail,) = mailbox.wait_for(lambda m: True)
    assert mail.subject == "findings pipeline failed: findings_extraction.extract_findings (manual__1, try 4)"
    assert "ValueError: the warehouse is gone" in mail.text
    assert ti.log_url in mail.text


def test_an_approval_alert_names_the_request_and_links_to_its_page() -> None:
    ti = SimpleNamespace(dag_id="ticket_creation", task_id="approve_tickets", run_id="r1", map_index=-1,
                         log_url="http://airflow.test/log")
    task = SimpleNamespace(subject="Create 240 tickets (above the cap of 100)?")
    alert = context_alert("approval_waiting", {"ti": ti, "task_instance": ti, "task": task})
    assert alert.subject == "approval waiting: ticket_creation.approve_tickets (r1)"
    assert alert.body == "Create 240 tickets (above the cap of 100)?"
    assert alert.link is not None
    assert alert.link.endswith(("/dags/ticket_creation/runs/r1/tasks/approve_tickets/required_actions?map_index=-1",
                                "http://airflow.test/log"))


def test_a_missed_deadline_is_mailed_from_the_callback_airflow_runs(mailbox: Mailbox, tmp_path) -> None:
    """The Deadline alert's callback as the triggerer calls it (``callback(**kwargs, context=...)``, awaited), with
    the keyword arguments the DAG's Deadline alert stores (JSON: the metadata database keeps them)."""
    import asyncio
    import json

    from findings_provider.config import Deadlines
    from findings_provider.dag_defaults import deadline_for
    from findings_provider.notifications import deadline_missed

    cfg = with_channels(tmp_path, [{"type": "smtp", "to": ["oncall@example.test"], "events": ["deadline_missed"]}])
    cfg.alerts.deadlines = Deadlines(ticket_creation=1440)
    stored = json.loads(json.dumps(deadline_for(cfg, "ticket_creation").callback.kwargs))
    context = {"dag_run": {"dag_id": "ticket_creation", "dag_run_id": "scheduled__2026-11-24", "state": "running",
                           "queued_at": "2026-11-24T00:00:05Z"},
               "deadline": {"id": "d1", "deadline_time": "2026-11-25T00:00:05Z"}}
    # a string: Airflow stores the result in a text column (a dict crashed the triggerer)
    assert asyncio.run(deadline_missed(**stored, context=context)) == "sent 1, failed 0, unrouted 0"
    (mail,) = mailbox.wait_for(lambda m: True)
    assert mail.subject == "ticket_creation run scheduled__2026-11-24 not finished 1440 minutes after it was queued"
    assert "approval" in mail.text
    assert "2026-11-25T00:00:05Z" in mail.text


def test_dags_get_the_deadlines_of_the_file_and_none_when_null() -> None:
    from findings_provider.config import Deadlines
    from findings_provider.dag_defaults import dag_settings, deadline_for

    cfg = load_pipeline_config().model_copy(deep=True)
    cfg.alerts.deadlines = Deadlines(scan_monitoring=45, policy_tuning=None)
    alert = deadline_for(cfg, "scan_monitoring")
    assert alert.interval.total_seconds() == 45 * 60
    assert alert.callback.path == "findings_provider.notifications.deadline_missed"
    # named where Airflow names deadlines (3.3), unnamed where it cannot (3.2): compat.deadline_alert
    expected = "scan_monitoring not finished 45 minutes after it was queued" if AIRFLOW_3_3 else None
    assert getattr(alert, "name", None) == expected
    assert deadline_for(cfg, "policy_tuning") is None
    assert deadline_for(cfg, "project_settings") is None
    assert "deadline" not in dag_settings(cfg, "project_settings", schedule=None)
    assert dag_settings(cfg, "scan_monitoring", schedule=None)["deadline"] == alert


def test_every_pipeline_dag_and_only_those_can_have_a_deadline() -> None:
    from findings_provider.config import Deadlines
    from findings_provider.names import PIPELINE_DAGS

    assert set(Deadlines.model_fields) == set(PIPELINE_DAGS)


def test_a_deadline_of_zero_minutes_is_refused_naming_the_dag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"deadlines.scan_monitoring\n  Input should be greater than 0"):
        AlertsConfig.model_validate({"deadlines": {"scan_monitoring": 0}})
    with pytest.raises(ValueError, match=r"deadlines.scan_monitorng\n  Extra inputs are not permitted"):
        AlertsConfig.model_validate({"deadlines": {"scan_monitorng": 45}})  # a typo is not "no deadline"
