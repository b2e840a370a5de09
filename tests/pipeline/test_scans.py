"""Scan monitoring logic: search window, storage, classification, refresh and alert text."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from findings_provider.pipeline import scans
from findings_provider.warehouse.schema import scans as scans_table
from sqlalchemy import select

from .fakes import NOW, FakeApi

OVERLAP = timedelta(minutes=15)


def scan(scan_id: int, status: str, minutes_ago: float = 30, **extra) -> dict:
    return {
        "id": str(scan_id), "deployment_id": "1", "repository_id": "3", "branch": "main", "commit": f"c{scan_id}",
        "started_at": (NOW - timedelta(minutes=minutes_ago)).isoformat(), "status": status,
        "exit_code": extra.pop("exit_code", None), "is_full_scan": True, **extra,
    }


def search(api, warehouse, now=NOW, lookback_days=30):
    return scans.search_and_store(api.client(), warehouse, lookback_days=lookback_days, overlap=OVERLAP, now=now)


def stored_status(warehouse):
    with warehouse.engine.connect() as conn:
        return dict(conn.execute(select(scans_table.c.id, scans_table.c.status)).all())


def test_first_search_looks_back_then_follows_the_watermark(api: FakeApi, warehouse) -> None:
    search(api, warehouse, lookback_days=3)
    first = json.loads(api.calls("/scans/search")[0].content)["since"]
    assert datetime.fromisoformat(first.replace("Z", "+00:00")) == NOW - timedelta(days=3)
    assert datetime.fromisoformat(warehouse.get_state(scans.WATERMARK_KEY)) == NOW

    later = NOW + timedelta(minutes=15)
    search(api, warehouse, now=later, lookback_days=3)
    second = json.loads(api.calls("/scans/search")[1].content)["since"]
    assert datetime.fromisoformat(second.replace("Z", "+00:00")) == NOW - OVERLAP

    search(api, warehouse, now=later + timedelta(days=10), lookback_days=3)  # the watermark is too old
    third = json.loads(api.calls("/scans/search")[2].content)["since"]
    assert datetime.fromisoformat(third.replace("Z", "+00:00")) == later + timedelta(days=7)


def test_scans_are_stored_and_classified(api: FakeApi, warehouse) -> None:
    api.scans = [
        scan(1, "SCAN_STATUS_COMPLETED", exit_code=0), scan(2, "SCAN_STATUS_RUNNING"),
        scan(3, "SCAN_STATUS_PENDING"), scan(4, "SCAN_STATUS_ERROR", exit_code=2),
        scan(5, "SCAN_STATUS_NEVER_FINISHED", minutes_ago=300), scan(6, "SCAN_STATUS_CANCELLED"),
        scan(7, "SCAN_STATUS_EXPLODED"),
    ]
    result = search(api, warehouse)
    assert result["running_ids"] == ["2", "3"]
    assert result["failed_ids"] == ["4", "5", "6", "7"]
    assert (result["found"], result["written"], result["newly_completed"], result["unknown_status"]) == (7, 7, 1, 1)
    assert stored_status(warehouse)["7"] == "SCAN_STATUS_EXPLODED"

    again = search(api, warehouse, now=NOW + timedelta(minutes=15))
    assert (again["newly_completed"], again["written"]) == (0, 0)  # nothing changed: nothing rewritten


def test_scans_still_running_from_earlier_runs_are_waited_for_again(api: FakeApi, warehouse) -> None:
    api.scans = [scan(2, "SCAN_STATUS_RUNNING")]
    search(api, warehouse)
    api.scans = []  # the next search window no longer contains it
    result = search(api, warehouse, now=NOW + timedelta(hours=2))
    assert result["running_ids"] == ["2"]
    assert result["carried_over"] == 1


def test_refresh_stores_final_statuses(api: FakeApi, warehouse) -> None:
    api.scans = [scan(2, "SCAN_STATUS_RUNNING"), scan(3, "SCAN_STATUS_RUNNING"), scan(4, "SCAN_STATUS_RUNNING")]
    search(api, warehouse)
    api.scans = [scan(2, "SCAN_STATUS_COMPLETED", exit_code=1), scan(3, "SCAN_STATUS_ERROR", exit_code=3),
                 scan(4, "SCAN_STATUS_RUNNING"), scan(9, "SCAN_STATUS_COMPLETED")]
    result = scans.refresh_scans(api.client(), warehouse, ["2", "3", "4"])
    assert result == {"refreshed": 3, "newly_completed": 1, "failed_ids": ["3"], "still_running_ids": ["4"]}
    assert stored_status(warehouse) == {"2": "SCAN_STATUS_COMPLETED", "3": "SCAN_STATUS_ERROR",
                                        "4": "SCAN_STATUS_RUNNING"}  # 9 was not asked for


def test_alert_lines_name_repository_branch_commit_and_ci_job(api: FakeApi, warehouse) -> None:
    api.scans = [scan(4, "SCAN_STATUS_ERROR", exit_code=2), scan(5, "SCAN_STATUS_NEVER_FINISHED")]
    search(api, warehouse)
    api.scan_details = {
        "4": {"id": 4, "exit_code": 2, "completed_at": NOW.isoformat(), "meta": {
            "repository": "acme/api", "branch": "feature/x", "commit": "abc123",
            "ci_job_url": "https://ci.example.com/jobs/4"}},
        "5": {"id": 5, "started_at": (NOW - timedelta(hours=3)).isoformat(),
              "meta": {"repo_url": "https://git.example.com/acme/web"}},
    }
    first, second = scans.scan_alerts(api.client(), warehouse, ["5", "4"])
    assert first.line() == ("scan 4 SCAN_STATUS_ERROR: repository acme/api, branch feature/x, commit abc123, "
                            "exit code 2, CI job https://ci.example.com/jobs/4")
    assert second.line() == ("scan 5 SCAN_STATUS_NEVER_FINISHED: repository https://git.example.com/acme/web, "
                             "branch main, commit c5, exit code none, CI job unknown")


def test_each_failure_is_alerted_by_one_run_only(warehouse) -> None:
    assert scans.not_yet_alerted(warehouse, ["4", "5"], "run-1") == ["4", "5"]
    scans.mark_alerted(warehouse, ["4"], "run-1")
    assert scans.not_yet_alerted(warehouse, ["4", "5"], "run-2") == ["5"]
    assert scans.not_yet_alerted(warehouse, ["4", "5"], "run-1") == ["4", "5"]  # a rerun alerts again


def test_lookback_must_be_positive(api: FakeApi, warehouse) -> None:
    with pytest.raises(ValueError, match="lookback_days must be >= 1"):
        search(api, warehouse, lookback_days=0)
    assert api.requests == []
