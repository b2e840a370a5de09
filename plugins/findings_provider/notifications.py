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

from findings_provider.alerts import Alert, alerts_config, deliver
from findings_provider.config import AlertsConfig
from findings_provider.names import APPROVAL_DAGS


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
    from findings_provider.pipeline.scans import ScanAlert  # the scans pipeline (the warehouse): not at a parse

    return "\n".join(ScanAlert(**alert).line() for alert in alerts)


class FindingsAlertNotifier(BaseNotifier):
    """Sends a programme alert through the channels of ``alerts`` (``findings_provider.alerts``; the DAG files pass
    ``alerts`` of ``include/pipeline.yaml``): SMTP connections or other Airflow notifiers; none given, a warning.

    ``kind`` says what the context is about:

    - ``pipeline_failed`` (the ``on_failure_callback`` of every pipeline task): the DAG, task, run, try and the
      error, with a link to the task's log;
    - ``approval_waiting`` (the ``notifiers`` of the approval tasks): the approval's subject, with a link to its
      Required Actions page.
    """

    template_fields = ("kind",)

    def __init__(self, kind: str = "pipeline_failed", *, alerts: AlertsConfig | dict[str, Any] | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.alerts = alerts_config(alerts)

    def notify(self, context: Any) -> None:
        deliver([context_alert(self.kind, context)], self.alerts, context=context, logger=self.log)


def context_alert(kind: str, context: Any) -> Alert:
    """The alert of ``kind`` about the task instance of ``context``."""
    ti = context.get("ti") or context.get("task_instance")
    dag_id = getattr(ti, "dag_id", None) or "?"
    task_id = getattr(ti, "task_id", None) or "?"
    run_id = context.get("run_id") or getattr(ti, "run_id", None) or "?"
    if kind == "approval_waiting":
        task = context.get("task")
        return Alert(kind, f"approval waiting: {dag_id}.{task_id} ({run_id})",
                     str(getattr(task, "subject", "") or ""), _approval_link(context) or _log_url(ti))
    error = context.get("exception")
    return Alert(kind, f"findings pipeline failed: {dag_id}.{task_id} ({run_id}, try {getattr(ti, 'try_number', '?')})",
                 f"{type(error).__name__}: {error}" if error is not None else "the task failed", _log_url(ti))


def _log_url(ti: Any) -> str | None:
    try:
        return getattr(ti, "log_url", None)
    except Exception:  # a task instance outside a run has no URL
        return None


def _approval_link(context: Any) -> str | None:
    try:
        from airflow.providers.standard.operators.hitl import HITLOperator

        return HITLOperator.generate_link_to_ui_from_context(context=context)
    except Exception:  # no [api] base_url configured: the task's log link instead
        return None


async def deadline_missed(context: Any = None, minutes: float | None = None, alerts: dict[str, Any] | None = None,
                          **_: Any) -> str:
    """Airflow Deadline alert callback (``dag_defaults.deadline_for``; run by the triggerer): the run of the
    context is not finished ``minutes`` after it was queued; sends ``deadline_missed`` through the channels of
    ``alerts`` (``alerts.alerts_kwargs`` of the DAG's configuration; in a thread: SMTP and notifiers block) and
    returns the delivery counts as text (Airflow stores a callback's result in a text column: anything else crashes
    the triggerer on Airflow 3.3.2)."""
    import asyncio

    from findings_provider.dashboard.links import dashboard_url

    alert = deadline_alert(context or {}, minutes, dashboard_url())
    delivery = await asyncio.to_thread(deliver, [alert], alerts)
    return ", ".join(f"{key} {value}" for key, value in delivery.as_dict().items())


def deadline_alert(context: Any, minutes: float | None, link: str | None = None) -> Alert:
    """The ``deadline_missed`` alert about the run of a Deadline callback's context (``dag_run``, ``deadline``)."""
    run = context.get("dag_run") or {}
    dag_id, run_id = run.get("dag_id") or "?", run.get("dag_run_id") or run.get("run_id") or "?"
    waited = f"{minutes:g} minutes" if minutes is not None else "its deadline"
    lines = [f"queued at {run.get('queued_at') or '?'}, state {run.get('state') or '?'}",
             f"deadline {(context.get('deadline') or {}).get('deadline_time') or '?'}"]
    if dag_id in APPROVAL_DAGS:
        lines.append("it may be waiting for a person's approval (Browse > Required Actions)")
    return Alert("deadline_missed", f"{dag_id} run {run_id} not finished {waited} after it was queued",
                 "\n".join(lines), link)
