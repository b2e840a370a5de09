"""Alerts that reach people: failed scans, pipeline failures, approvals waiting, through the channels given (the
DAG files pass ``alerts`` of ``include/pipeline.yaml``, loaded when the DAG is parsed).

A channel is an SMTP connection (the SMTP provider's hook, which Airflow users already configure for mail) or any
Airflow notifier class (Slack webhook, ...). An alert no channel takes is logged as a warning that says so: never
dropped silently. A channel that fails is logged and the others still get the alert; delivery never fails the
task that raised the alert.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from findings_provider.config import AlertsConfig, NotifierChannel, SmtpChannel
from findings_provider.pipeline.alert import Alert
from findings_provider.text import fill

log = logging.getLogger(__name__)


@dataclass
class Delivery:
    """Counts of one ``deliver`` call (an XCom-sized summary)."""

    sent: int = 0
    failed: int = 0
    unrouted: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"sent": self.sent, "failed": self.failed, "unrouted": self.unrouted}


def alerts_config(value: AlertsConfig | dict[str, Any] | None) -> AlertsConfig:
    """``value`` as an :class:`AlertsConfig`: the model itself, its dict (as in pipeline.yaml, or
    :func:`alerts_kwargs`), or None: no channel (every alert is logged as unrouted)."""
    if isinstance(value, AlertsConfig):
        return value
    return AlertsConfig.model_validate(value or {})


def alerts_kwargs(config: AlertsConfig) -> dict[str, Any]:
    """``config`` as plain JSON values, for an argument Airflow stores (a Deadline callback's ``kwargs``)."""
    return config.model_dump(mode="json", by_alias=True)


def deliver(alerts: Sequence[Alert], config: AlertsConfig | dict[str, Any] | None, context: Any = None,
            logger: logging.Logger | Any = log) -> Delivery:
    """Send each alert to every channel of ``config`` that takes its kind; log the ones no channel takes."""
    config = alerts_config(config)
    done = Delivery()
    for alert in alerts:
        channels = [c for c in config.channels if alert.kind in c.events]
        if not channels:
            logger.warning("no alert channel configured for %s alerts (alerts.channels in include/pipeline.yaml): "
                           "%s", alert.kind, alert.subject)
            done.unrouted += 1
            continue
        for channel in channels:
            try:
                send(channel, alert, context)
                done.sent += 1
            except Exception as exc:  # one broken channel must not hide the alert from the others
                logger.warning("alert channel %s failed for %r: %s: %s", describe(channel), alert.subject,
                               type(exc).__name__, exc)
                done.failed += 1
    return done


def describe(channel: SmtpChannel | NotifierChannel) -> str:
    if isinstance(channel, SmtpChannel):
        return f"smtp ({channel.conn_id} to {', '.join(channel.to)})"
    return f"notifier {channel.class_}"


def send(channel: SmtpChannel | NotifierChannel, alert: Alert, context: Any = None) -> None:
    """Deliver one alert through one channel (raises what the channel raises)."""
    if isinstance(channel, SmtpChannel):
        from airflow.providers.smtp.hooks.smtp import SmtpHook

        with SmtpHook(smtp_conn_id=channel.conn_id) as hook:
            hook.send_email_smtp(to=channel.to, subject=alert.subject, html_content=alert.html(),
                                 from_email=channel.from_email)
        return
    module, _, name = channel.class_.rpartition(".")
    notifier_class = getattr(importlib.import_module(module), name)
    values = {"subject": alert.subject, "body": alert.body, "link": alert.link or "", "text": alert.text()}
    kwargs = {k: fill(v, values) if isinstance(v, str) else v for k, v in channel.kwargs.items()}
    notifier_class(**kwargs).notify(context if context is not None else {})
