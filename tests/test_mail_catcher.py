"""The demo's mail catcher (``devtools/mail_catcher.py``): messages sent to it over real SMTP are listed on its
read-only page over real HTTP, every value escaped; the demo routes its alerts to it."""

from __future__ import annotations

import json
import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest
from findings_provider.config import SmtpChannel, load_pipeline_config
from smtp_inbox import Mailbox

from devtools.demo import DEMO_ALERTS_TO, SMTP_CONN_ID, SOURCE_CONFIG, write_demo_config
from devtools.mail_catcher import MailCatcher, html_to_text

HOSTILE_SUBJECT = '<script>alert("x")</script> 3 scans <b>failed</b> & more'


@pytest.fixture
def catcher() -> Iterator[MailCatcher]:
    with MailCatcher(web=True) as running:
        yield running


def send(catcher: MailCatcher, message: EmailMessage) -> None:
    with smtplib.SMTP(catcher.host, catcher.port, timeout=10) as smtp:
        smtp.send_message(message)


def message(subject: str, text: str | None = None, html: str | None = None,
            to: tuple[str, ...] = ("appsec@example.test",)) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"], msg["From"], msg["To"] = subject, "findings-airflow@example.test", ", ".join(to)
    if text is not None:
        msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html") if text is not None else msg.set_content(html, subtype="html")
    return msg


def page(catcher: MailCatcher) -> httpx.Response:
    assert catcher.web_url is not None
    return httpx.get(catcher.web_url, timeout=10)


def test_a_message_sent_over_smtp_is_listed_on_the_page_with_its_subject_escaped(catcher: MailCatcher) -> None:
    assert catcher.web_url is not None
    assert catcher.web_url.startswith("http://127.0.0.1:")  # loopback only
    empty = page(catcher)
    assert empty.status_code == 200
    assert "No message yet" in empty.text

    send(catcher, message(HOSTILE_SUBJECT, text="Scan 7 ended in SCAN_STATUS_ERROR.\n<img src=x onerror=alert(1)>",
                          to=("appsec@example.test", "lead@example.test")))
    shown = page(catcher)
    assert shown.status_code == 200
    assert shown.headers["content-type"].startswith("text/html")
    body = shown.text
    assert body.count('data-testid="mail"') == 1
    # the subject, escaped: no element of the message's own reaches the page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; 3 scans &lt;b&gt;failed&lt;/b&gt; &amp; more" in body
    assert "<script>" not in body
    assert "<b>failed" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert "<img" not in body
    assert "Scan 7 ended in SCAN_STATUS_ERROR." in body
    assert "findings-airflow@example.test" in body
    assert "appsec@example.test, lead@example.test" in body
    (mail,) = catcher.mails()
    assert f'datetime="{mail.received_at.isoformat()}"' in body


def test_an_html_alert_is_shown_as_its_text_newest_first(catcher: MailCatcher) -> None:
    """The pipeline's alerts are HTML mails (the SMTP hook's html_content): the page shows their text."""
    send(catcher, message("first", text="the first message"))
    send(catcher, message("Approval waiting: autotriage_triage", html=(
        "<html><head><style>p {color: red}</style></head><body><p>Bulk-triage <b>620</b> findings?</p>"
        "<p><a href='http://ui/required_actions'>Open the request</a></p></body></html>")))
    body = page(catcher).text
    assert body.index("Approval waiting: autotriage_triage") < body.index("the first message")
    assert "Bulk-triage 620 findings?\nOpen the request" in body
    assert "color: red" not in body
    assert "href=&#39;http://ui" not in body
    assert "&lt;b&gt;620" not in body


def test_the_page_is_read_only_and_alone(catcher: MailCatcher) -> None:
    assert catcher.web_url is not None
    assert httpx.post(catcher.web_url, content=b"x", timeout=10).status_code == 405
    assert httpx.delete(catcher.web_url, timeout=10).status_code == 405
    assert httpx.get(catcher.web_url + "messages", timeout=10).status_code == 404


def test_stopped_it_listens_no_more(catcher: MailCatcher) -> None:
    catcher.stop()
    with pytest.raises(httpx.ConnectError):
        page(catcher)
    with pytest.raises(OSError):
        smtplib.SMTP(catcher.host, catcher.port, timeout=5)


def test_html_to_text_keeps_the_words_and_one_line_per_block() -> None:
    assert html_to_text("<div>a <i>b</i></div><table><tr><td>x</td><td>y</td></tr></table><script>z</script>") \
        == "a b\nx y"


def test_the_mailbox_of_the_alert_tests_is_the_catcher_without_a_page() -> None:
    with Mailbox() as box:
        assert box.web_url is None
        send(box, message("hello", text="body"))
        (mail,) = box.wait_for(lambda m: m.subject == "hello")
        assert (mail.sender, mail.recipients, mail.text.strip()) == (
            "findings-airflow@example.test", ("appsec@example.test",), "body")


def test_the_demo_mails_its_alerts_to_the_catcher(tmp_path: Path) -> None:
    """The demo's configuration routes the alerts to ``smtp_default``, the connection the catcher gives."""
    demo = load_pipeline_config(write_demo_config(SOURCE_CONFIG, tmp_path / "pipeline.yaml"))
    [channel] = demo.alerts.channels
    assert isinstance(channel, SmtpChannel)
    assert (channel.conn_id, list(channel.to)) == (SMTP_CONN_ID, [DEMO_ALERTS_TO])
    connection = json.loads(MailCatcher().connection_json())
    assert (connection["conn_type"], connection["host"]) == ("smtp", "127.0.0.1")
