"""A real SMTP server (aiosmtpd) on a free loopback port that keeps every message it receives, for the alert tests.

    with Mailbox() as box:
        env["AIRFLOW_CONN_SMTP_DEFAULT"] = box.connection_json()
        ...
        (mail,) = box.wait_for(lambda m: "scan(s) failed" in m.subject)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email import message_from_bytes, policy
from typing import Any


@dataclass(frozen=True)
class Mail:
    sender: str
    recipients: tuple[str, ...]
    subject: str
    text: str  # the decoded body (HTML as received)


class _Keeper:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd's hook name
        message = message_from_bytes(envelope.content, policy=policy.default)
        parts = [p for p in message.walk() if p.get_content_maintype() == "text"]
        text = "\n".join(p.get_content() for p in parts)
        with self.box.lock:
            self.box.received.append(Mail(envelope.mail_from, tuple(envelope.rcpt_tos), str(message["subject"]),
                                          text))
        return "250 OK"


class Mailbox:
    """The SMTP server; ``received`` lists the mails in arrival order."""

    def __init__(self) -> None:
        self.received: list[Mail] = []
        self.lock = threading.Lock()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._controller: Any = None

    def __enter__(self) -> Mailbox:
        from aiosmtpd.controller import Controller

        self._controller = Controller(_Keeper(self), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()

    def connection_json(self, from_email: str = "findings-airflow@example.test") -> str:
        """An Airflow SMTP connection (``AIRFLOW_CONN_SMTP_DEFAULT``) to this server: plain SMTP, no login."""
        return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": self.port, "extra": {
            "disable_tls": True, "disable_ssl": True, "from_email": from_email, "timeout": 10, "retry_limit": 1}})

    def mails(self) -> list[Mail]:
        with self.lock:
            return list(self.received)

    def wait_for(self, match: Callable[[Mail], bool], timeout: float = 30.0) -> list[Mail]:
        """The received mails ``match`` accepts, waiting up to ``timeout`` for at least one."""
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.mails() if match(m)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)
