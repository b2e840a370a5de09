"""What the client checks and hides before it talks to anyone: the base URL, download links, TLS and the token.

URL and token checks raise ``ConfigurationError`` (``ValidationError`` for a download link the service handed out)
with a message that says what to fix and never holds the token; ``token_forms``, ``redact_text`` and
``redact_bytes`` replace the token in every form it may take in an error's text or body.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
from urllib.parse import quote, urlsplit

from findings_provider.client.errors import ConfigurationError, ValidationError

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True for loopback host names and addresses (127.0.0.0/8, ::1, localhost)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(base_url: str, allow_insecure_http: bool = False) -> str:
    """Validate the base URL: http(s), a host, and https unless loopback or explicitly allowed."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"base URL {base_url!r} is not an http(s) URL with a host; expected e.g. https://findings.example.com"
        )
    if parts.scheme == "http" and not allow_insecure_http and not is_loopback(parts.hostname):
        raise ConfigurationError(
            f"base URL {base_url!r} uses plain http to a non-loopback host; use https, or set "
            "allow_insecure_http=true on the connection if you really mean it"
        )
    return base_url.strip().rstrip("/")


def check_download_url(url: str, allow_insecure_http: bool = False) -> str:
    """Validate a link the service handed out (an SBOM ``downloadUrl``): http(s) with a host, and https unless the
    host is loopback or the connection allows insecure http. Any host is accepted: the token is never sent there."""
    parts = urlsplit(url.strip()) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(
            f"download URL {url!r} is not an http(s) URL with a host: expected the downloadUrl of a completed "
            "export (get_sbom_export)",
            field="download_url",
        )
    if parts.scheme == "http" and not allow_insecure_http and not is_loopback(parts.hostname):
        raise ValidationError(
            f"download URL {url!r} uses plain http to a non-loopback host: refused; the link should be https, or "
            "set allow_insecure_http=true on the connection if you really mean it",
            field="download_url",
        )
    return url.strip()


#: The shortest token accepted. Airflow's log masker skips secrets shorter than 5 characters (``[logging]
#: min_length_masked_secret``), so a shorter token would show in task logs; no real token is this short.
MIN_TOKEN_LENGTH = 8


def check_token(token: str) -> str:
    """Return ``token`` if it can be sent as is in an ``Authorization`` header; else ``ConfigurationError``.

    Refused: an empty token, one shorter than ``MIN_TOKEN_LENGTH`` (it could not be masked in logs), surrounding
    whitespace, and any character a header value cannot carry (below 0x20, 0x7f-0x9f, beyond latin-1). The
    message says where, never what: it holds no part of the token.
    """
    if not token:
        raise ConfigurationError("no API token given (the connection's password field)")
    if len(token.strip()) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"the API token (the connection's password field) has {len(token.strip())} characters: at least "
            f"{MIN_TOKEN_LENGTH} are needed (a shorter secret cannot be masked in Airflow's logs); paste the whole "
            "token"
        )
    if token != token.strip():
        raise ConfigurationError(
            "the API token (the connection's password field) has whitespace or a line break around it; "
            "store it without them"
        )
    for position, char in enumerate(token, start=1):
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F or code > 0xFF:
            kind = "a character beyond latin-1" if code > 0xFF else "a control character (line break, tab, ...)"
            raise ConfigurationError(
                f"the API token (the connection's password field) holds {kind} at position {position} of "
                f"{len(token)}, which an HTTP header cannot carry; paste the token again"
            )
    return token


def token_forms(token: str) -> list[str]:
    """The token as it may appear in a text: raw, repr-escaped (as ``str`` and as ``bytes``), percent-encoded and
    JSON-escaped; longest first, so that no shorter form leaves a piece of a longer one behind."""
    forms = {
        token,
        repr(token)[1:-1],
        repr(token.encode())[2:-1],
        repr(token.encode("latin-1"))[2:-1],
        quote(token, safe=""),
        json.dumps(token)[1:-1],
        json.dumps(token, ensure_ascii=False)[1:-1],
    }
    return sorted(forms, key=len, reverse=True)


def byte_forms(forms: list[str]) -> list[bytes]:
    """The token's text forms as bytes in a body: UTF-8, and latin-1 where it differs; longest first."""
    encoded = {form.encode() for form in forms}
    for form in forms:
        try:
            encoded.add(form.encode("latin-1"))
        except UnicodeEncodeError:
            pass
    return sorted(encoded, key=len, reverse=True)


def redact_text(text: str, forms: list[str]) -> str:
    """``text`` with every form replaced by ``***``."""
    for form in forms:
        if form in text:
            text = text.replace(form, "***")
    return text


def redact_bytes(body: bytes, forms: list[bytes]) -> bytes | None:
    """``body`` with every form replaced, or ``None`` when it holds none."""
    found = False
    for form in forms:
        if form in body:
            body = body.replace(form, b"***")
            found = True
    return body if found else None


def ssl_verify(verify: bool | str) -> bool | ssl.SSLContext:
    """httpx's ``verify``: a boolean as it is, or an SSL context of the CA bundle at that path."""
    if isinstance(verify, str):
        try:
            return ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"verify: cannot load the CA bundle {verify!r} ({exc})") from None
    return verify

