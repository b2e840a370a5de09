"""Operators of scan monitoring: search and store scans, refresh the ones waited for, alert on failures."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseNotifier

from findings_provider.alerts import Alert, alerts_config, deliver
from findings_provider.compat import AirflowFailException
from findings_provider.config import AlertsConfig, ScanMonitoringConfig
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.values import as_bool, as_int, as_str_list

#: Dotted paths (comma-separated) of extra notifiers every ScanFailureAlertOperator calls, e.g.
#: ``my_company.alerts.SlackScanAlertNotifier``: a hook point that needs no DAG change.
NOTIFIERS_ENV = "FINDINGS_SCAN_ALERT_NOTIFIERS"


#: The defaults of pipeline.yaml's ``scan_monitoring``: an argument left out takes its value from here.
_SCAN_MONITORING = ScanMonitoringConfig()


class SearchScansOperator(FindingsBaseOperator):
    """Search scans since the last successful search (minus an overlap) and store them in the warehouse.

    The first run, or one with no earlier success, looks back ``lookback_days``. Returns the ids of the scans
    to wait for (running or pending, including ones still running from earlier runs), ready for a mapped
    ``ScanCompletionSensor``; pushes under their own XCom keys ``failed_ids`` (finished unsuccessfully, or an
    unknown status), ``newly_completed`` (how many scans completed since the last look) and ``summary`` (the
    counts).

    :param lookback_days: how far back a search with no earlier success goes (templated; >= 1).
    :param overlap_minutes: how far before the last successful search the next one starts (templated).
    """

    lineage_reads = ("scans_search",)
    lineage_writes = ("scans",)

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "lookback_days", "overlap_minutes")
    ui_color = "#dbe9f6"

    def __init__(self, *, lookback_days: int | str = _SCAN_MONITORING.lookback_days,
                 overlap_minutes: int | str = _SCAN_MONITORING.overlap_minutes, **kwargs: Any):
        super().__init__(**kwargs)
        self.lookback_days = lookback_days
        self.overlap_minutes = overlap_minutes

    def run(self, context: Any) -> list[str]:
        from findings_provider.pipeline import scans

        result = scans.search_and_store(
            self.api_hook.client,
            self.warehouse_hook.get_warehouse(),
            lookback_days=as_int(self.lookback_days, "lookback_days", minimum=1),
            overlap=timedelta(minutes=as_int(self.overlap_minutes, "overlap_minutes", minimum=0)),
        )
        running = result.pop("running_ids")
        ti = context["ti"]
        ti.xcom_push(key="failed_ids", value=result.pop("failed_ids"))
        ti.xcom_push(key="newly_completed", value=result["newly_completed"])
        ti.xcom_push(key="summary", value=result)
        return running


class RefreshScansOperator(FindingsBaseOperator):
    """Store the current status of the scans that were waited for; merge failures and completions.

    Pushes ``failed_ids`` (the given ones plus waited-for scans that did not succeed) and ``newly_completed``
    (the given count plus waited-for scans that completed) for the alert and publishing tasks.

    :param scan_ids: the scans that were waited for (templated; the return value of ``SearchScansOperator``).
    :param failed_ids: failures already known (templated).
    :param newly_completed: completions already counted (templated).
    """

    lineage_reads = ("scan_get",)
    lineage_writes = ("scans",)

    template_fields: Sequence[str] = (
        *FindingsBaseOperator.template_fields, "scan_ids", "failed_ids", "newly_completed",
    )

    def __init__(self, *, scan_ids: Any = (), failed_ids: Any = (), newly_completed: Any = 0, **kwargs: Any):
        super().__init__(**kwargs)
        self.scan_ids = scan_ids
        self.failed_ids = failed_ids
        self.newly_completed = newly_completed

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import scans

        waited = as_str_list(self.scan_ids, "scan_ids")
        result = scans.refresh_scans(self.api_hook.client, self.warehouse_hook.get_warehouse(), waited)
        failed = sorted(set(as_str_list(self.failed_ids, "failed_ids")) | set(result["failed_ids"]),
                        key=scans._id_order)
        completed = as_int(self.newly_completed or 0, "newly_completed") + result["newly_completed"]
        ti = context["ti"]
        ti.xcom_push(key="failed_ids", value=failed)
        ti.xcom_push(key="newly_completed", value=completed)
        return {"waited": len(waited), "refreshed": result["refreshed"], "failed": len(failed),
                "newly_completed": completed, "still_running": len(result["still_running_ids"])}


AlertHook = BaseNotifier | Callable[[list[dict[str, Any]], Any], None]


class ScanFailureAlertOperator(FindingsBaseOperator):
    """Alert people when scans finished unsuccessfully or never finished; a failed scan is not a failed pipeline.

    For each scan no earlier run alerted about, it fetches the scan's details and logs one line naming the
    repository, branch, commit, exit code and CI job URL; sends one ``scan_failed`` alert listing them through the
    channels of ``alerts`` (``findings_provider.alerts``: mail, chat; none given, a warning says so); then calls
    every extra notifier (the ``notifiers`` given here, then those named in ``$FINDINGS_SCAN_ALERT_NOTIFIERS``, kept
    for compatibility). A notifier is a ``BaseNotifier`` (it finds the alerts in ``context["scan_alerts"]``) or a
    callable ``(alerts, context)``; a failing one is logged, never hides the alert. The task succeeds (the run stays
    green) unless ``fail_on_alert``: then it raises ``AirflowFailException`` with the alert text, as teams that
    alert on failed runs want. The alerts are also pushed to XCom (``scan_alerts``, a short list).

    :param scan_ids: scans that did not succeed (templated; an XCom of ``RefreshScansOperator``).
    :param notifiers: extra notifiers to call.
    :param alerts: where the alert goes (``alerts`` of pipeline.yaml; an ``AlertsConfig`` or its dict; None: it is
        logged as unrouted).
    :param fail_on_alert: fail the task when there was something to alert (None: ``fail_on_alert`` of ``alerts``).
    """

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "scan_ids")
    ui_color = "#f6d5d5"

    def __init__(self, *, scan_ids: Any = (), notifiers: Sequence[AlertHook] | None = None,
                 alerts: AlertsConfig | dict[str, Any] | None = None, fail_on_alert: bool | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.alerts = alerts_config(alerts)
        self.scan_ids = scan_ids
        self.notifiers = list(notifiers or ())
        self.fail_on_alert = fail_on_alert

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import scans

        warehouse = self.warehouse_hook.get_warehouse()
        run_id = context.get("run_id")
        failed = as_str_list(self.scan_ids, "scan_ids")
        fresh = scans.not_yet_alerted(warehouse, failed, run_id)
        if len(fresh) < len(failed):
            self.log.info("%d failed scan(s) were alerted by an earlier run", len(failed) - len(fresh))
        if not fresh:
            self.log.info("no failed or never-finished scans to report")
            return {"alerted": 0}
        alerts = scans.scan_alerts(self.api_hook.client, warehouse, fresh)
        for alert in alerts:
            self.log.error("%s", alert.line())
        payload = [a.as_dict() for a in alerts]
        context["ti"].xcom_push(key="scan_alerts", value=payload[:50])
        text = "\n".join(a.line() for a in alerts)
        subject = f"{len(alerts)} scan(s) failed or never finished"
        config = self.alerts
        links = [a.ci_job_url for a in alerts if a.ci_job_url]
        delivery = deliver([Alert("scan_failed", subject, text, links[0] if len(links) == 1 else None)], config,
                           context, logger=self.log)
        self._notify(payload, context)
        scans.mark_alerted(warehouse, fresh, run_id)
        fail = config.fail_on_alert if self.fail_on_alert is None else as_bool(self.fail_on_alert, "fail_on_alert")
        if fail:
            raise AirflowFailException(f"{subject}:\n{text}")
        return {"alerted": len(alerts), "delivery": delivery.as_dict()}

    def _notify(self, alerts: list[dict[str, Any]], context: Any) -> None:
        for notifier in [*self.notifiers, *_env_notifiers()]:
            try:
                if isinstance(notifier, BaseNotifier):
                    context["scan_alerts"] = alerts
                    notifier(context)
                else:
                    notifier(alerts, context)
            except Exception as exc:  # a broken notifier must not hide the alert
                self.log.warning("scan alert notifier %r failed: %s", notifier, exc)


def _env_notifiers() -> list[AlertHook]:
    """Notifiers named by dotted path in ``$FINDINGS_SCAN_ALERT_NOTIFIERS`` (classes are instantiated)."""
    out: list[AlertHook] = []
    for path in (p.strip() for p in os.environ.get(NOTIFIERS_ENV, "").split(",")):
        if path:
            module, _, name = path.rpartition(".")
            target = getattr(importlib.import_module(module), name)
            out.append(target() if isinstance(target, type) else target)
    return out
