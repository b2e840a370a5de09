"""Programme metrics from the warehouse and its history, and the alerts about new critical findings and SLA
breaches."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pandas as pd
import pytest
from findings_provider import metrics, programme
from findings_provider.dashboard.findings_list import ListSettings, findings_page
from findings_provider.pipeline.summary import ALERTS_CHECKED_KEY, programme_alerts
from findings_provider.programme import FindingFilter
from findings_provider.warehouse import TicketAction, Warehouse
from findings_provider.warehouse.schema import finding_events

from .conftest import finding

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


def test_time_to_fix_uses_the_observed_change_else_the_services_time(warehouse: Warehouse) -> None:
    # 10 days to fix, known only from the service's state_updated_at (fixed before the first sync)
    warehouse.upsert_findings([finding(1, status="fixed", state_updated_at="2026-01-11T00:00:00Z"),
                               finding(2), finding(3, severity="critical")])
    # observed by the pipeline: 2 and 3 fixed; the event's time wins over the service's later state_updated_at
    with warehouse.engine.begin() as conn:
        conn.execute(finding_events.insert(), [
            {"issue_type": "sast", "finding_id": 2, "field": "status", "old_value": "open", "new_value": "fixed",
             "observed_at": datetime(2026, 1, 31, tzinfo=timezone.utc)},
            {"issue_type": "sast", "finding_id": 3, "field": "status", "old_value": "open", "new_value": "fixed",
             "observed_at": datetime(2026, 1, 3, tzinfo=timezone.utc)},
        ])
    warehouse.upsert_findings([finding(2, status="fixed", state_updated_at="2026-02-20T00:00:00Z"),
                               finding(3, severity="critical", status="fixed")])
    table = metrics.time_to_fix(warehouse)
    assert list(table.index) == ["critical", "high"]  # most severe first
    assert table.loc["critical", "findings"] == 1
    assert table.loc["critical", "median_days"] == 2.0
    assert table.loc["high", "findings"] == 2
    assert table.loc["high", "median_days"] == 20.0  # 10 and 30 days
    assert table.loc["high", "p90_days"] == 28.0


def test_time_to_triage_counts_only_triaged_findings(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1, triaged_at="2026-01-05T00:00:00Z", triage_state="ignored"),
                               finding(2), finding(3, severity="low", triaged_at="2026-01-02T12:00:00Z")])
    table = metrics.time_to_triage(warehouse)
    assert table.to_dict("index") == {
        "high": {"findings": 1, "median_days": 4.0, "p90_days": 4.0},
        "low": {"findings": 1, "median_days": 1.5, "p90_days": 1.5},
    }


def test_sla_breaches_are_open_findings_past_their_severitys_target(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        finding(1, severity="critical", relevant_since="2026-02-19T12:00:00Z"),  # 9.5 days: 2.5 days late
        finding(2, severity="critical", relevant_since="2026-02-27T00:00:00Z"),  # 2 days: on time
        finding(3, severity="critical", relevant_since="2026-01-01T00:00:00Z", status="fixed"),  # fixed: no
        finding(4, severity="high", relevant_since="2026-01-01T00:00:00Z", status="reviewing"),  # 59 days: late
        finding(5, severity="low", relevant_since="2020-01-01T00:00:00Z"),  # no target for low
    ])
    summary, listed = metrics.sla_breaches(warehouse, {"critical": 7, "high": 30}, NOW)
    assert summary.to_dict("index") == {"critical": {"target_days": 7, "open": 2, "breaching": 1},
                                        "high": {"target_days": 30, "open": 1, "breaching": 1}}
    assert list(listed["id"]) == [4, 1]  # most overdue first
    assert list(listed["overdue_days"]) == [29, 3]  # whole days, rounded up, as the findings list shows them
    rows = {r["id"]: r for r in findings_page(warehouse, FindingFilter(measure="overdue"),
                                              ListSettings({"critical": 7, "high": 30}), NOW)["rows"]}
    assert {i: rows[i]["overdue_days"] for i in (4, 1)} == {4: 29, 1: 3}


def test_open_over_time_reads_the_daily_snapshots(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1, severity="critical"), finding(2), finding(3, status="fixed")])
    warehouse.take_snapshot(date(2026, 2, 27))
    warehouse.upsert_findings([finding(2, status="fixed"), finding(4, severity="low")])
    warehouse.take_snapshot(date(2026, 2, 28))
    table = metrics.open_over_time(warehouse, now=NOW)
    assert list(table.columns) == ["critical", "high", "low"]
    assert table.to_dict("index") == {"2026-02-27": {"critical": 1, "high": 1, "low": 0},
                                      "2026-02-28": {"critical": 1, "high": 0, "low": 1}}


def test_activity_per_run_counts_triage_and_tickets(warehouse: Warehouse) -> None:
    action = warehouse.record_triage_action(run_id="r1", dag_id="autotriage_triage", issue_type="sast",
                                            dry_run=False, issue_ids=[1, 2, 3], request={})
    warehouse.update_triage_action(action, status="succeeded", num_triaged=3)
    warehouse.record_triage_action(run_id="r2", dag_id="autotriage_triage", issue_type="sast", dry_run=True,
                                   issue_ids=[9], request={})  # a dry run triages nothing
    warehouse.record_ticket_actions([
        TicketAction("sast", 1, "succeeded", run_id="r1", ticket_id=10),
        TicketAction("sast", 2, "succeeded", run_id="r1", ticket_id=10),  # grouped: one ticket
        TicketAction("sast", 3, "failed", run_id="r1"),
    ])
    table = metrics.activity_per_run(warehouse)
    row = table.loc["r1", ["triaged", "triage_failed", "tickets_created", "ticket_findings_failed"]]
    assert isinstance(row, pd.Series)
    assert row.tolist() == [3, 0, 1, 1]
    assert "r2" not in table.index


def test_alerts_name_new_critical_findings_and_new_breaches_once(warehouse: Warehouse) -> None:
    targets = {"critical": 7}
    warehouse.upsert_findings([finding(1, severity="critical", relevant_since="2026-02-25T00:00:00Z")])
    assert programme_alerts(warehouse, targets, NOW) == []  # the first check is the starting state
    assert warehouse.get_state(ALERTS_CHECKED_KEY) == NOW.isoformat()

    warehouse.upsert_findings([finding(2, severity="critical", relevant_since="2026-03-01T06:00:00Z",
                                       repository={"name": "acme/web"}, rule_name="sqli")])
    at_target = datetime(2026, 3, 4, tzinfo=timezone.utc)  # finding 1 is exactly 7 days old: not past its target
    alerts = {a.kind: a for a in programme_alerts(warehouse, targets, at_target, link="http://airflow/dash")}
    assert set(alerts) == {"new_critical"}
    assert alerts["new_critical"].subject.startswith("1 new critical finding(s)")
    assert "sast 2 in acme/web: sqli" in alerts["new_critical"].body
    with warehouse.engine.connect() as conn:  # the dashboard's "past target" agrees at the boundary, and after it
        overdue = programme.FindingFilter(measure="overdue")
        assert programme.count(conn, overdue, targets, at_target) == 0
        later = at_target + timedelta(minutes=1)
        assert programme.count(conn, overdue, targets, later) == 1
    alerts = {a.kind: a for a in programme_alerts(warehouse, targets, later, link="http://airflow/dash")}
    assert set(alerts) == {"sla_breach"}
    assert "sast 1 " in alerts["sla_breach"].body
    assert "sast 2" not in alerts["sla_breach"].body
    assert alerts["sla_breach"].link == "http://airflow/dash"
    # nothing new since: no alert again
    assert programme_alerts(warehouse, targets, datetime(2026, 3, 5, tzinfo=timezone.utc)) == []


@pytest.mark.parametrize("days", [0, -3])
def test_a_fix_time_target_below_one_day_is_refused_naming_it(days: int) -> None:
    from findings_provider.config import ConfigError, SlaConfig
    from pydantic import ValidationError

    with pytest.raises((ValidationError, ConfigError), match=r"fix_days.high\n  Input should be greater than or equal"):
        SlaConfig(fix_days={"high": days})
    assert SlaConfig(fix_days={"critical": 3}).fix_days.targets() == {"critical": 3}  # not named: no target
    assert SlaConfig().fix_days.targets() == {"critical": 7, "high": 30, "medium": 90}


def test_open_over_time_by_issue_type(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([finding(1), finding(2, "sca"), finding(3, "sca"), finding(4, "sca", status="fixed")])
    warehouse.take_snapshot(date(2026, 2, 28))
    table = metrics.open_over_time(warehouse, now=NOW, by="issue_type")
    assert table.to_dict("index") == {"2026-02-28": {"sast": 1, "sca": 2}}
    with pytest.raises(ValueError, match="by = 'rule_name'"):
        metrics.open_over_time(warehouse, now=NOW, by="rule_name")
