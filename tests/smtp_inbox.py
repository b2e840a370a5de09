"""A real SMTP server on a free loopback port that keeps every message it receives, for the alert tests: the
demo's mail catcher (``devtools/mail_catcher.py``, aiosmtpd) without its web page.

    with Mailbox() as box:
        env["AIRFLOW_CONN_SMTP_DEFAULT"] = box.connection_json()
        ...
        (mail,) = box.wait_for(lambda m: "scan(s) failed" in m.subject)
"""

from __future__ import annotations

import time
from collections.abc import Callable

from devtools.mail_catcher import Mail, MailCatcher

__all__ = ["Mail", "Mailbox"]


class Mailbox(MailCatcher):
    """The SMTP server; ``received`` lists the mails in arrival order."""

    def __enter__(self) -> Mailbox:
        self.start()
        return self

    def wait_for(self, match: Callable[[Mail], bool], timeout: float = 30.0) -> list[Mail]:
        """The received mails ``match`` accepts, waiting up to ``timeout`` for at least one."""
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.mails() if match(m)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)
