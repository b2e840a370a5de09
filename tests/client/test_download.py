"""The SBOM download (``download_sbom``): a plain GET of the ``downloadUrl`` a completed export hands out, never
with the API token, https only unless allowed (every redirect hop too), within a size cap, 4xx as an expired link,
5xx retried like any read."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from findings_provider.client import (
    DownloadLinkError,
    ResponseDecodeError,
    ResponseTooLargeError,
    ValidationError,
)

from .conftest import TOKEN, Recorder, call_async, ok, raw
from .fixtures import operations as fx

OTHER_HOST = "https://downloads.example.net/sbom/7f3a.json"


def test_the_download_carries_no_token_while_the_api_calls_do(make_client) -> None:
    rec = Recorder(fx.sbom_status_real(), fx.cyclonedx())
    client = make_client(rec)
    state = client.get_sbom_export("tt-1")
    document = client.download_sbom(state.downloadUrl)
    api, download = rec.requests
    assert api.headers["Authorization"] == f"Bearer {TOKEN}"
    assert (download.method, download.url.host) == ("GET", "downloads.example.net")
    assert str(download.url) == fx.DOWNLOAD_URL  # the signed link exactly as given, query included
    assert "Authorization" not in download.headers
    assert "Cookie" not in download.headers
    assert TOKEN not in json.dumps(dict(download.headers))
    assert document.specVersion == "1.6"


def test_the_async_download_carries_no_token(make_async_client) -> None:
    rec = Recorder(fx.cyclonedx(components=3))
    document = call_async(make_async_client(rec), "download_sbom", OTHER_HOST)
    assert "Authorization" not in rec.last.headers
    assert rec.last.url.host == "downloads.example.net"
    assert len(document.components) == 3


@pytest.mark.parametrize("url", ["http://downloads.example.net/sbom.json", "http://10.0.0.8/sbom.json"])
def test_plain_http_is_refused_unless_the_connection_allows_it(make_client, make_async_client, url) -> None:
    rec = Recorder(fx.cyclonedx(), fx.cyclonedx())
    refusal = r"plain http to a non-loopback host: refused.*allow_insecure_http"
    with pytest.raises(ValidationError, match=refusal) as info:
        make_client(rec).download_sbom(url)
    assert info.value.field == "download_url"
    with pytest.raises(ValidationError, match="plain http"):
        call_async(make_async_client(rec), "download_sbom", url)
    assert rec.count == 0
    make_client(rec, allow_insecure_http=True).download_sbom(url)
    assert rec.last.url.scheme == "http"
    assert "Authorization" not in rec.last.headers


def test_plain_http_to_loopback_is_allowed_as_for_the_base_url(make_client) -> None:
    rec = Recorder(fx.cyclonedx())
    make_client(rec).download_sbom("http://127.0.0.1:8900/sbom/1.json")
    assert str(rec.last.url) == "http://127.0.0.1:8900/sbom/1.json"


@pytest.mark.parametrize("url", ["", "downloads.example.net/sbom.json", "ftp://downloads.example.net/x", "https://"])
def test_a_download_url_that_is_no_http_url_is_refused(make_client, url) -> None:
    rec = Recorder()
    with pytest.raises(ValidationError, match="not an http\\(s\\) URL with a host"):
        make_client(rec).download_sbom(url)
    assert rec.count == 0


def test_a_redirect_to_plain_http_is_refused(make_client) -> None:
    rec = Recorder(raw(b"", 302, {"Location": "http://mirror.example.org/sbom.json"}), fx.cyclonedx())
    with pytest.raises(ValidationError, match=re.escape("http://mirror.example.org/sbom.json")):
        make_client(rec).download_sbom(OTHER_HOST)
    assert rec.count == 1  # the insecure hop was never sent


def test_a_redirect_to_another_https_host_is_followed_without_the_token(make_client) -> None:
    rec = Recorder(raw(b"", 307, {"Location": "https://blobs.example.org/x/sbom.json"}), fx.cyclonedx())
    assert make_client(rec).download_sbom(OTHER_HOST).bomFormat == "CycloneDX"
    assert [r.url.host for r in rec.requests] == ["downloads.example.net", "blobs.example.org"]
    assert all("Authorization" not in r.headers for r in rec.requests)


def test_a_document_beyond_max_bytes_is_refused_with_what_to_do(make_client) -> None:
    body = json.dumps(fx.cyclonedx(components=50)).encode()
    streamed = httpx.Response(200, stream=httpx.ByteStream(body))  # no Content-Length: cut while reading
    rec = Recorder(streamed, raw(body))
    client = make_client(rec)
    with pytest.raises(ResponseTooLargeError, match=r"size cap of 1000 bytes.*larger max_bytes to download_sbom"):
        client.download_sbom(OTHER_HOST, max_bytes=1000)
    with pytest.raises(ResponseTooLargeError, match="size cap of 1000 bytes"):  # declared too large: not read
        client.download_sbom(OTHER_HOST, max_bytes=1000)
    assert rec.count == 2  # not retried
    rec.add(raw(body))
    assert len(client.download_sbom(OTHER_HOST, max_bytes=len(body)).components) == 50


def test_the_default_cap_is_the_connections_max_response_bytes(make_client) -> None:
    rec = Recorder(fx.cyclonedx(components=50))
    with pytest.raises(ResponseTooLargeError, match="size cap of 500 bytes"):
        make_client(rec, max_response_bytes=500).download_sbom(OTHER_HOST)


@pytest.mark.parametrize("max_bytes", [0, -1, True, 1.5])
def test_max_bytes_must_be_a_positive_integer(make_client, max_bytes) -> None:
    rec = Recorder()
    with pytest.raises(ValidationError, match=f"'max_bytes' = {max_bytes!r}"):
        make_client(rec).download_sbom(OTHER_HOST, max_bytes=max_bytes)
    assert rec.count == 0


@pytest.mark.parametrize("status", [401, 403, 404, 410])
def test_a_refused_or_expired_link_is_a_download_link_error_not_an_auth_error(make_client, status) -> None:
    rec = Recorder(raw(b"<Error><Code>AccessDenied</Code></Error>", status))
    with pytest.raises(DownloadLinkError, match="fresh downloadUrl") as info:
        make_client(rec).download_sbom(OTHER_HOST)
    assert info.value.status_code == status
    assert "not about the token" in str(info.value)
    assert rec.count == 1


def test_a_server_error_of_the_download_host_is_retried(make_client, clock) -> None:
    rec = Recorder(raw(b"", 503), httpx.ConnectError("reset"), ok(fx.cyclonedx()))
    assert make_client(rec).download_sbom(OTHER_HOST).serialNumber.startswith("urn:uuid:")
    assert rec.count == 3
    assert len(clock.sleeps) == 2


@pytest.mark.parametrize(
    "answer",
    [raw(b"<html>sign in</html>", 200, {"Content-Type": "text/html"}), ok({"error": "expired"}), ok([1, 2])],
)
def test_a_body_that_is_no_cyclonedx_document_is_a_decode_error(make_client, answer) -> None:
    with pytest.raises(ResponseDecodeError):
        make_client(Recorder(answer, repeat_last=True)).download_sbom(OTHER_HOST)
