"""Findings operators against the emulator, through connections: extraction, the summary report, publishing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from airflow.sdk import AssetAlias
from findings_provider import programme
from findings_provider.assets import SCANS
from findings_provider.client.vocabulary import OPEN_STATUSES
from findings_provider.compat import AirflowFailException
from findings_provider.operators.findings import (
    ExtractFindingsOperator,
    FindingsSummaryOperator,
    PublishAssetOperator,
)
from findings_provider.pipeline import extraction
from findings_provider.programme import FindingFilter

from .helpers import extract

pytestmark = pytest.mark.integration


def test_extract_accepts_rendered_params_and_pushes_written(fresh, warehouse, context) -> None:
    result = ExtractFindingsOperator(task_id="extract", issue_types="['sast', 'secrets']",
                                     full_refresh="False").execute(context)
    assert set(result["issue_types"]) == {"sast", "secrets"}
    assert context["ti"].xcom["written"] == result["written"] == warehouse.count_findings() > 0
    assert warehouse.count_findings("sca") == 0


def test_extract_makes_a_full_pull_on_the_first_run_of_a_day(fresh, warehouse, context) -> None:
    now = datetime.now(timezone.utc)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for issue_type, last_full in (("sast", midnight - timedelta(minutes=1)), ("sca", midnight)):
        warehouse.set_state(extraction.full_refresh_key(issue_type), last_full.isoformat())
        warehouse.set_state(extraction.watermark_key(issue_type), (now - timedelta(hours=1)).isoformat())

    result = ExtractFindingsOperator(task_id="extract", issue_types="['sast', 'sca']").execute(context)

    sast, sca = result["issue_types"]["sast"], result["issue_types"]["sca"]
    assert sast["full"] is True  # pipeline.yaml: one full pull per 24 h from 00:00 UTC
    assert sast["reason"] == f"no full refresh since {midnight:%Y-%m-%d} 00:00 UTC (one per 24 h)"
    assert sca["full"] is False
    assert result["rejected"] == sast["rejected"] == 0


def test_extract_refuses_an_unknown_issue_type_naming_the_param(fresh, warehouse, context) -> None:
    with pytest.raises(AirflowFailException, match=r"issue_types: unknown value\(s\) \['bogus'\]"):
        ExtractFindingsOperator(task_id="extract", issue_types=["sast", "bogus"]).execute(context)
    assert fresh.requests() == []


def test_summary_writes_a_report_that_matches_the_warehouse(fresh, warehouse, context) -> None:
    extract()
    result = FindingsSummaryOperator(task_id="summary").execute(context)
    # open as the programme defines it everywhere: open, reviewing or fixing, a finding on several branches once
    every_copy = sum(warehouse.count_findings(status=s) for s in OPEN_STATUSES)
    with warehouse.engine.connect() as conn:
        counted = programme.count(conn, FindingFilter(measure="open"), {}, datetime.now(timezone.utc))
        assert every_copy == programme.count(conn, FindingFilter(measure="open", branches="all"), {},
                                             datetime.now(timezone.utc))
    assert result["open_findings"] == counted > 0
    assert counted < every_copy  # the generated data has findings on several branches
    assert result["open_findings"] > warehouse.count_findings(status="open", counted=True)  # and all three statuses
    page = Path(result["report"]["html"]).read_text()
    assert page.count("<img") == 3  # by severity, over time (one snapshot day), by repository
    # the same page is in the warehouse, where the dashboard on the API server reads it
    assert warehouse.latest_report("findings_summary").html == page
    assert result["report"]["stored_id"] == warehouse.latest_report("findings_summary").id
    assert "<h2>Time to fix</h2>" in page  # table names as a person reads them
    assert "<h2>Sla breaches</h2>" in page
    assert result["alerts"] == []  # the first summary only records when it looked
    by_severity = pd.read_csv(result["report"]["csv"]["by_severity"], index_col=0)
    assert int(by_severity.to_numpy().sum()) == result["open_findings"]
    assert list(by_severity.columns) == ["sast", "sca"]
    by_repo = pd.read_csv(result["report"]["csv"]["by_repository"], index_col=0)
    assert by_repo.sum(axis=1).is_monotonic_decreasing
    assert len(by_repo) == result["repositories"]


class OutletEvents(dict):
    """Stands in for ``context["outlet_events"]``: an accessor per alias that records what was added."""

    def __missing__(self, key):
        accessor = self[key] = type("Accessor", (), {"added": [], "add": lambda s, a, extra=None: s.added.append(
            (a, extra))})()
        return accessor


@pytest.mark.parametrize("changed", [0, "0", None, "None"])
def test_publish_emits_nothing_without_changes(changed) -> None:
    op = PublishAssetOperator(task_id="publish", asset=SCANS, changed=changed, what="scans")
    events = OutletEvents()
    assert op.execute({"outlet_events": events}) == {"published": False, "changed": 0}
    assert events[op.alias].added == []
    assert op.outlets == [AssetAlias(name="findings://warehouse/scans/published")]


def test_publish_emits_the_asset_when_something_changed() -> None:
    op = PublishAssetOperator(task_id="publish", asset=SCANS, changed="3")
    events = OutletEvents()
    assert op.execute({"outlet_events": events}) == {"published": True, "changed": 3}
    assert events[op.alias].added == [(SCANS, {"changed": 3})]


@pytest.mark.parametrize(("changed", "dry_run", "said"), [
    (1, "True", "a dry run: nothing was sent to the service: "),
    (0, False, "no new scans: "),
])
def test_publish_says_why_nothing_was_published(capsys: pytest.CaptureFixture[str], changed: int, dry_run: object,
                                                said: str) -> None:
    op = PublishAssetOperator(task_id="publish", asset=SCANS, changed=changed, what="scans", dry_run=dry_run)
    events = OutletEvents()
    assert op.execute({"outlet_events": events})["published"] is False
    assert events[op.alias].added == []
    captured = capsys.readouterr()
    assert f"{said}{SCANS.uri} is not updated" in captured.out + captured.err


def test_a_run_stands_for_its_logical_date_or_else_the_time_it_was_due() -> None:
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from findings_provider.operators.findings import run_stands_for

    logical = datetime(2026, 11, 20, tzinfo=timezone.utc)
    due = datetime(2026, 11, 21, 3, tzinfo=timezone.utc)
    assert run_stands_for({"logical_date": logical, "dag_run": SimpleNamespace(run_after=due)}) == logical
    import pendulum  # what Airflow gives: made a plain datetime, which periods can divide

    stands_for = run_stands_for({"logical_date": pendulum.datetime(2026, 11, 20, 5, 30)})
    assert type(stands_for) is datetime
    assert stands_for == datetime(2026, 11, 20, 5, 30, tzinfo=timezone.utc)
    # an Asset-triggered run has no logical date in Airflow 3: the time it was due to run
    assert run_stands_for({"logical_date": None, "dag_run": SimpleNamespace(run_after=due)}) == due
    assert run_stands_for({}) is None  # outside a run: the clock decides
