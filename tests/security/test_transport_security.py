"""Transport security, end to end over real sockets:

- plain ``http://`` to a host that is not loopback is refused (client and hook) unless allowed explicitly, and
  nothing, token included, is sent before refusing; redirects are never followed with the token;
- TLS verification is on by default: a server whose certificate is signed by an unknown CA (or names another
  host) is refused, and accepted with that CA as the configured bundle (``verify`` = path);
- the emulator's admin routes refuse clients that are not on loopback while its API still answers them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from chaos.harness import TOKEN, tally
from findings_emulator.gateway import is_loopback as emulator_is_loopback
from findings_emulator.testing import PACKAGE_ROOT, free_port
from findings_provider.client import (
    ConfigurationError,
    FindingsApiError,
    FindingsClient,
    RetryPolicy,
    TransportError,
    check_base_url,
)
from findings_provider.hooks.findings_api import FindingsApiHook

from .tls_server import Pki, https_server, make_pki

NO_RETRY = RetryPolicy(max_retries=0)


# --- plain http ---------------------------------------------------------------------------------------------------

REMOTE_HTTP = [
    "http://findings.example.com",
    "http://10.0.0.5:8900",
    "http://192.0.2.2",
    "http://[2001:db8::1]:8900",
    "http://[fd00::2]",
    "http://0.0.0.0:8900",
    "http://127.0.0.1.nip.io",  # a name that may resolve to loopback is still a name: refused
    "http://localhost.example.com",
    "HTTP://FINDINGS.EXAMPLE.COM",
]
LOOPBACK_HTTP = ["http://127.0.0.1:8900", "http://localhost:8900", "http://[::1]:8900", "http://127.8.9.10"]


@pytest.mark.parametrize("url", REMOTE_HTTP)
def test_plain_http_to_a_remote_host_is_refused_before_anything_is_sent(url: str) -> None:
    tally("transport.http_refusals")
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    with pytest.raises(ConfigurationError) as caught:
        FindingsClient(url, TOKEN, deployment_id="1", deployment_slug="acme", transport=httpx.MockTransport(answer))
    assert "allow_insecure_http" in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert not sent


@pytest.mark.parametrize("url", REMOTE_HTTP[:4])
def test_plain_http_to_a_remote_host_is_allowed_only_explicitly(url: str) -> None:
    assert check_base_url(url, allow_insecure_http=True) == url.rstrip("/")


@pytest.mark.parametrize("url", LOOPBACK_HTTP)
def test_plain_http_to_loopback_is_allowed(url: str) -> None:
    assert check_base_url(url) == url


def _set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, host: str, **extra: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({
        "conn_type": "findings_api", "host": host, "password": TOKEN,
        "extra": {"deployment_slug": "acme", "deployment_id": "1", **extra}}))


@pytest.mark.parametrize(("extra", "refused"), [({}, True), ({"allow_insecure_http": "false"}, True),
                                                ({"allow_insecure_http": False}, True),
                                                ({"allow_insecure_http": "true"}, False),
                                                ({"allow_insecure_http": True}, False)])
def test_the_hook_refuses_remote_plain_http_unless_the_connection_allows_it(monkeypatch, extra, refused) -> None:
    _set_conn(monkeypatch, "insecure_test", "http://findings.example.com", **extra)
    hook = FindingsApiHook(findings_conn_id="insecure_test")
    if refused:
        with pytest.raises(ConfigurationError, match="allow_insecure_http"):
            _ = hook.client
    else:
        assert hook.client.base_url == "http://findings.example.com"
        hook.close()


def test_a_host_without_scheme_means_https(monkeypatch) -> None:
    _set_conn(monkeypatch, "noscheme_test", "findings.example.com")
    hook = FindingsApiHook(findings_conn_id="noscheme_test")
    assert hook.client.base_url == "https://findings.example.com"
    hook.close()


def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else() -> None:
    """A server (or a proxy) answering 30x to another host never receives a second request with the token."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(302, headers={"Location": "http://attacker.example.net/steal"})

    client = FindingsClient("https://findings.example.com", TOKEN, deployment_id="1", deployment_slug="acme",
                            transport=httpx.MockTransport(handler), retry_policy=NO_RETRY)
    with client, pytest.raises(FindingsApiError) as caught:
        client.list_findings()
    assert caught.value.status_code == 302
    assert [r.url.host for r in seen] == ["findings.example.com"]


# --- TLS ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), label="trusted")


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki-other"), label="other")


@pytest.fixture(scope="module")
def wrong_name_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki-name"), hosts=("findings.example.com",), label="wrongname")


def _client(base_url: str, **kwargs: object) -> FindingsClient:
    return FindingsClient(base_url, TOKEN, deployment_id="1", deployment_slug="acme", retry_policy=NO_RETRY,
                          timeout=5, **kwargs)


def test_tls_is_verified_by_default_and_an_unknown_ca_is_refused(pki: Pki) -> None:
    tally("transport.tls_cases")
    with https_server(pki) as (url, seen), _client(url) as client:
        with pytest.raises(TransportError) as caught:
            client.list_deployments()
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value) or "certificate verify failed" in str(caught.value)
    assert seen.requests == []  # the handshake failed: no request, no token, ever reached the server


def test_tls_with_the_configured_ca_bundle_is_accepted(pki: Pki) -> None:
    tally("transport.tls_cases")
    with https_server(pki) as (url, seen), _client(url, verify=str(pki.ca_pem)) as client:
        assert [d.slug for d in client.list_deployments()] == ["acme"]
    assert seen.requests == [("GET", "/api/v1/deployments", True)]


def test_tls_with_another_ca_bundle_is_refused(pki: Pki, other_pki: Pki) -> None:
    tally("transport.tls_cases")
    with https_server(pki) as (url, seen), _client(url, verify=str(other_pki.ca_pem)) as client:
        with pytest.raises(TransportError, match=r"(?i)certificate verify failed"):
            client.list_deployments()
    assert seen.requests == []


def test_tls_hostname_is_checked_even_with_the_right_ca(wrong_name_pki: Pki) -> None:
    tally("transport.tls_cases")
    with https_server(wrong_name_pki) as (url, seen), _client(url, verify=str(wrong_name_pki.ca_pem)) as client:
        with pytest.raises(TransportError, match=r"(?i)(hostname|ip address) mismatch|certificate verify failed"):
            client.list_deployments()
    assert seen.requests == []


def test_verification_can_only_be_disabled_explicitly(pki: Pki) -> None:
    tally("transport.tls_cases")
    with https_server(pki) as (url, _seen), _client(url, verify=False) as client:
        assert client.list_deployments()[0].slug == "acme"


@pytest.mark.parametrize(("verify", "ok"), [(None, False), ("true", False), ("ca", True), ("false", True)])
def test_the_hook_passes_the_connection_verify_setting(monkeypatch, pki: Pki, verify, ok) -> None:
    """Connection extra ``verify``: absent or true -> verified against the system store (refused here); a path
    -> that CA bundle; false -> off."""
    tally("transport.tls_cases")
    with https_server(pki) as (url, seen):
        extra: dict[str, object] = {"max_retries": 0, "timeout": 5}
        if verify is not None:
            extra["verify"] = str(pki.ca_pem) if verify == "ca" else verify
        _set_conn(monkeypatch, "tls_test", url, **extra)
        hook = FindingsApiHook(findings_conn_id="tls_test")
        try:
            if ok:
                assert hook.client.list_deployments()[0].slug == "acme"
                assert seen.requests
            else:
                with pytest.raises(TransportError, match=r"(?i)certificate verify failed"):
                    hook.client.list_deployments()
                assert seen.requests == []
        finally:
            hook.close()


def test_a_missing_ca_bundle_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="CA bundle"):
        _client("https://findings.example.com", verify=str(tmp_path / "missing.pem"))


# --- the emulator's admin routes answer loopback clients only ---------------------------------------------------------


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.255.0.9", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("192.0.2.2", False), ("10.0.0.1", False), ("::ffff:10.0.0.1", False), ("fd00::2", False),
    ("0.0.0.0", False), ("localhost", False), ("", False), (None, False), ("not an address", False)])
def test_the_admin_guard_function(host, loopback) -> None:
    """The guard decides on the peer address of the socket (a name or a forwarded header is never trusted)."""
    assert emulator_is_loopback(host) is loopback


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of this machine that is not loopback (nor link-local), if there is one."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith(("127.", "169.254.")):
                return address.address
    return None


@pytest.fixture(scope="module")
def remote_emulator() -> Iterator[tuple[str, str]]:
    """An emulator bound only to a non-loopback address of this machine; yields (its base URL, the address)."""
    address = non_loopback_ipv4()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address; test_the_admin_guard_function covers the guard")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen(
        [sys.executable, "-m", "findings_emulator", "--host", address, "--port", str(port), "--token", TOKEN,
         "--findings", "100", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
        start_new_session=True)
    base = f"http://{address}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # health is an admin route, refused from here: poll the API instead
            try:
                if httpx.get(f"{base}/api/v1/deployments", headers={"Authorization": f"Bearer {TOKEN}"},
                             timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"emulator on {address} did not start (exit code {process.poll()})")
            time.sleep(0.1)
        yield base, address
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


ADMIN_CALLS = [("GET", "/_emulator/health", None), ("GET", "/_emulator/requests", None),
               ("DELETE", "/_emulator/requests", None), ("POST", "/_emulator/reset", {}),
               ("POST", "/_emulator/faults", {"operation": "*", "schedule": ["500"]}),
               ("GET", "/_emulator/faults", None), ("GET", "/_emulator/tickets", None),
               ("POST", "/_emulator/scans", {}), ("GET", "/_emulator/stats", None),
               ("GET", "/_emulator/nonexistent", None)]


@pytest.mark.integration
@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
def test_admin_routes_refuse_a_non_loopback_client(remote_emulator, method: str, path: str, body) -> None:
    tally("transport.admin_refusals")
    base, address = remote_emulator
    # the connection comes from the machine's own non-loopback address: the emulator sees that as the peer
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=base, transport=transport, timeout=10) as http:
        response = http.request(method, path, json=body,
                                headers={"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1",
                                         "Forwarded": "for=127.0.0.1", "Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 403, (path, response.text)
        assert "loopback" in response.json()["error"]
        # ... while the API itself answers that client
        api = http.get("/api/v1/deployments", headers={"Authorization": f"Bearer {TOKEN}"})
        assert api.status_code == 200
        # and the refused call changed nothing: no fault was installed, the data was not reset
        findings = http.get("/api/v1/deployments/acme/findings", headers={"Authorization": f"Bearer {TOKEN}"})
        assert findings.status_code == 200
