"""The token never leaks (repr, exceptions, chained causes, tracebacks, pickles, logs); https is required
unless the host is loopback or insecure http is allowed on purpose; TLS verification settings."""

from __future__ import annotations

import json
import logging
import pickle
import ssl
import traceback
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import certifi
import httpx
import pytest
from findings_provider.client import (
    AmbiguousWriteError,
    AsyncFindingsClient,
    AuthenticationError,
    ConfigurationError,
    DeploymentNotFoundError,
    FindingsApiError,
    FindingsClient,
    PolicyApiRetiredError,
    RateLimitedError,
    ResponseDecodeError,
    ServerError,
    TransportError,
    ValidationError,
    check_base_url,
    is_loopback,
)
from present import present

from .conftest import TOKEN, Recorder, call_async, client_kwargs, fast_policy, raw

ECHO = ('{"error": "denied", "request_headers": {"Authorization": "Bearer ' + TOKEN + '"}}').encode()
TOKEN_FRAGMENT = TOKEN[:5]  # "tok-S": not even the start of the token may survive


def assert_no_token(exc: BaseException) -> None:
    """The token is in no part of the exception, its chain, its traceback or its pickle."""
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    chained: BaseException | None = exc
    while chained is not None:
        texts.extend([str(chained), repr(chained), *(str(a) for a in chained.args)])
        if isinstance(chained, FindingsApiError):
            texts.extend([chained.message, chained.body_excerpt])
        chained = chained.__cause__ or chained.__context__
    for text in texts:
        assert TOKEN_FRAGMENT not in text, text
    assert TOKEN.encode() not in pickle.dumps(exc)
    assert TOKEN_FRAGMENT not in str(pickle.loads(pickle.dumps(exc)))  # noqa: S301 (our own bytes)


def tickets(client):
    return client.create_tickets(issue_type="sast", issue_ids=[1])


SCENARIOS: list[tuple[str, list, Callable, type]] = [
    ("401", [raw(ECHO, 401)], lambda c: c.list_findings(), AuthenticationError),
    ("403", [raw(ECHO, 403)], lambda c: c.get_scan(1), AuthenticationError),
    ("404", [raw(ECHO, 404)], lambda c: c.list_findings(), DeploymentNotFoundError),
    ("410", [raw(ECHO, 410)], lambda c: c.list_policies(), PolicyApiRetiredError),
    ("400", [raw(ECHO, 400)], lambda c: c.search_scans(), ValidationError),
    ("418", [raw(ECHO, 418)], lambda c: c.list_projects(), FindingsApiError),
    ("429", [raw(ECHO, 429)] * 4, lambda c: c.list_findings(), RateLimitedError),
    ("500", [raw(ECHO, 500)] * 4, lambda c: c.list_findings(), ServerError),
    ("tickets-503", [raw(ECHO, 503)], tickets, AmbiguousWriteError),
    ("tickets-malformed", [raw(ECHO[:-3])], tickets, AmbiguousWriteError),
    ("malformed", [raw(b"<html>" + ECHO)] * 4, lambda c: c.list_findings(), ResponseDecodeError),
    ("wrong-shape", [raw(b'{"scans": ' + ECHO + b"}")], lambda c: c.search_scans(), ResponseDecodeError),
    (
        "raw-wrong-shape",
        [raw(b'{"findings": ' + ECHO + b"}")],
        lambda c: list(c.raw_pages(c.list_findings)),
        ResponseDecodeError,
    ),
    (
        "excerpt-cut-inside-the-token",
        [raw(b"x" * 290 + b" Bearer " + TOKEN.encode() + b" trailing", 500)] * 4,
        lambda c: c.list_findings(),
        ServerError,
    ),
    (
        "transport-message",
        [httpx.ConnectError(f"proxy refused Authorization: Bearer {TOKEN}")] * 4,
        lambda c: c.list_findings(),
        TransportError,
    ),
]


@pytest.mark.parametrize(("name", "answers", "call", "error"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_token_echoed_by_the_server_is_redacted(name, answers, call, error, make_client) -> None:
    rec = Recorder(*answers)
    with pytest.raises(error) as info:
        call(make_client(rec))
    assert rec.count == len(answers)
    assert rec.last.headers["Authorization"] == f"Bearer {TOKEN}"  # the token was sent...
    assert_no_token(info.value)  # ...and appears nowhere in the error


def test_redaction_keeps_the_rest_of_the_excerpt(make_client) -> None:
    rec = Recorder(raw(ECHO, 401))
    with pytest.raises(AuthenticationError) as info:
        make_client(rec).list_findings()
    assert (
        info.value.body_excerpt == '{"error": "denied", "request_headers": {"Authorization": "Bearer ***"}}'
    )
    assert "Bearer ***" in str(info.value)
    assert "Web API access" in str(info.value)


def test_ambiguous_write_cause_is_redacted(make_client) -> None:
    rec = Recorder(raw(ECHO[:-3]))
    with pytest.raises(AmbiguousWriteError) as info:
        tickets(make_client(rec))
    cause = info.value.__cause__
    assert isinstance(cause, ResponseDecodeError)
    assert "Bearer ***" in cause.body_excerpt
    assert TOKEN not in cause.body_excerpt


def test_token_redacted_in_async_errors(make_async_client) -> None:
    rec = Recorder(raw(ECHO, 401))
    with pytest.raises(AuthenticationError) as info:
        call_async(make_async_client(rec), "list_findings")
    assert_no_token(info.value)
    rec = Recorder(raw(ECHO, 503))
    with pytest.raises(AmbiguousWriteError) as ambiguous:
        call_async(make_async_client(rec), "create_tickets", issue_type="sast", issue_ids=[1])
    assert_no_token(ambiguous.value)


def test_token_not_in_logs(make_client, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    rec = Recorder(
        raw(ECHO, 503),
        raw(ECHO, 429, {"Retry-After": "1"}),
        httpx.ReadTimeout(f"timeout talking Bearer {TOKEN}"),
        raw(b"{" + ECHO),
        {"findings": []},
        raw(ECHO, 401),
    )
    client = make_client(rec, retry_policy=fast_policy(max_retries=5))
    client.list_findings()
    with pytest.raises(AuthenticationError) as info:
        client.list_findings()
    logging.getLogger("test").exception("task failed", exc_info=info.value)
    assert rec.count == 6
    retry_lines = [r for r in caplog.records if r.name == "findings_provider.client"]
    assert len(retry_lines) == 4  # the retries were logged...
    for record in caplog.records:
        assert TOKEN_FRAGMENT not in record.getMessage()
    assert TOKEN_FRAGMENT not in caplog.text  # ...without the token, also in the logged traceback


@pytest.mark.parametrize("cls", [FindingsClient, AsyncFindingsClient])
def test_token_not_in_repr(cls) -> None:
    client = cls(**client_kwargs())
    for text in (repr(client), str(client), repr(client.retry_policy)):
        assert TOKEN_FRAGMENT not in text
    assert repr(client).startswith(f"{cls.__name__}(base_url='https://findings.example.com'")


def test_empty_token_refused() -> None:
    with pytest.raises(ConfigurationError, match="token"):
        FindingsClient(**client_kwargs(token=""))


# --- https required unless loopback or allowed --------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://findings.example.com",
        "http://10.0.0.5:8900",
        "http://localhost.example.com",
        "http://[2001:db8::1]",
    ],
)
def test_plain_http_to_a_remote_host_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="allow_insecure_http") as info:
        FindingsClient(**client_kwargs(base_url=url))
    assert url in str(info.value)
    client = FindingsClient(**client_kwargs(base_url=url, allow_insecure_http=True))
    assert client.base_url == url


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8900",
        "http://127.1.2.3",
        "http://[::1]:8900",
        "http://localhost:8900",
        "http://LOCALHOST",
    ],
)
def test_plain_http_to_loopback_allowed(url: str) -> None:
    assert FindingsClient(**client_kwargs(base_url=url)).base_url == url


@pytest.mark.parametrize("url", ["ftp://findings.example.com", "findings.example.com", "https://", ""])
def test_not_an_http_url_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="not an http"):
        check_base_url(url, allow_insecure_http=True)


def test_base_url_normalised() -> None:
    assert check_base_url(" https://findings.example.com/ ") == "https://findings.example.com"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("example.com", False),
        ("192.168.1.1", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_requests_go_to_the_configured_http_loopback(make_client) -> None:
    rec = Recorder({"findings": []})
    make_client(rec, base_url="http://127.0.0.1:8900").list_findings()
    assert str(rec.last.url).startswith("http://127.0.0.1:8900/api/v1/deployments/acme/findings?")


# --- TLS verification ---------------------------------------------------------------------------------------


def _ssl_context(client: FindingsClient) -> ssl.SSLContext:
    transport = client._http._transport
    assert isinstance(transport, httpx.HTTPTransport)
    return present(transport._pool._ssl_context)


def test_verify_defaults_to_true() -> None:
    with FindingsClient("https://findings.example.com", TOKEN) as client:
        assert _ssl_context(client).verify_mode == ssl.CERT_REQUIRED
        assert _ssl_context(client).check_hostname is True


def test_verify_false_disables_verification() -> None:
    with FindingsClient("https://findings.example.com", TOKEN, verify=False) as client:
        assert _ssl_context(client).verify_mode == ssl.CERT_NONE


def test_ca_bundle_path_accepted(tmp_path: Path) -> None:
    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    first = bundle[bundle.index("-----BEGIN CERTIFICATE-----") : bundle.index(end) + len(end)]
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text(first + "\n")
    with FindingsClient("https://findings.example.com", TOKEN, verify=str(ca_file)) as client:
        ctx = _ssl_context(client)
        assert ctx.verify_mode == ssl.CERT_REQUIRED
        assert len(ctx.get_ca_certs()) == 1  # exactly the given bundle, not the default store


def test_missing_ca_bundle_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigurationError, match="CA bundle") as info:
        FindingsClient("https://findings.example.com", TOKEN, verify=str(missing))
    assert str(missing) in str(info.value)


# --- the token in escaped and encoded forms; header values from the HTTP layer ------------------------------------

#: A token with characters that repr, JSON and percent-encoding write differently (quotes, backslash, latin-1).
SPECIAL = "Tk'Sé\"CR\\ET/+=9q"
SPECIAL_FORMS = {
    "raw": SPECIAL,
    "repr": repr(SPECIAL)[1:-1],
    "bytes repr (utf-8)": repr(SPECIAL.encode())[2:-1],
    "bytes repr (latin-1)": repr(SPECIAL.encode("latin-1"))[2:-1],
    "percent-encoded": quote(SPECIAL, safe=""),
    "JSON-escaped": json.dumps(SPECIAL)[1:-1],
    "JSON-escaped (utf-8)": json.dumps(SPECIAL, ensure_ascii=False)[1:-1],
}


HEADER_WITH_NEWLINE = b"Bearer " + SPECIAL.encode("latin-1") + b"\n"


def special_pieces(size: int = 6) -> set[str]:
    return {form[i : i + size] for form in SPECIAL_FORMS.values() for i in range(len(form) - size + 1)}


def assert_no_special_token(exc: BaseException) -> None:
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc)), str(pickle.loads(pickle.dumps(exc)))]  # noqa: S301
    chained: BaseException | None = exc
    while chained is not None:
        texts.extend([str(chained), repr(chained), *(str(a) for a in chained.args)])
        if isinstance(chained, FindingsApiError):
            texts.extend([chained.message, chained.body_excerpt])
        chained = chained.__cause__ or chained.__context__
    found = {piece for piece in special_pieces() for text in texts if piece in text}
    assert not found, (found, texts[0])


def echo(form: str, status: int) -> httpx.Response:
    return raw(b'{"error": "denied", "echo": "Bearer ' + SPECIAL_FORMS[form].encode() + b'"}', status)


ESCAPED_SCENARIOS: list[tuple[str, list, Callable, type]] = [
    *[
        (f"401-{form}", [echo(form, 401)], lambda c: c.list_findings(), AuthenticationError)
        for form in SPECIAL_FORMS
    ],
    *[(f"tickets-503-{form}", [echo(form, 503)], tickets, AmbiguousWriteError) for form in SPECIAL_FORMS],
    ("500-percent-encoded", [echo("percent-encoded", 500)] * 4, lambda c: c.list_findings(), ServerError),
    (
        "illegal-header-value",
        [httpx.LocalProtocolError(f"Illegal header value {HEADER_WITH_NEWLINE!r}")] * 4,
        lambda c: c.list_findings(),
        TransportError,
    ),
    (
        "tickets-illegal-header-value",
        [httpx.LocalProtocolError(f"Illegal header value {('Bearer ' + SPECIAL).encode('latin-1')!r}")],
        tickets,
        AmbiguousWriteError,
    ),
    (
        "transport-message-repr",
        [httpx.ReadError(f"proxy closed: token={SPECIAL!r}")] * 4,
        lambda c: c.list_findings(),
        TransportError,
    ),
    (
        "transport-message-percent-encoded",
        [httpx.ReadError(f"proxy closed: GET /x?token={quote(SPECIAL, safe='')}")],
        tickets,
        AmbiguousWriteError,
    ),
]


@pytest.mark.parametrize(
    ("name", "answers", "call", "error"), ESCAPED_SCENARIOS, ids=[s[0] for s in ESCAPED_SCENARIOS]
)
def test_the_token_is_redacted_in_every_form(name, answers, call, error, make_client) -> None:
    rec = Recorder(*answers)
    with pytest.raises(error) as info:
        call(make_client(rec, token=SPECIAL))
    assert rec.count == len(answers)
    assert rec.last.headers.raw[[k for k, _ in rec.last.headers.raw].index(b"Authorization")][1] == (
        b"Bearer " + SPECIAL.encode("latin-1")
    )
    assert_no_special_token(info.value)


def test_http_layer_messages_quoting_a_header_are_withheld(make_client) -> None:
    """h11 quotes the offending header ("Illegal header value ..."), whichever header it is."""
    rec = Recorder(*[httpx.LocalProtocolError("Illegal header value b'X-Trace: abc\\x00def'")] * 4)
    with pytest.raises(TransportError) as info:
        make_client(rec).list_findings()
    assert "X-Trace" not in str(info.value)
    assert "withheld" in str(info.value)
    rec = Recorder(httpx.RemoteProtocolError("illegal header line: bytearray(b'Set-Cookie: s=abc')"))
    with pytest.raises(AmbiguousWriteError) as ambiguous:
        tickets(make_client(rec))
    assert "Set-Cookie" not in str(ambiguous.value)


# --- the token is checked before use ------------------------------------------------------------------------------

BAD_TOKENS = {
    "line feed": "Zq9x-SECRET\n-77vw",
    "trailing newline": "Zq9x-SECRET-77vw\n",
    "surrounding spaces": " Zq9x-SECRET-77vw ",
    "carriage return": "Zq9x-SECRET\r-77vw",
    "tab": "Zq9x-SECRET\t-77vw",
    "nul": "Zq9x-SECRET\x00-77vw",
    "delete": "Zq9x-SECRET\x7f-77vw",
    "c1 control": "Zq9x-SECRET\x85-77vw",
    "beyond latin-1": "Zq9x-SECRET\u2028-77vw",
}


@pytest.mark.parametrize("cls", [FindingsClient, AsyncFindingsClient])
def test_a_token_too_short_to_mask_in_logs_is_refused_naming_no_part_of_it(cls) -> None:
    from findings_provider.client.security import MIN_TOKEN_LENGTH

    short = "k7Q" + "x" * (MIN_TOKEN_LENGTH - 4)
    with pytest.raises(ConfigurationError) as info:
        cls(**client_kwargs(token=short))
    assert f"{MIN_TOKEN_LENGTH - 1} characters" in str(info.value)
    assert "k7Q" not in str(info.value)
    cls(**client_kwargs(token=short + "9"))  # the shortest accepted


@pytest.mark.parametrize("cls", [FindingsClient, AsyncFindingsClient])
@pytest.mark.parametrize("token", list(BAD_TOKENS.values()), ids=list(BAD_TOKENS))
def test_the_client_refuses_a_token_a_header_cannot_carry_naming_no_part_of_it(cls, token: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        cls(**client_kwargs(token=token))
    visible = "".join(c for c in token if 0x20 < ord(c) < 0x7F)
    pieces = {t[i : i + 4] for t in (token, visible) for i in range(len(t) - 3)}
    for text in (str(info.value), repr(info.value), "".join(traceback.format_exception(info.value))):
        assert not [p for p in pieces if p in text], text


def test_a_latin1_token_is_sent_as_latin1(make_client) -> None:
    rec = Recorder({"findings": []})
    make_client(rec, token="tök-SECRET-123").list_findings()
    assert dict(rec.last.headers.raw)[b"Authorization"] == b"Bearer t\xf6k-SECRET-123"
