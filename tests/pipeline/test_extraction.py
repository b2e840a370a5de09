"""Findings extraction against a fake API (MockTransport) and a real SQLite warehouse."""

from __future__ import annotations

import gc
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


def test_a_full_pull_counts_the_stored_findings_no_longer_listed(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 251)]
    api.findings["sca"] = [finding(i, minutes_ago=i) for i in range(1, 4)]
    first = run(api, warehouse, types=("sast", "sca"))["issue_types"]
    assert (first["sast"]["not_seen"], first["sca"]["not_seen"]) == (0, 0)

    api.findings["sast"] = [f for f in api.findings["sast"] if f["id"] % 50]  # five closed elsewhere
    assert run(api, warehouse, now=NOW + HOUR)["issue_types"]["sast"]["not_seen"] is None  # incremental: unknown
    again = run(api, warehouse, types=("sast", "sca"), now=NOW + 2 * HOUR, full_refresh=True)["issue_types"]
    assert (again["sast"]["not_seen"], again["sca"]["not_seen"]) == (5, 0)  # each type counts its own
    assert warehouse.count_findings("sast") == 250  # kept in their last stored state


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
    monkeypatch.setattr(gc, "collect", lambda: collections.append(1))
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


def test_a_future_dated_finding_does_not_hide_findings_that_arrive_later(api: FakeApi, warehouse, caplog) -> None:
    api.findings["sast"] = [finding(1, minutes_ago=30), {**finding(2), "relevant_since": "2099-01-01T00:00:00Z"}]
    first = run(api, warehouse)["issue_types"]["sast"]

    assert first["future_dated"] == 1
    assert set(rows(warehouse)) == {1, 2}  # stored all the same
    assert "1 sast findings are dated after" in caplog.text
    mark = datetime.fromisoformat(warehouse.get_state(extraction.watermark_key("sast")))
    assert mark == NOW - timedelta(minutes=30)  # the newest finding not in the future
    api.findings["sast"].append(finding(3, now=NOW + HOUR, minutes_ago=10))  # detected after the first run

    second = run(api, warehouse, now=NOW + HOUR)["issue_types"]["sast"]
    assert second["full"] is False
    assert 3 in rows(warehouse)


def test_a_watermark_already_in_the_future_is_replaced_by_a_full_pull(api: FakeApi, warehouse) -> None:
    warehouse.set_state(extraction.watermark_key("sast"), "2099-01-01T00:00:00+00:00")  # saved by an old version
    api.findings["sast"] = [finding(1, minutes_ago=30), finding(2, minutes_ago=90)]

    result = run(api, warehouse)["issue_types"]["sast"]

    assert result["full"] is True
    assert result["reason"].startswith("watermark 2099-01-01T00:00:00+00:00 is in the future")
    assert set(rows(warehouse)) == {1, 2}
    assert datetime.fromisoformat(warehouse.get_state(extraction.watermark_key("sast"))) == NOW - timedelta(minutes=30)


def test_status_changes_of_older_findings_arrive_with_the_first_run_of_the_next_day(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=24 * 60 + 180 * i) for i in range(1, 6)]
    day = timedelta(hours=24)
    assert NOW.hour == 12  # the runs below: 12:00, 13:00, 01:00 the next day, 02:00
    assert run(api, warehouse, full_refresh_max_age=day)["issue_types"]["sast"]["reason"] == "no full refresh yet"
    api.by_id("sast", 3)["status"] = "fixed"  # an older finding changes: its relevant_since does not move

    soon = run(api, warehouse, now=NOW + HOUR, full_refresh_max_age=day)["issue_types"]["sast"]
    assert soon["full"] is False
    assert rows(warehouse)[3].status == "open"

    next_day = run(api, warehouse, now=NOW + 13 * HOUR, full_refresh_max_age=day)["issue_types"]["sast"]
    assert (next_day["full"], next_day["reason"]) == (True, "no full refresh since 2026-11-19 00:00 UTC (one per 24 h)")
    assert rows(warehouse)[3].status == "fixed"  # 13 hours later: within a day
    later = run(api, warehouse, now=NOW + 14 * HOUR, full_refresh_max_age=day)["issue_types"]["sast"]
    assert later["full"] is False  # one full pull per day


def test_the_daily_full_pull_follows_the_day_a_run_stands_for_not_the_clock(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=24 * 60 + 180 * i) for i in range(1, 6)]
    day = timedelta(hours=24)

    def pull(at_clock: timedelta, stands_for: datetime, run_id: str) -> dict:
        return run(api, warehouse, now=NOW + at_clock, logical_date=stands_for, run_id=run_id,
                   full_refresh_max_age=day)["issue_types"]["sast"]

    assert pull(0 * HOUR, NOW, "scheduled__today")["full"] is True  # the first run that stands for today
    assert pull(1 * HOUR, NOW + HOUR, "asset__1")["full"] is False  # today is reconciled
    rerun = pull(2 * HOUR, NOW, "scheduled__today")  # the run that reconciled today, run again: again
    assert (rerun["full"], rerun["reason"]) == (
        True, "a re-run of scheduled__today, the run that reconciled the period from 2026-11-18 00:00 UTC")
    backfill = pull(3 * HOUR, NOW - 3 * day, "backfill__1")  # a day no run reconciled, after today's full pull
    assert (backfill["full"], backfill["reason"]) == (True, "no full refresh since 2026-11-15 00:00 UTC (one per 24 h)")
    assert pull(4 * HOUR, NOW - 3 * day + HOUR, "backfill__2")["full"] is False  # that day is reconciled now
    # the clock past midnight decides nothing: a run standing for today is still today's
    assert pull(13 * HOUR, NOW + 2 * HOUR, "asset__2")["full"] is False
    assert pull(14 * HOUR, NOW + 11 * HOUR, "asset__3")["full"] is False  # 23:00, run late
    assert pull(15 * HOUR, NOW + 12 * HOUR, "scheduled__next_day")["full"] is True
    weekday = (NOW - 2 * day).weekday()  # the weekly trigger follows the logical date's weekday too
    assert extraction.full_refresh_reason(warehouse, "sast", weekday=weekday, max_age=None, now=NOW + 7 * day,
                                          logical_date=NOW - 2 * day) == "weekly full refresh"
    assert extraction.full_refresh_reason(warehouse, "sast", weekday=weekday, max_age=None,
                                          now=NOW + 6 * day) is None  # the clock's weekday: not that one


@pytest.mark.parametrize(
    ("on_weekday", "max_age_hours", "last_hours_ago", "expected"),
    [
        (True, None, 7 * 24, "weekly full refresh"),
        (True, 10 * 24, 7 * 24, "weekly full refresh"),  # either trigger suffices
        (False, 24, 13, "no full refresh since 2026-11-18 00:00 UTC (one per 24 h)"),  # yesterday 23:00
        (False, 6, 1, "no full refresh since 2026-11-18 12:00 UTC (one per 6 h)"),  # 11:00, before the period
        (None, 24, None, "no full refresh yet"),
        (True, 24, 11, None),  # 01:00 today
        (True, 10 * 24, 5 * 24, None),  # on the weekday, but not 6 days old; nor in this 10-day period
        (None, None, None, None),  # both triggers disabled
    ],
)
def test_either_full_refresh_trigger_suffices(warehouse, on_weekday, max_age_hours, last_hours_ago, expected) -> None:
    if last_hours_ago is not None:
        warehouse.set_state(extraction.full_refresh_key("sast"), (NOW - last_hours_ago * HOUR).isoformat())
    weekday = None if on_weekday is None else (NOW.weekday() + (0 if on_weekday else 1)) % 7
    max_age = None if max_age_hours is None else max_age_hours * HOUR
    assert extraction.full_refresh_reason(warehouse, "sast", weekday=weekday, max_age=max_age, now=NOW) == expected


def test_values_the_warehouse_cannot_hold_are_reported_and_the_pull_goes_on(api: FakeApi, warehouse) -> None:
    api.findings["sast"] = [finding(i, minutes_ago=i) for i in range(1, 151)]
    api.by_id("sast", 5)["id"] = 2**64  # an id beyond BIGINT: the finding cannot be stored
    api.by_id("sast", 6)["rule_name"] = "rule\x00name"  # a NUL character: PostgreSQL text cannot hold it
    api.by_id("sast", 7)["first_seen_scan_id"] = 2**63

    result = run(api, warehouse)["issue_types"]["sast"]

    stored = rows(warehouse)
    assert set(stored) == set(range(1, 151)) - {5}  # the rest of page 0 and page 1 are loaded
    assert (stored[6].rule_name, stored[7].first_seen_scan_id) == (None, None)
    assert "\\u0000" in stored[6].raw  # raw keeps what was received
    assert (stored[7].rule_name, stored[6].first_seen_scan_id) == ("rule.a", 7)
    assert (result["rejected"], result["skipped"], result["unique"], result["received"]) == (3, 1, 149, 150)
    assert sorted(result["rejected_sample"], key=lambda r: r["field"]) == [
        {"id": 7, "field": "first_seen_scan_id", "reason": "integer beyond the 64-bit range of the column",
         "action": "stored as NULL"},
        {"id": str(2**64), "field": "id", "reason": "integer beyond the 64-bit range of the column",
         "action": "finding skipped"},
        {"id": 6, "field": "rule_name", "reason": "NUL character, which PostgreSQL text cannot hold",
         "action": "stored as NULL"},
    ]
    assert warehouse.get_state(extraction.watermark_key("sast")) is not None

    # a full pull again, one finding changed: that one is written, and the values that cannot be held are
    # reported again (their findings unchanged and not written)
    api.by_id("sast", 100)["status"] = "fixed"
    again = run(api, warehouse, full_refresh=True)["issue_types"]["sast"]
    assert (again["written"], again["rejected"], again["skipped"], again["unique"]) == (1, 3, 1, 149)
    assert again["rejected_sample"] == result["rejected_sample"]
    assert rows(warehouse)[100].status == "fixed"


def test_history_records_what_a_full_refresh_sees_change_once_and_snapshots_each_day(api: FakeApi, warehouse) -> None:
    from findings_provider.warehouse.schema import finding_events, finding_snapshots

    api.findings["sast"] = [finding(i, minutes_ago=24 * 60 + 180 * i) for i in range(1, 6)]
    warehouse.run_id = "scheduled__first"
    run(api, warehouse)  # first sync: the starting state, no events
    api.by_id("sast", 3)["status"] = "fixed"
    warehouse.run_id = "scheduled__second"
    run(api, warehouse, now=NOW + HOUR, full_refresh=True)
    warehouse.run_id = "manual__rerun"
    run(api, warehouse, now=NOW + 2 * HOUR, full_refresh=True)  # the same state again: nothing new
    run(api, warehouse, now=NOW + timedelta(days=1), full_refresh=True)
    with warehouse.engine.connect() as conn:
        recorded = [tuple(r) for r in conn.execute(select(
            finding_events.c.finding_id, finding_events.c.field, finding_events.c.old_value,
            finding_events.c.new_value, finding_events.c.run_id))]
        days = dict(conn.execute(select(finding_snapshots.c.day, finding_snapshots.c["count"]).where(
            finding_snapshots.c.status == "fixed")).all())
    assert recorded == [(3, "status", "open", "fixed", "scheduled__second")]
    assert days == {(NOW + timedelta(days=1)).date().isoformat(): 1, NOW.date().isoformat(): 1}
