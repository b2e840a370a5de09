"""Scan operators: search and store, refresh, alert (with notifiers)."""

from __future__ import annotations

import pytest
from findings_provider.compat import AirflowFailException
from findings_provider.notifications import ScanAlertNotifier, format_alerts
from findings_provider.operators.scans import (
    NOTIFIERS_ENV,
    RefreshScansOperator,
    ScanFailureAlertOperator,
    SearchScansOperator,
)
from task_context import make_context

pytestmark = pytest.mark.integration

RECEIVED: list = []


class CollectingNotifier(ScanAlertNotifier):
    def send(self, alerts, context):
        RECEIVED.append(("notifier", [a["scan_id"] for a in alerts]))


def env_hook(alerts, context):
    RECEIVED.append(("env", len(alerts)))


def test_search_returns_ids_to_wait_for_and_pushes_the_rest(fresh, warehouse, context) -> None:
    running = fresh.create_scan(status="SCAN_STATUS_RUNNING")
    ids = SearchScansOperator(task_id="search_scans", lookback_days="7").execute(context)
    xcom = context["ti"].xcom
    assert str(running["id"]) in ids
    assert all(isinstance(i, str) for i in ids)
    assert xcom["failed_ids"]
    assert xcom["newly_completed"] > 0
    assert xcom["summary"]["found"] == xcom["summary"]["written"] > 0
    assert "running_ids" not in xcom["summary"]


def test_search_refuses_a_bad_lookback_naming_it(fresh, warehouse, context) -> None:
    with pytest.raises(AirflowFailException, match="lookback_days = 0 must be >= 1"):
        SearchScansOperator(task_id="search_scans", lookback_days=0).execute(context)
    assert [r for r in fresh.requests() if r["operation"] == "scans_search"] == []


def test_refresh_merges_failures_and_completions(fresh, warehouse, context) -> None:
    fails = fresh.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0, final_status="SCAN_STATUS_ERROR")
    done = fresh.create_scan(status="SCAN_STATUS_RUNNING", finish_after=0)
    SearchScansOperator(task_id="search_scans").execute(make_context())
    result = RefreshScansOperator(task_id="refresh", scan_ids=[str(fails["id"]), str(done["id"])],
                                  failed_ids=["1"], newly_completed=3).execute(context)
    assert context["ti"].xcom["failed_ids"] == ["1", str(fails["id"])]
    assert context["ti"].xcom["newly_completed"] >= 3
    assert result["waited"] == 2


def test_alert_fails_naming_repository_branch_commit_and_ci_job(fresh, warehouse, monkeypatch) -> None:
    created = fresh.create_scan(status="SCAN_STATUS_ERROR", exit_code=7, branch="feature/alerts")
    search = make_context()
    SearchScansOperator(task_id="search_scans").execute(search)
    generated = next(i for i in search["ti"].xcom["failed_ids"] if i != str(created["id"]))
    RECEIVED.clear()
    monkeypatch.setenv(NOTIFIERS_ENV, f"{__name__}.env_hook")

    def broken(alerts, context):
        raise RuntimeError("chat is down")

    op = ScanFailureAlertOperator(task_id="alert", scan_ids=[str(created["id"]), generated],
                                  notifiers=[broken, CollectingNotifier()], fail_on_alert=True)
    first = make_context("run-1")
    with pytest.raises(AirflowFailException) as raised:  # fail_on_alert: the red run some teams alert on
        op.execute(first)
    text = str(raised.value)
    assert text.startswith("2 scan(s) failed or never finished:")
    assert f"scan {created['id']} SCAN_STATUS_ERROR: repository acme/" in text
    assert "branch feature/alerts" in text
    assert f"commit {created['commit']}" in text
    assert "exit code 7" in text
    with fresh.client() as api:
        details = api.get(f"/api/v1/deployments/{fresh.deployment_id}/scan/{generated}").json()["meta"]
    assert f"repository {details['repository']}, branch {details['branch']}, commit {details['commit']}" in text
    assert f"CI job {details['ci_job_url']}" in text
    assert details["ci_job_url"].startswith("https://")
    # the broken notifier did not stop the others
    assert RECEIVED == [("notifier", sorted([str(created["id"]), generated], key=int)), ("env", 2)]
    alerts = first["ti"].xcom["scan_alerts"]
    assert format_alerts(alerts) in text

    assert op.execute(make_context("run-2")) == {"alerted": 0}  # another run does not alert twice
    with pytest.raises(AirflowFailException):
        op.execute(make_context("run-1"))  # a rerun of the alerting run does


def test_a_failed_scan_is_alerted_and_the_task_succeeds_by_default(fresh, warehouse) -> None:
    created = fresh.create_scan(status="SCAN_STATUS_ERROR", exit_code=3)
    op = ScanFailureAlertOperator(task_id="alert", scan_ids=[str(created["id"])])
    context = make_context("run-green")
    result = op.execute(context)  # no exception: a failed scan is not a failed pipeline
    assert result == {"alerted": 1, "delivery": {"sent": 0, "failed": 0, "unrouted": 1}}  # no channel: logged
    assert [a["scan_id"] for a in context["ti"].xcom["scan_alerts"]] == [str(created["id"])]


def test_no_failures_no_alert(fresh, warehouse, context) -> None:
    assert ScanFailureAlertOperator(task_id="alert", scan_ids=[]).execute(context) == {"alerted": 0}
