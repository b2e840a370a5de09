"""A local mail catcher: an SMTP server (aiosmtpd) on a loopback port that keeps every message it receives, and,
for the demo, a read-only web page on loopback that lists them (subject, from, to, time, body as text).

The demo (``devtools/demo.py``) points its ``smtp_default`` connection at it and routes the pipeline's alerts to
it; the alert tests use the same server (``tests/smtp_inbox.py``) without the page::

    with MailCatcher(web=True) as catcher:
        env["AIRFLOW_CONN_SMTP_DEFAULT"] = catcher.connection_json()
        print(catcher.web_url)

The page is rendered by a Jinja template with autoescaping: a message's content is text on the page, never markup.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email import message_from_bytes, policy
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jinja2

from devtools.processes import free_port

LOOPBACK = "127.0.0.1"
#: The sender the demo's alerts carry (the connection's ``from_email``).
FROM_EMAIL = "findings-airflow@example.test"


@dataclass(frozen=True)
class Mail:
    """One received message."""

    sender: str
    recipients: tuple[str, ...]
    subject: str
    text: str  # the decoded text parts (an HTML part as received)
    received_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    html: bool = False  # whether ``text`` holds an HTML part

    @property
    def plain(self) -> str:
        """The body as a person reads it: an HTML part's text without its tags."""
        return html_to_text(self.text) if self.html else self.text


class _TextOf(HTMLParser):
    """Collects an HTML document's text; block elements end a line (scripts and styles are dropped)."""

    BLOCKS = frozenset({"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "table", "ul", "ol"})
    HIDDEN = frozenset({"script", "style", "head", "title"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    """The text of an HTML body, one line per block, blank lines collapsed."""
    parser = _TextOf()
    parser.feed(markup)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    return "\n".join(line for line in lines if line)


def parse_mail(sender: str, recipients: list[str], content: bytes) -> Mail:
    """A received message: its subject and its text parts (the plain ones when it has any, else the HTML)."""
    message = message_from_bytes(content, policy=policy.default)
    parts = [p for p in message.walk() if p.get_content_maintype() == "text"]
    plain = [p for p in parts if p.get_content_subtype() == "plain"]
    chosen = plain or parts
    text = "\n".join(str(p.get_content()) for p in chosen)
    return Mail(sender, tuple(recipients), str(message["subject"] or ""), text,
                html=bool(chosen) and not plain)


class _Keeper:
    """aiosmtpd's handler: keeps each message in the catcher."""

    def __init__(self, catcher: MailCatcher) -> None:
        self.catcher = catcher

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd's hook name
        self.catcher.keep(parse_mail(envelope.mail_from, envelope.rcpt_tos, envelope.content))
        return "250 OK"


PAGE = jinja2.Environment(autoescape=True).from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mail catcher ({{ mails|length }})</title>
<meta http-equiv="refresh" content="10">
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem; color: #1a202c; background: #fff; }
 @media (prefers-color-scheme: dark) { body { color: #e2e8f0; background: #1a202c; } }
 article { border: 1px solid #a0aec0; border-radius: 6px; padding: 0.75rem 1rem; margin: 1rem 0; }
 h2 { font-size: 1.1rem; margin: 0 0 0.5rem; }
 dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; margin: 0 0 0.5rem; }
 dt { font-weight: 600; }
 pre { white-space: pre-wrap; margin: 0; }
</style></head>
<body>
<h1>Mail catcher</h1>
<p>Every message sent to {{ smtp }} (SMTP) since the catcher started, newest first; the page refreshes every 10 s.</p>
{% for mail in mails %}
<article data-testid="mail">
 <h2>{{ mail.subject or "(no subject)" }}</h2>
 <dl>
  <dt>From</dt><dd>{{ mail.sender }}</dd>
  <dt>To</dt><dd>{{ mail.recipients|join(", ") }}</dd>
  <dt>Received</dt><dd><time datetime="{{ mail.received_at.isoformat() }}">{{
    mail.received_at.strftime("%Y-%m-%d %H:%M:%S UTC") }}</time></dd>
 </dl>
 <pre>{{ mail.plain }}</pre>
</article>
{% else %}
<p>No message yet. The pipeline's alerts arrive here: a failed or never-finished scan, a missed deadline, an
approval waiting.</p>
{% endfor %}
</body></html>
""")


def render_page(mails: list[Mail], smtp: str) -> str:
    """The page listing ``mails`` (newest first), every value escaped by the template."""
    return PAGE.render(mails=sorted(mails, key=lambda m: m.received_at, reverse=True), smtp=smtp)


class MailCatcher:
    """The SMTP server (always) and the web page (``web=True``), each on a free loopback port unless given.

    ``received`` lists the messages in arrival order (read it through :meth:`mails`).
    """

    def __init__(self, *, smtp_port: int | None = None, web: bool = False, web_port: int | None = None) -> None:
        self.host = LOOPBACK
        self.port = smtp_port or free_port(self.host)
        self.web = web
        self.web_port = (web_port or free_port(self.host)) if web else None
        self.received: list[Mail] = []
        self.lock = threading.Lock()
        self._controller: Any = None
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None

    @property
    def web_url(self) -> str | None:
        """The page's address (None without ``web``)."""
        return f"http://{self.host}:{self.web_port}/" if self.web_port else None

    def start(self) -> MailCatcher:
        from aiosmtpd.controller import Controller

        self._controller = Controller(_Keeper(self), hostname=self.host, port=self.port)
        self._controller.start()
        if self.web:
            self._http = ThreadingHTTPServer((self.host, self.web_port or 0), _page_handler(self))
            self._http_thread = threading.Thread(target=self._http.serve_forever, name="mail-catcher-web",
                                                 daemon=True)
            self._http_thread.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> MailCatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def keep(self, mail: Mail) -> None:
        with self.lock:
            self.received.append(mail)

    def mails(self) -> list[Mail]:
        with self.lock:
            return list(self.received)

    def connection_json(self, from_email: str = FROM_EMAIL) -> str:
        """An Airflow SMTP connection (``AIRFLOW_CONN_SMTP_DEFAULT``) to this server: plain SMTP, no login."""
        return json.dumps({"conn_type": "smtp", "host": self.host, "port": self.port, "extra": {
            "disable_tls": True, "disable_ssl": True, "from_email": from_email, "timeout": 10, "retry_limit": 1}})


def _page_handler(catcher: MailCatcher) -> type[BaseHTTPRequestHandler]:
    class Page(BaseHTTPRequestHandler):
        """GET / answers the page; anything else 404 or 405 (the page is read-only)."""

        def do_GET(self) -> None:  # http.server calls do_<METHOD>
            if self.path.split("?", 1)[0] != "/":
                self.send_error(404, "the mail catcher has one page: /")
                return
            body = render_page(catcher.mails(), f"{catcher.host}:{catcher.port}").encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.send_error(405, "the mail catcher's page is read-only")

        do_PUT = do_DELETE = do_PATCH = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the demo's terminal is for the demo's own lines."""

    return Page
