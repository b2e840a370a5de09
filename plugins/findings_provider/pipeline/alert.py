"""An alert, as the pipeline raises it: its kind, subject, body and link. Delivery through Airflow (SMTP connections,
notifiers) is ``findings_provider.alerts``'s job."""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Alert:
    """One alert: its kind (``config.ALERT_KINDS``), a one-line subject, a plain-text body and a link to act on."""

    kind: str
    subject: str
    body: str
    link: str | None = None

    def text(self) -> str:
        """Subject, body and link as plain text (chat, log)."""
        return "\n".join(part for part in (self.subject, self.body, self.link) if part)

    def html(self) -> str:
        """The alert as escaped HTML (mail)."""
        link = f'<p><a href="{html.escape(self.link)}">{html.escape(self.link)}</a></p>' if self.link else ""
        return f"<p>{html.escape(self.subject)}</p><pre>{html.escape(self.body)}</pre>{link}"
