"""FindingsApiHook: connection (from ``AIRFLOW_CONN_*``) -> client; no I/O in ``__init__``; test_connection;
the token masked; the connection form."""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from typing import Any

import certifi
import httpx
import pytest
from findings_provider.client import AsyncFindingsClient, ConfigurationError, FindingsClient, RetryPolicy
from findings_provider.client import client as client_module
from findings_provider.hooks.findings_api import FindingsApiHook
from present import present

TOKEN = "tok-SECRET-123"
ENV = "AIRFLOW_CONN_FINDINGS_API_DEFAULT"
FAST = RetryPolicy(max_retries=0)


def set_connection(monkeypatch: pytest.MonkeyPatch, env: str = ENV, **overrides: Any) -> dict:
    conn: dict[str, Any] = {
        "conn_type": "findings_api",
        "host": "http://127.0.0.1:8900",
        "password": TOKEN,
        "extra": {"deployment_slug": "acme", "deployment_id": "1"},
    }
    extra = overrides.pop("extra", None)
    conn.update(overrides)
    if extra is not None:
        conn["extra"] = {**conn["extra"], **extra}
    monkeypatch.setenv(env, json.dumps(conn))
    return conn


class Server:
    """A mock API: records requests, answers the deployment list (or a given status)."""

    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.status = status
        self.body = (
            body if body is not None else {"deployments": [{"id": "1", "slug": "acme", "name": "Acme"}]}
        )
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith("/findings"):
            return httpx.Response(200, json={"findings": [{"id": 5}]})
        if request.url.path == "/api/v1/ping":
            return httpx.Response(200, json={})
        if request.url.path.endswith("/projects"):
            return httpx.Response(200, json={"projects": []})
        return httpx.Response(self.status, json=self.body)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    """Route the clients the hook builds to a mock transport (everything else about them is real)."""
    srv = Server()
    transport = httpx.MockTransport(srv)
    monkeypatch.setattr(
        client_module,
        "FindingsClient",
        functools.partial(FindingsClient, transport=transport, retry_policy=FAST),
    )
    monkeypatch.setattr(
        client_module,
        "AsyncFindingsClient",
        functools.partial(AsyncFindingsClient, transport=transport, retry_policy=FAST),
    )
    return srv


@pytest.fixture
def masked(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    calls: list[tuple] = []
    monkeypatch.setattr("airflow.sdk.log.mask_secret", lambda *args, **kwargs: calls.append(args))
    return calls


def test_hook_identity() -> None:
    assert FindingsApiHook.conn_type == "findings_api"
    assert FindingsApiHook.default_conn_name == "findings_api_default"
    assert FindingsApiHook.conn_name_attr == "findings_conn_id"
    assert FindingsApiHook.hook_name == "Security Findings API"
    assert FindingsApiHook().findings_conn_id == "findings_api_default"


def test_init_does_no_io(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("connection looked up in __init__")

    monkeypatch.setattr(FindingsApiHook, "get_connection", classmethod(boom))
    monkeypatch.setattr(FindingsApiHook, "aget_connection", classmethod(boom))
    monkeypatch.setattr(client_module, "FindingsClient", boom)
    hook = FindingsApiHook(findings_conn_id="does_not_exist")
    assert hook.findings_conn_id == "does_not_exist"
    assert "client" not in hook.__dict__
    with pytest.raises(AssertionError, match="looked up"):
        hook.client  # noqa: B018  (the lookup happens on first use)


def test_client_built_from_the_connection(monkeypatch: pytest.MonkeyPatch, masked: list) -> None:
    set_connection(
        monkeypatch,
        extra={
            "timeout": "12.5",
            "max_retries": 2,
            "verify": "false",
            "tracker_project_field": "brand_project_id",
        },
    )
    hook = FindingsApiHook()
    client = hook.client
    try:
        assert isinstance(client, FindingsClient)
        assert client is hook.get_conn() is hook.client  # built once
        assert client.base_url == "http://127.0.0.1:8900"
        assert (client.deployment_id, client.deployment_slug) == ("1", "acme")
        assert client._http.timeout.read == 12.5
        assert client.retry_policy.max_retries == 2
        assert client._http_options["verify"] is False
        assert client.tracker_project_field == "brand_project_id"
        assert client._http.headers["Authorization"] == f"Bearer {TOKEN}"
        assert TOKEN not in repr(client)
    finally:
        hook.close()
    assert "client" not in hook.__dict__
    assert (TOKEN,) in masked


def test_defaults_and_https_host_without_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, host="findings.example.com", extra={"deployment_id": None})
    client = FindingsApiHook().client
    assert client.base_url == "https://findings.example.com"
    assert client.deployment_id is None
    assert client.deployment_slug == "acme"
    assert client._http.timeout.read == 30.0
    assert client.retry_policy.max_retries == 4
    assert client._http_options["verify"] is True
    transport = client._http._transport
    assert isinstance(transport, httpx.HTTPTransport)
    assert present(transport._pool._ssl_context).verify_mode == ssl.CERT_REQUIRED


def test_other_connection_id(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, env="AIRFLOW_CONN_FINDINGS_STAGING", host="https://staging.example.com")
    assert (
        FindingsApiHook(findings_conn_id="findings_staging").client.base_url == "https://staging.example.com"
    )


def test_verify_ca_bundle_path(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, host="https://findings.example.com", extra={"verify": certifi.where()})
    client = FindingsApiHook().client
    assert isinstance(client._http_options["verify"], ssl.SSLContext)


def test_insecure_http_needs_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, host="http://findings.internal:8900")
    with pytest.raises(ConfigurationError, match="allow_insecure_http"):
        FindingsApiHook().client  # noqa: B018
    set_connection(monkeypatch, host="http://findings.internal:8900", extra={"allow_insecure_http": "true"})
    assert FindingsApiHook().client.base_url == "http://findings.internal:8900"


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        ({"allow_insecure_http": "maybe"}, ["'allow_insecure_http'", "'maybe'"]),
        (
            {"verify": "perhaps-a-file-that-is-missing.pem"},
            ["CA bundle", "perhaps-a-file-that-is-missing.pem"],
        ),
        ({"timeout": "soon"}, ["'timeout'", "'soon'"]),
        ({"max_retries": "lots"}, ["'max_retries'", "'lots'"]),
        ({"total_timeout": "never"}, ["'total_timeout'", "'never'"]),
        ({"max_response_bytes": "1.5GB"}, ["'max_response_bytes'", "'1.5GB'"]),
        ({"total_timeout": "0"}, ["total_timeout", "positive"]),
        ({"deployment_id": "acme"}, ["deployment_id", "'acme'"]),
        ({"tags_body": "json"}, ["'tags_body'", "'json'", "'array'", "'object'"]),
        ({"tags_body": ["tags"]}, ["'tags_body'", "['tags']", "'array'", "'object'"]),
    ],
)
def test_bad_extras_are_clear_errors(monkeypatch: pytest.MonkeyPatch, extra: dict, fragments: list) -> None:
    set_connection(monkeypatch, extra=extra)
    with pytest.raises(ValueError) as info:
        FindingsApiHook().client  # noqa: B018
    for fragment in fragments:
        assert fragment in str(info.value)
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert all(fragment in message for fragment in fragments)


def test_tags_body_defaults_to_the_reference_array(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch)
    assert FindingsApiHook().client.tags_body == "array"
    set_connection(monkeypatch, extra={"tags_body": ""})
    assert FindingsApiHook().client.tags_body == "array"


@pytest.mark.parametrize(
    ("value", "body"),
    [
        ("array", ["team-a", "prod"]),
        ("object", {"tags": ["team-a", "prod"]}),
        (" Object ", {"tags": ["team-a", "prod"]}),
    ],
)
def test_tags_body_option_shapes_the_add_tags_body(monkeypatch: pytest.MonkeyPatch, value: str, body: Any) -> None:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"project": {"id": 31, "name": "org/repo", "tags": ["team-a", "prod"]}})

    monkeypatch.setattr(
        client_module,
        "FindingsClient",
        functools.partial(FindingsClient, transport=httpx.MockTransport(answer), retry_policy=FAST),
    )
    set_connection(monkeypatch, extra={"tags_body": value})
    hook = FindingsApiHook()
    try:
        project = hook.client.add_project_tags("org/repo", ["team-a", "prod"])
    finally:
        hook.close()
    assert project.tags == ["team-a", "prod"]
    [request] = requests
    assert (request.method, request.url.path) == ("PUT", "/api/v1/deployments/acme/projects/org/repo/tags")
    assert json.loads(request.content) == body


def test_tags_body_and_tracker_field_are_in_the_connection_form() -> None:
    from findings_provider import CONN_FIELDS

    tags = CONN_FIELDS["tags_body"]
    assert tags["schema"]["default"] == "array"
    assert {"array", "object"} <= set(tags["schema"]["enum"])
    assert '{"tags": [...]}' in tags["description"]
    tracker = CONN_FIELDS["tracker_project_field"]["description"]
    assert "_project_id" in tracker
    assert "jira_project_id" in tracker


def test_missing_host(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, host="")
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert "no host" in message


def test_test_connection_success(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    set_connection(monkeypatch)
    hook = FindingsApiHook()
    ok, message = hook.test_connection()
    assert ok is True, message
    assert "deployment 'acme'" in message
    assert "http://127.0.0.1:8900" in message
    ping, projects = server.requests
    assert str(ping.url) == "http://127.0.0.1:8900/api/v1/ping"
    assert (projects.url.path, projects.url.params["page_size"]) == ("/api/v1/deployments/acme/projects", "1")
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in server.requests)
    assert "client" not in hook.__dict__  # closed afterwards
    assert TOKEN not in message


def routed(answers: dict[str, int | httpx.Response | Exception], server: Server) -> httpx.MockTransport:
    """A transport answering by path: a status (JSON ``{}``), a response, or an exception raised; else the server."""

    def answer(request: httpx.Request) -> httpx.Response:
        given = answers.get(request.url.path)
        if given is None:
            return server(request)
        server.requests.append(request)
        if isinstance(given, Exception):
            raise given
        if isinstance(given, httpx.Response):
            return given
        return httpx.Response(given, json={"error": "refused", "echo": f"Bearer {TOKEN}"})

    return httpx.MockTransport(answer)


def use(monkeypatch: pytest.MonkeyPatch, transport: httpx.MockTransport) -> None:
    monkeypatch.setattr(client_module, "FindingsClient",
                        functools.partial(FindingsClient, transport=transport, retry_policy=FAST))


def test_test_connection_unreachable(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    set_connection(monkeypatch)
    use(monkeypatch, routed({"/api/v1/ping": httpx.ConnectError("connection refused")}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert "cannot reach http://127.0.0.1:8900" in message
    assert "ConnectError" in message
    assert [r.url.path for r in server.requests] == ["/api/v1/ping"]  # nothing after an unreachable service


@pytest.mark.parametrize("where", ["/api/v1/ping", "/api/v1/deployments/acme/projects"])
@pytest.mark.parametrize("status", [401, 403])
def test_test_connection_invalid_token(
    monkeypatch: pytest.MonkeyPatch, server: Server, where: str, status: int
) -> None:
    set_connection(monkeypatch)
    use(monkeypatch, routed({where: status}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert f"the API token was refused (HTTP {status})" in message
    assert "password field" in message
    assert TOKEN not in message  # the echoed header is redacted
    assert server.requests[-1].url.path == where  # not retried, nothing after it


def test_test_connection_deployment_not_found_or_no_web_api_access(
    monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    set_connection(monkeypatch, extra={"deployment_slug": "other"})
    use(monkeypatch, routed({"/api/v1/deployments/other/projects": 404}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert "deployment 'other' not found, or the API token lacks Web API access" in message
    assert "HTTP 404" in message
    assert [r.url.path for r in server.requests] == ["/api/v1/ping", "/api/v1/deployments/other/projects"]


def test_test_connection_no_findings_api_at_the_base_url(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    set_connection(monkeypatch)
    use(monkeypatch, routed({"/api/v1/ping": 404}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert "no findings API at http://127.0.0.1:8900" in message
    assert "base URL" in message


def test_test_connection_with_only_a_deployment_id_reads_by_the_id(
    monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    set_connection(monkeypatch, extra={"deployment_slug": ""})
    use(monkeypatch, routed({"/api/v1/deployments/1/scans/search": httpx.Response(200, json={"scans": []})}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is True, message
    assert [r.url.path for r in server.requests] == ["/api/v1/ping", "/api/v1/deployments/1/scans/search"]
    assert json.loads(server.requests[1].content)["limit"] == 1
    assert "deployment id 1" in message


def test_test_connection_with_only_a_deployment_id_not_found(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    set_connection(monkeypatch, extra={"deployment_slug": "", "deployment_id": "7"})
    use(monkeypatch, routed({"/api/v1/deployments/7/scans/search": 404}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert "deployment id 7 not found, or the API token lacks Web API access" in message


def test_test_connection_resolves_a_missing_slug_from_the_deployment_list(
    monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    set_connection(monkeypatch, extra={"deployment_slug": "", "deployment_id": ""})
    ok, message = FindingsApiHook().test_connection()
    assert ok is True, message
    assert [r.url.path for r in server.requests] == [
        "/api/v1/ping",
        "/api/v1/deployments",
        "/api/v1/deployments/acme/projects",
    ]
    assert "deployment 'acme'" in message


def test_test_connection_a_deployment_the_token_does_not_see(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    set_connection(monkeypatch, extra={"deployment_id": "2", "deployment_slug": ""})
    server.body = {"deployments": [{"id": "1", "slug": "acme"}]}
    use(monkeypatch, routed({"/api/v1/deployments/2/scans/search": 404}, server))
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    assert "deployment id 2 not found" in message


def test_token_is_masked(monkeypatch: pytest.MonkeyPatch, server: Server, masked: list) -> None:
    set_connection(monkeypatch)
    FindingsApiHook().client  # noqa: B018
    assert (TOKEN,) in masked


def test_get_async_client(monkeypatch: pytest.MonkeyPatch, server: Server, masked: list) -> None:
    set_connection(monkeypatch, extra={"max_retries": "3"})

    async def go() -> Any:
        client = await FindingsApiHook().get_async_client()
        async with client:
            page = await client.list_findings()
        return client, page

    client, page = asyncio.run(go())
    assert isinstance(client, AsyncFindingsClient)
    assert (client.base_url, client.deployment_slug) == ("http://127.0.0.1:8900", "acme")
    assert [f.id for f in page.items] == [5]
    assert server.requests[-1].headers["Authorization"] == f"Bearer {TOKEN}"
    assert str(server.requests[-1].url).startswith("http://127.0.0.1:8900/api/v1/deployments/acme/findings?")
    assert (TOKEN,) in masked


def test_get_async_client_real_options(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, extra={"max_retries": "3", "timeout": 7})
    client = asyncio.run(FindingsApiHook().get_async_client())
    assert isinstance(client, AsyncFindingsClient)
    assert client.retry_policy.max_retries == 3
    assert client._http.timeout.read == 7.0
    asyncio.run(client.aclose())


def test_the_provider_info_names_this_hook_for_its_connection_type() -> None:
    """The connection form is the provider info's (Airflow 3.2+ reads it from there, not from the hook)."""
    from findings_provider import get_provider_info

    [conn_type] = get_provider_info()["connection-types"]
    assert conn_type["hook-class-name"] == f"{FindingsApiHook.__module__}.{FindingsApiHook.__qualname__}"
    assert conn_type["connection-type"] == FindingsApiHook.conn_type
    assert conn_type["hook-name"] == FindingsApiHook.hook_name
    # one definition of the form, the provider info: the hook defines neither form method itself
    assert "get_ui_field_behaviour" not in FindingsApiHook.__dict__
    assert "get_connection_form_widgets" not in FindingsApiHook.__dict__


def test_response_limits_from_the_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, extra={"timeout": "10", "total_timeout": "90", "max_response_bytes": "1000000"})
    client = FindingsApiHook().client
    assert (client.total_timeout, client.max_response_bytes) == (90.0, 1_000_000)
    set_connection(monkeypatch, extra={"timeout": "10"})
    client = FindingsApiHook().client
    assert (client.total_timeout, client.max_response_bytes) == (60.0, 128 * 1024 * 1024)


# --- the token: stripped once, checked, masked exactly as sent ----------------------------------------------------


def strings(masked: list[tuple]) -> list[tuple]:
    """The masked strings (Airflow masks the connection's extra dict too)."""
    return [args for args in masked if isinstance(args[0], str)]


def test_the_token_is_stripped_once_and_exactly_the_sent_token_is_masked(
    monkeypatch: pytest.MonkeyPatch, server: Server, masked: list
) -> None:
    set_connection(monkeypatch, password=f" \t{TOKEN} \r\n")
    hook = FindingsApiHook()
    hook.client.list_findings()
    assert server.requests[-1].headers["Authorization"] == f"Bearer {TOKEN}"
    assert strings(masked) == [(TOKEN,)]

    async def go() -> None:
        async with await FindingsApiHook().get_async_client() as client:
            await client.list_findings()

    asyncio.run(go())
    assert server.requests[-1].headers["Authorization"] == f"Bearer {TOKEN}"
    assert strings(masked) == [(TOKEN,), (TOKEN,)]


BAD_TOKENS = {
    "line feed": "Zq9x-SECRET\n-77vw",
    "carriage return": "Zq9x-SECRET\r-77vw",
    "tab": "Zq9x-SECRET\t-77vw",
    "nul": "Zq9x-SECRET\x00-77vw",
    "delete": "Zq9x-SECRET\x7f-77vw",
    "c1 control": "Zq9x-SECRET\x85-77vw",
    "beyond latin-1": "Zq9x-SECRET\u2028-77vw",
}


def pieces(token: str, size: int = 4) -> set[str]:
    """Every piece of ``size`` characters of the token, and of the token without its odd character."""
    visible = "".join(c for c in token if 0x20 < ord(c) < 0x7F)
    return {t[i : i + size] for t in (token, visible) for i in range(len(t) - size + 1)}


@pytest.mark.parametrize("token", list(BAD_TOKENS.values()), ids=list(BAD_TOKENS))
def test_a_token_with_a_control_character_is_refused_naming_no_part_of_it(
    monkeypatch: pytest.MonkeyPatch, masked: list, token: str
) -> None:
    set_connection(monkeypatch, password=f"  {token}\n")
    with pytest.raises(ConfigurationError) as info:
        FindingsApiHook().client  # noqa: B018
    with pytest.raises(ConfigurationError) as async_info:
        asyncio.run(FindingsApiHook().get_async_client())
    ok, message = FindingsApiHook().test_connection()
    assert ok is False
    for text in (str(info.value), repr(info.value), str(async_info.value), message):
        assert "password" in text
        assert not [p for p in pieces(token) if p in text], text
    assert strings(masked) == []  # nothing was sent
