"""Notifiers for scan alerts: the hook point where users plug in chat, e-mail or paging.

``ScanFailureAlertOperator`` always fails visibly in the Airflow UI. To also send the alert somewhere, subclass
:class:`ScanAlertNotifier` and implement :meth:`ScanAlertNotifier.send`, then either

- pass it to the operator (``ScanFailureAlertOperator(notifiers=[MyNotifier()])``),
- name it in ``$FINDINGS_SCAN_ALERT_NOTIFIERS`` (dotted path; no DAG change), or
- use it as the alert task's ``on_failure_callback`` (the alerts are read from the task's XCom).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseNotifier

from findings_provider.pipeline.scans import ScanAlert


class ScanAlertNotifier(BaseNotifier):
    """Base class of scan-alert notifiers: ``send`` receives the alerts as small dicts.

    Each alert has ``scan_id``, ``status``, ``repository``, ``branch``, ``commit``, ``ci_job_url`` and
    ``exit_code``. The default ``send`` writes one warning line per alert to the task log.
    """

    def notify(self, context: Any) -> None:
        alerts = context.get("scan_alerts")
        if alerts is None:
            ti = context.get("ti")
            alerts = ti.xcom_pull(task_ids=ti.task_id, key="scan_alerts") if ti is not None else None
        self.send(list(alerts or ()), context)

    def send(self, alerts: list[dict[str, Any]], context: Any) -> None:
        """Deliver the alerts (override this)."""
        for line in format_alerts(alerts).splitlines():
            self.log.warning("%s", line)


def format_alerts(alerts: list[dict[str, Any]]) -> str:
    """The alerts as plain text, one line per scan, as in the task log (for chat or e-mail notifiers)."""
    return "\n".join(ScanAlert(**alert).line() for alert in alerts)
