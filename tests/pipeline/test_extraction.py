"""Findings extraction against a fake API (MockTransport) and a real SQLite warehouse."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from findings_provider.client import ValidationError
from findings_provider.pipeline import extraction
from findings_provider.warehouse.schema import findings
from sqlalchemy import select

from .fakes import NOW, FakeApi, finding

HOUR = timedelta(hours=1)


def rows(warehouse, issue_type="sast"):
    with warehouse.engine.connect() as conn:
        return {r.id: r for r in conn.execute(select(findings).where(findings.c.issue_type == issue_type))}


def run(api, warehouse, types=("sast",), **kwargs):
    kwargs.setdefault("now", NOW)
    kwargs.setdefault("overlap", HOUR)
    kwargs.setdefault("page_size", 100)
    return extraction.run_extraction(api.client(), warehouse, list(types), **kwargs)


def test_first_pull_is_complete_and_sets_the_watermark(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 251)]
    result = run(api, warehouse)["issue_types"]["sast"]

    assert (result["requests"], result["pages"], result["unique"], result["written"]) == (3, 3, 250, 250)
    assert all("since" not in r.url.params for r in api.calls("/findings"))
    assert [r.url.params["page_size"] for r in api.calls("/findings")] == ["100"] * 3
    stored = rows(warehouse)
    assert set(stored) == set(range(1, 251))
    assert json.loads(stored[7].raw) == api.by_id("sast", 7)  # the JSON as received
    newest = NOW - timedelta(minutes=1)
    assert datetime.fromisoformat(warehouse.get_state(extraction.watermark_key("sast"))) == newest


def test_each_page_is_committed_in_its_own_transaction_in_page_order(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 251)]
    seen: list[tuple[int, int]] = []
    extraction.extract_findings(
        api.client(), warehouse, "sast", since=None, page_size=100,
        on_page=lambda r: seen.append((r.pages, warehouse.count_findings("sast"))),
    )
    assert seen == [(1, 100), (2, 200), (3, 250)]


def test_incremental_pull_starts_at_the_watermark_minus_the_overlap(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=600 + 100 * i) for i in range(1, 11)]
    run(api, warehouse)
    mark = datetime.fromisoformat(warehouse.get_state(extraction.watermark_key("sast")))
    api.requests.clear()
    api.findings["sast"].append(finding(99, minutes_ago=5))

    result = run(api, warehouse, now=NOW + HOUR)["issue_types"]["sast"]

    (request,) = api.calls("/findings")
    assert float(request.url.params["since"]) == pytest.approx((mark - HOUR).timestamp())
    assert result["full"] is False
    # the overlap re-reads finding 1 (it set the watermark); only 99 is new and written
    assert (result["unique"], result["written"]) == (2, 1)
    assert 99 in rows(warehouse)
    assert datetime.fromisoformat(warehouse.get_state(extraction.watermark_key("sast"))) == NOW - timedelta(minutes=5)


def test_a_failed_pull_keeps_its_pages_but_not_the_watermark(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 251)]
    api.fail_findings_page = 1
    with pytest.raises(ValidationError):
        run(api, warehouse)
    assert warehouse.count_findings("sast") == 100  # page 0 was committed on its own
    assert warehouse.get_state(extraction.watermark_key("sast")) is None


def test_one_failing_type_does_not_lose_the_others_progress(api: FakeApi, warehouse, monkeypatch) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 5)]
    api.findings["sca"] = [finding(i, minutes_ago=i) for i in range(100, 105)]
    real = extraction.extract_findings

    def flaky(client, wh, issue_type, **kw):
        if issue_type == "sast":
            raise RuntimeError("boom")
        return real(client, wh, issue_type, **kw)

    monkeypatch.setattr(extraction, "extract_findings", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        run(api, warehouse, types=("sast", "sca"))
    assert warehouse.get_state(extraction.watermark_key("sast")) is None
    assert warehouse.get_state(extraction.watermark_key("sca")) is not None


def test_duplicates_of_a_moving_result_set_are_dropped(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 151)]
    served = {"n": 0}
    original = api._findings

    def moving(request: httpx.Request) -> httpx.Response:
        served["n"] += 1
        if served["n"] == 2:  # a new finding arrived: page 1 now starts with the last item of page 0
            api.findings["sast"].append(finding(500, minutes_ago=0.5))
        return original(request)

    api._findings = moving  # type: ignore[method-assign]
    result = run(api, warehouse)["issue_types"]["sast"]
    assert result["duplicates"] == 1
    assert result["unique"] == warehouse.count_findings("sast") == 150
    assert result["received"] == 151


def test_full_refresh_reconciles_changes_that_since_cannot_see(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=24 * 60 + 180 * i) for i in range(1, 6)]
    run(api, warehouse)
    api.by_id("sast", 3)["status"] = "fixed"  # an older finding changes: its relevant_since does not move

    run(api, warehouse, now=NOW + HOUR)
    assert rows(warehouse)[3].status == "open"  # the incremental pull cannot see it

    result = run(api, warehouse, now=NOW + 2 * HOUR, full_refresh=True)["issue_types"]["sast"]
    assert result["full"] is True
    assert result["reason"] == "full refresh requested"
    assert "since" not in api.calls("/findings")[-1].url.params
    assert rows(warehouse)[3].status == "fixed"
    assert result["written"] == 1  # unchanged rows are not rewritten


def test_weekly_full_refresh_runs_once_on_its_weekday(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(1, minutes_ago=10)]
    weekday = NOW.weekday()
    run(api, warehouse, full_refresh_weekday=weekday)  # no watermark yet: complete anyway
    assert warehouse.get_state(extraction.full_refresh_key("sast")) is not None

    later_same_day = run(api, warehouse, now=NOW + HOUR, full_refresh_weekday=weekday)["issue_types"]["sast"]
    assert later_same_day["full"] is False  # the last full refresh is not 6 days old

    other_day = run(api, warehouse, now=NOW + timedelta(days=1), full_refresh_weekday=weekday)
    assert other_day["issue_types"]["sast"]["full"] is False

    next_week = run(api, warehouse, now=NOW + timedelta(days=7), full_refresh_weekday=weekday)
    assert next_week["issue_types"]["sast"] == {**next_week["issue_types"]["sast"], "full": True,
                                                "reason": "weekly full refresh"}


def test_secrets_come_through_cursor_pages_into_the_same_table(api: FakeApi, warehouse) -> None:
    api.findings["secrets"] = [
        {**finding(1000 + i, minutes_ago=i), "rule_name": None, "secret_type": "aws-key"} for i in range(250)
    ]
    result = run(api, warehouse, types=("secrets",))["issue_types"]["secrets"]
    secrets = api.calls("/secrets")
    assert [r.url.params.get("cursor") for r in secrets] == [None, "100", "200"]
    assert result["unique"] == warehouse.count_findings("secrets") == 250
    assert rows(warehouse, "secrets")[1000].rule_name == "aws-key"
    assert warehouse.count_findings("sast") == 0


def test_garbage_is_collected_every_few_pages(api: FakeApi, warehouse, monkeypatch) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 1001)]
    collections = []
    monkeypatch.setattr(extraction.gc, "collect", lambda: collections.append(1))
    run(api, warehouse)  # 10 full pages + an empty one
    assert len(collections) == 11 // extraction.GC_EVERY_PAGES


def test_unknown_issue_type_is_refused_naming_the_param(api: FakeApi, warehouse) -> None:
    with pytest.raises(ValueError, match="issue_types: unknown issue type 'bogus'"):
        run(api, warehouse, types=("bogus",))
    assert api.requests == []


def test_watermark_never_moves_back(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(1, minutes_ago=1)]
    run(api, warehouse)
    before = warehouse.get_state(extraction.watermark_key("sast"))
    api.findings["sast"] = [finding(2, minutes_ago=60 * 24 * 30)]  # an old one only
    run(api, warehouse, now=NOW + HOUR, full_refresh=True)
    assert warehouse.get_state(extraction.watermark_key("sast")) == before


def test_timestamps_from_all_service_shapes_set_the_watermark(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [
        {**finding(1), "relevant_since": "2026-11-18T10:00:00.391Z"},
        {**finding(2), "relevant_since": "2026-11-18 11:00:00.391807+00:00"},
    ]
    run(api, warehouse)
    mark = datetime.fromisoformat(warehouse.get_state(extraction.watermark_key("sast")))
    assert mark == datetime(2026, 11, 18, 11, 0, 0, 391807, tzinfo=timezone.utc)
