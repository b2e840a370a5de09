"""Scan search (4.3: filters, limits, cursor pagination) and scan details (4.4), and scans moving on in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import assert_error, by_id

Scan = dict[str, Any]
SCANS = 130
META_KEYS = {"branch", "commit", "config", "repo_url", "ci_job_url", "repository", "commit_title",
             "pull_request_id", "pull_request_title", "commit_author_name", "commit_author_image_url",
             "commit_author_email", "commit_author_username", "pull_request_author_username",
             "pull_request_author_image_url"}


@pytest.fixture(scope="module", autouse=True)
def more_scans(emulator: EmulatorProcess) -> None:
    emulator.reset(scans=SCANS)


def search(api: httpx.Client, emulator: EmulatorProcess, **body: Any) -> httpx.Response:
    return api.post(by_id(emulator, "scans/search"), json=body)


def search_all(api: httpx.Client, emulator: EmulatorProcess, **body: Any) -> list[Scan]:
    scans: list[Scan] = []
    cursor = ""
    while True:
        page = search(api, emulator, cursor=cursor, **body).json()
        scans.extend(page["scans"])
        cursor = page["cursor"]
        if not cursor:
            return scans


@pytest.fixture(scope="module")
def every_scan(api: httpx.Client, emulator: EmulatorProcess, more_scans: None) -> list[Scan]:
    return search_all(api, emulator, limit=500)


def test_default_limit_is_100_and_cursor_is_empty_at_the_end(api: httpx.Client, emulator: EmulatorProcess) -> None:
    first = search(api, emulator).json()
    assert len(first["scans"]) == 100
    assert first["cursor"]
    rest = search(api, emulator, cursor=first["cursor"]).json()
    assert len(rest["scans"]) == SCANS - 100
    assert rest["cursor"] == ""


@pytest.mark.parametrize(("body", "field"), [({"limit": 501}, "limit"), ({"limit": 0}, "limit"),
                                             ({"statuses": ["SCAN_STATUS_DONE"]}, "statuses"),
                                             ({"since": "last week"}, "since"), ({"cursor": "garbage!"}, "cursor"),
                                             ({"products": ["PRODUCT_DAST"]}, "products")])
def test_invalid_search_input_is_400_naming_the_field(api: httpx.Client, emulator: EmulatorProcess,
                                                      body: dict[str, Any], field: str) -> None:
    assert_error(search(api, emulator, **body), 400, field)


def test_cursor_pagination_reaches_the_end_newest_first(api: httpx.Client, emulator: EmulatorProcess,
                                                        every_scan: list[Scan]) -> None:
    paged = search_all(api, emulator, limit=7)
    ids = [s["id"] for s in paged]
    assert len(ids) == len(set(ids)) == SCANS
    assert ids == [s["id"] for s in every_scan]
    started = [s["started_at"] for s in paged]
    assert started == sorted(started, reverse=True)


def test_generated_scans_cover_every_status_consistently(every_scan: list[Scan]) -> None:
    by_status: dict[str, list[Scan]] = {}
    for scan in every_scan:
        by_status.setdefault(scan["status"], []).append(scan)
    assert set(by_status) == {"SCAN_STATUS_RUNNING", "SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR",
                              "SCAN_STATUS_NEVER_FINISHED"}
    assert all(s["exit_code"] in (0, 1) and "completed_at" in s for s in by_status["SCAN_STATUS_COMPLETED"])
    assert all(s["exit_code"] not in (0, 1) for s in by_status["SCAN_STATUS_ERROR"])
    hour_ago = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    for scan in by_status["SCAN_STATUS_NEVER_FINISHED"] + by_status["SCAN_STATUS_RUNNING"]:
        assert scan["completed_at"] is None
        assert scan["exit_code"] is None
        assert scan["total_time"] is None
        assert (scan["started_at"] < hour_ago) == (scan["status"] == "SCAN_STATUS_NEVER_FINISHED")


def test_every_search_filter_is_applied(api: httpx.Client, emulator: EmulatorProcess,
                                        every_scan: list[Scan]) -> None:
    sample = every_scan[len(every_scan) // 2]
    middle = sample["started_at"]
    cases: list[tuple[dict[str, Any], Callable[[Scan], bool]]] = [
        ({"statuses": ["SCAN_STATUS_ERROR", "SCAN_STATUS_RUNNING"]},
         lambda s: s["status"] in ("SCAN_STATUS_ERROR", "SCAN_STATUS_RUNNING")),
        ({"statuses": "SCAN_STATUS_COMPLETED"}, lambda s: s["status"] == "SCAN_STATUS_COMPLETED"),
        ({"repository_id": int(sample["repository_id"])}, lambda s: s["repository_id"] == sample["repository_id"]),
        ({"branch": sample["branch"]}, lambda s: s["branch"] == sample["branch"]),
        ({"is_full_scan": True}, lambda s: s["is_full_scan"]),
        ({"is_full_scan": False}, lambda s: not s["is_full_scan"]),
        ({"products": ["PRODUCT_AI_SAST"]}, lambda s: "PRODUCT_AI_SAST" in s["enabled_products"]),
        ({"since": middle}, lambda s: s["started_at"] > middle),
        ({"total_time": {"min": 100, "max": 400}}, lambda s: 100 <= (s["total_time"] or -1) <= 400),
    ]
    for body, predicate in cases:
        expected = [s["id"] for s in every_scan if predicate(s)]
        got = [s["id"] for s in search_all(api, emulator, limit=500, **body)]
        assert got == expected, body
        assert 0 < len(got) < len(every_scan), body


def test_scan_details_have_no_status_and_every_meta_key(api: httpx.Client, emulator: EmulatorProcess,
                                                        every_scan: list[Scan]) -> None:
    completed = next(s for s in every_scan if s["status"] == "SCAN_STATUS_COMPLETED")
    details = api.get(by_id(emulator, f"scan/{completed['id']}")).json()
    assert "status" not in details
    assert details["id"] == int(completed["id"])
    assert details["exit_code"] == completed["exit_code"]
    assert {"deployment_id", "repository_id", "started_at", "completed_at", "enabled_products", "has_logs",
            "stats", "meta"} <= details.keys()
    assert set(details["meta"]) == META_KEYS
    assert isinstance(details["meta"]["commit_title"], dict)


def test_unknown_scan_is_404(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert_error(api.get(by_id(emulator, "scan/999")), 404)


def _status_of(api: httpx.Client, emulator: EmulatorProcess, scan_id: str) -> str:
    scans = search_all(api, emulator, limit=500)
    return next(s["status"] for s in scans if s["id"] == scan_id)


@pytest.mark.parametrize(("final_status", "exit_code"), [("SCAN_STATUS_COMPLETED", 0), ("SCAN_STATUS_ERROR", 2)])
def test_a_running_scan_finishes_after_its_duration(api: httpx.Client, emulator: EmulatorProcess,
                                                    final_status: str, exit_code: int) -> None:
    created = emulator.create_scan(status="SCAN_STATUS_RUNNING", finish_after=1, final_status=final_status)
    assert created["status"] == "SCAN_STATUS_RUNNING"
    running = api.get(by_id(emulator, f"scan/{created['id']}")).json()
    assert running["completed_at"] is None
    assert running["exit_code"] is None
    time.sleep(1.2)
    assert _status_of(api, emulator, created["id"]) == final_status
    details = api.get(by_id(emulator, f"scan/{created['id']}")).json()
    assert details["exit_code"] == exit_code
    assert details["completed_at"] is not None


def test_a_running_scan_finishes_at_its_last_read(api: httpx.Client, emulator: EmulatorProcess) -> None:
    created = emulator.create_scan(status="SCAN_STATUS_RUNNING", finish_after_reads=2,
                                   final_status="SCAN_STATUS_ERROR", exit_code=5)
    other = emulator.create_scan(status="SCAN_STATUS_RUNNING", finish_after_reads=1)
    assert _status_of(api, emulator, created["id"]) == "SCAN_STATUS_RUNNING"  # a search is not a read
    first = api.get(by_id(emulator, f"scan/{created['id']}")).json()
    assert (first["completed_at"], first["exit_code"]) == (None, None)
    assert _status_of(api, emulator, created["id"]) == "SCAN_STATUS_RUNNING"
    assert _status_of(api, emulator, other["id"]) == "SCAN_STATUS_RUNNING"  # reads of another scan do not count
    second = api.get(by_id(emulator, f"scan/{created['id']}")).json()
    assert second["exit_code"] == 5
    assert second["completed_at"] is not None
    assert _status_of(api, emulator, created["id"]) == "SCAN_STATUS_ERROR"
    third = api.get(by_id(emulator, f"scan/{created['id']}")).json()
    assert third == second  # finished once: later reads change nothing


def test_finish_after_reads_must_be_positive(emulator: EmulatorProcess) -> None:
    answer = httpx.post(f"{emulator.base_url}/_emulator/scans", json={"finish_after_reads": 0})
    assert answer.status_code == 400  # the service's answer to a bad body, naming the field
    assert "finish_after_reads" in answer.text


def test_a_scan_running_for_over_an_hour_is_never_finished(api: httpx.Client, emulator: EmulatorProcess) -> None:
    created = emulator.create_scan(status="SCAN_STATUS_RUNNING", started_ago=3700)
    assert created["status"] == "SCAN_STATUS_NEVER_FINISHED"
    assert _status_of(api, emulator, created["id"]) == "SCAN_STATUS_NEVER_FINISHED"


def test_other_statuses_are_served_verbatim(api: httpx.Client, emulator: EmulatorProcess) -> None:
    pending = emulator.create_scan(status="SCAN_STATUS_PENDING")
    odd = emulator.create_scan(status="SCAN_STATUS_SOMETHING_NEW")
    assert _status_of(api, emulator, pending["id"]) == "SCAN_STATUS_PENDING"
    assert _status_of(api, emulator, odd["id"]) == "SCAN_STATUS_SOMETHING_NEW"
