"""Operators of findings extraction: pull findings into the warehouse, summarise them, publish the Asset."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Asset, AssetAlias, BaseOperator

from findings_provider.alerts import alerts_config, deliver
from findings_provider.client.canonical import ISSUE_TYPES
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.client.timeutil import parse_timestamp
from findings_provider.config import AlertsConfig, ExtractionConfig, FixDays, SlaConfig
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.operators.links import SummaryReportLink
from findings_provider.values import ParamError, as_bool, as_int, as_optional_int, as_str_list

#: The defaults of pipeline.yaml's ``findings_extraction``: an argument left out takes its value from here.
_EXTRACTION = ExtractionConfig()


def run_stands_for(context: Any) -> datetime | None:
    """The time a run stands for: its logical date; an Asset-triggered run has none (Airflow 3), then the time it
    was due to run (``run_after``); None outside a run (the clock decides). A plain UTC ``datetime`` (Airflow gives
    pendulum's, whose differences do not divide by a ``timedelta``)."""
    logical = context.get("logical_date")
    if logical is None:
        logical = getattr(context.get("dag_run"), "run_after", None)
    return parse_timestamp(logical.isoformat()) if isinstance(logical, datetime) else None


class ExtractFindingsOperator(FindingsBaseOperator):
    """Pull findings of each issue type into the warehouse, incrementally, streaming page by page.

    Each pull starts at the issue type's watermark minus an overlap; everything when there is none, on
    ``full_refresh``, once in every period of ``full_refresh_max_age_hours`` (aligned on 00:00 UTC; status and
    triage changes reach the warehouse only through a full pull), and on ``full_refresh_weekday``: the period and
    the weekday of the run's logical date, so a backfill or a re-run behaves like the day it stands for. Pages of
    ``page_size`` are upserted one transaction each; the watermark advances only after the whole pull succeeded, and
    never past the run's start (plus a small clock skew). ``secrets`` are listed through their own cursor-paged
    operation and always pulled completely. Values the warehouse cannot hold do not fail the task: they are counted
    in ``rejected`` (with a sample) and logged as warnings. Returns the counts per issue type and pushes ``written``
    (rows inserted or changed) under its own XCom key.

    Every argument left out takes the default of ``findings_extraction`` in pipeline.yaml's schema
    (``config.ExtractionConfig``); the DAG file passes the values of its pipeline.yaml.

    :param issue_types: any of ``sast``, ``sca``, ``ai_sast``, ``secrets`` (templated).
    :param full_refresh: pull everything regardless of the watermark (templated).
    :param page_size: findings per request, 100..3000.
    :param overlap_minutes: how far before the watermark an incremental pull starts.
    :param full_refresh_weekday: the UTC weekday (0 Monday .. 6 Sunday) whose first run is a full pull; None: none.
    :param full_refresh_max_age_hours: a full pull once in every period of this many hours; None: none.
    """

    lineage_reads = ("findings", "secrets")
    lineage_writes = ("findings", "finding_events", "finding_snapshots")

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "issue_types", "full_refresh")
    ui_color = "#dff0d8"

    def __init__(
        self,
        *,
        issue_types: Any = None,
        full_refresh: Any = False,
        page_size: int = _EXTRACTION.page_size,
        overlap_minutes: int = _EXTRACTION.overlap_minutes,
        full_refresh_weekday: int | None = _EXTRACTION.full_refresh_weekday,
        full_refresh_max_age_hours: float | None = _EXTRACTION.full_refresh_max_age_hours,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.issue_types = issue_types
        self.full_refresh = full_refresh
        self.page_size = page_size
        self.overlap_minutes = overlap_minutes
        self.full_refresh_weekday = full_refresh_weekday
        self.full_refresh_max_age_hours = full_refresh_max_age_hours

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import extraction  # the pull's code, imported by a run, not by a parse

        types = as_str_list(self.issue_types, "issue_types", allowed=ISSUE_TYPES) if (
            self.issue_types not in (None, "", "None")) else [str(t) for t in _EXTRACTION.issue_types]
        if not types:
            raise ParamError(f"issue_types is empty; give at least one of {', '.join(ISSUE_TYPES)}")
        page_size = as_int(self.page_size, "page_size", minimum=FINDINGS_PAGE_SIZE.minimum,
                           maximum=FINDINGS_PAGE_SIZE.maximum)
        overlap = as_int(self.overlap_minutes, "overlap_minutes", minimum=0)
        weekday = as_optional_int(self.full_refresh_weekday, "full_refresh_weekday", minimum=0, maximum=6)
        max_age = self.full_refresh_max_age_hours
        result = extraction.run_extraction(
            self.api_hook.client,
            self.warehouse_hook.get_warehouse(),
            types,
            full_refresh=as_bool(self.full_refresh, "full_refresh"),
            full_refresh_weekday=weekday,
            full_refresh_max_age=None if max_age is None else timedelta(hours=float(max_age)),
            overlap=timedelta(minutes=overlap),
            page_size=page_size,
            logical_date=run_stands_for(context),
            run_id=context.get("run_id"),
        )
        context["ti"].xcom_push(key="written", value=result["written"])
        return result


class FindingsSummaryOperator(FindingsBaseOperator):
    """The programme report (pandas): open findings by severity x issue type and by repository, open findings over
    time, time to fix and to triage, SLA breaches (``fix_days``), triage and ticket activity per run, scan health;
    to the log, a report, and alerts.

    Writes ``<report_name>.html`` (tables and charts) and one CSV per table to the report directory
    (``$FINDINGS_REPORT_DIR`` or ``$AIRFLOW_HOME/reports``) and stores the HTML in the warehouse, where the
    dashboard shows it. Sends ``new_critical`` and ``sla_breach`` alerts about what changed since its last run
    (``pipeline.summary.programme_alerts``). Returns the report's paths, the totals and the alerts' delivery.

    :param report_name: file name stem of the report (templated).
    :param fix_days: the fix-time targets, days per severity (``sla.fix_days`` of pipeline.yaml; a ``FixDays`` or
        its dict; default: that schema's default).
    :param alerts: where the alerts go (``alerts`` of pipeline.yaml; an ``AlertsConfig`` or its dict; None: they
        are logged as unrouted).
    """

    operator_extra_links = (SummaryReportLink(),)

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "report_name")
    ui_color = "#fcf8e3"
    lineage_writes = ("reports",)

    def __init__(self, *, report_name: str = "findings_summary", fix_days: FixDays | dict[str, Any] | None = None,
                 alerts: AlertsConfig | dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.report_name = report_name
        self.fix_days = fix_days if isinstance(fix_days, FixDays) else (
            SlaConfig().fix_days if fix_days is None else FixDays.model_validate(fix_days))
        self.alerts = alerts_config(alerts)

    def run(self, context: Any) -> dict[str, Any]:
        from datetime import timezone

        from findings_provider.dashboard.links import dashboard_url
        from findings_provider.pipeline.summary import (
            LATEST_METRICS_KEY,
            latest_metrics,
            programme_alerts,
            programme_tables,
        )
        from findings_provider.reports import Chart, log_table, write_report

        targets = self.fix_days.targets()
        warehouse = self.warehouse_hook.get_warehouse()
        now = datetime.now(timezone.utc)
        tables = programme_tables(warehouse, targets, now)
        sla = tables["sla"]
        titles = {"by_severity": "Open findings by severity and issue type",
                  "by_repository": "Open findings by repository and severity",
                  "sla": "Fix-time targets (days) and open findings past them"}
        for name in ("by_severity", "by_repository", "time_to_fix", "time_to_triage", "sla"):
            log_table(self.log, titles.get(name, name), tables[name])
        report = write_report(
            self.report_name,
            "Open findings",
            tables,
            charts=[
                Chart("Open findings by severity and issue type", "by_severity", stacked=True),
                Chart("Open findings over time", "open_over_time", kind="line"),
                Chart("Open findings by repository (top 20)", "by_repository", stacked=True),
            ],
            warehouse=warehouse,
            kind="findings_summary",
        )
        self.log.info("report written: %s (stored in the warehouse as report %s)", report.html, report.stored_id)
        warehouse.set_state(LATEST_METRICS_KEY, latest_metrics(context.get("run_id"), tables, now))
        alerts = programme_alerts(warehouse, targets, now, link=dashboard_url())
        delivery = deliver(alerts, self.alerts, context=context, logger=self.log)
        totals = tables["by_severity"]
        return {
            "open_findings": int(totals.to_numpy().sum()) if not totals.empty else 0,
            "repositories": len(tables["by_repository"]),
            "sla_breaches": int(sla["breaching"].sum()) if not sla.empty else 0,
            "alerts": [a.kind for a in alerts],
            "delivery": delivery.as_dict(),
            "report": report.as_xcom(),
        }


class PublishAssetOperator(BaseOperator):
    """Emit an event of ``asset`` only when ``changed`` is a positive count and it is not a dry run; otherwise
    succeed without one, saying why.

    The next pipeline stage is scheduled on the Asset, so it runs only when there is new data. The event goes
    out through an ``AssetAlias`` outlet (``<asset name>/published``): an Airflow task with a plain Asset
    outlet always emits on success, an alias emits only what the task adds to it, so the task stays green.

    :param asset: the Asset to update.
    :param changed: how many things changed upstream (templated; typically an XCom).
    :param what: what ``changed`` counts, for the log.
    :param dry_run: the upstream run was a dry run: nothing is published, and the log says so rather than
        looking like a run that found nothing (templated).
    """

    template_fields: Sequence[str] = ("changed", "is_dry_run")
    ui_color = "#e7e7f7"

    def __init__(self, *, asset: Asset, changed: Any, what: str = "changes", dry_run: Any = False,
                 **kwargs: Any) -> None:
        self.asset = asset
        self.alias = AssetAlias(name=f"{asset.name}/published")
        kwargs["outlets"] = [*kwargs.get("outlets", ()), self.alias]
        super().__init__(**kwargs)
        self.changed = changed
        self.what = what
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method

    def execute(self, context: Any) -> dict[str, Any]:
        if as_bool(self.is_dry_run, "dry_run"):
            self.log.info("a dry run: nothing was sent to the service: %s is not updated", self.asset.uri)
            return {"published": False, "changed": 0, "dry_run": True}
        count = as_optional_int(self.changed, "changed") or 0
        if count <= 0:
            self.log.info("no new %s: %s is not updated", self.what, self.asset.uri)
            return {"published": False, "changed": 0}
        context["outlet_events"][self.alias].add(self.asset, extra={"changed": count})
        self.log.info("%d new %s: publishing %s", count, self.what, self.asset.uri)
        return {"published": True, "changed": count}
