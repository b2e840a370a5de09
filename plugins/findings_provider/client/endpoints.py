"""One definition per API operation, executed by both the sync and the async client.

An ``Endpoint`` says method, path template, which deployment key the path takes (numeric id or slug), the
response model and whether a retry after an ambiguous failure is safe. A ``Call`` is one prepared request.
Parsing and error mapping live here too, so the two clients share them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload
from urllib.parse import quote

import msgspec
import pydantic

from findings_provider.client import models as m
from findings_provider.client.errors import (
    AuthenticationError,
    DeploymentNotFoundError,
    DownloadLinkError,
    FindingsApiError,
    NotFoundError,
    PolicyApiRetiredError,
    RateLimitedError,
    ResponseDecodeError,
    ServerError,
    ValidationError,
    excerpt,
)

API = "/api/v1"
DEP_ID = API + "/deployments/{deployment_id}"
DEP_SLUG = API + "/deployments/{deployment_slug}"

#: An endpoint's response model.
R = TypeVar("R", bound=pydantic.BaseModel)
#: What a call's parser returns.
T = TypeVar("T")


@dataclass(frozen=True)
class Endpoint(Generic[R]):
    """Static description of one API operation (generic in its response model)."""

    name: str
    method: str
    path: str
    scope: Literal["id", "slug", "none"]
    response: type[R]
    #: Safe to send again when the outcome of an attempt is unknown (False only for ticket creation).
    idempotent: bool = True
    #: The deprecated policy API: 410 Gone means it was retired for this deployment.
    policy_api: bool = False
    #: A 2xx body must be a JSON object with at least one of these keys (the documented response: a body of another
    #: shape, such as ``{"data": {...}}``, would validate as an empty result since every field has a default).
    result_keys: tuple[str, ...] = ()
    #: For a write (``idempotent=False``): what to check before trying again when its outcome is unknown.
    after_ambiguity: str = "re-read the findings' external_ticket before trying again"
    #: False for a link the service hands out (the SBOM download): ``path`` is then ``{url}``, an absolute URL on
    #: any host, fetched by a plain HTTP client that never sends the API token.
    authenticated: bool = True
    #: What to do when the response exceeds the size cap.
    too_large_advice: str = "Raise the connection extra max_response_bytes, or ask for smaller pages"


DEPLOYMENTS = Endpoint("deployments", "GET", API + "/deployments", "none", m.DeploymentsResponse)
DEPENDENCIES = Endpoint("dependencies", "POST", DEP_ID + "/dependencies", "id", m.DependenciesPage)
DEPENDENCY_REPOSITORIES = Endpoint(
    "dependency_repositories", "POST", DEP_ID + "/dependencies/repositories", "id", m.RepositoriesPage
)
SCANS_SEARCH = Endpoint("scans_search", "POST", DEP_ID + "/scans/search", "id", m.ScansPage)
SCAN_GET = Endpoint("scan_get", "GET", DEP_ID + "/scan/{scan_id}", "id", m.ScanDetails)
POLICIES_LIST = Endpoint("policies_list", "GET", DEP_ID + "/policies", "id", m.PoliciesResponse, policy_api=True)
POLICY_RULES = Endpoint(
    "policy_rules", "GET", DEP_ID + "/policies/{policy_id}", "id", m.PolicyRulesPage, policy_api=True
)
POLICY_UPDATE = Endpoint(
    "policy_update",
    "PUT",
    DEP_ID + "/policies/{policy_id}",
    "id",
    m.UpdatePolicyResponse,
    policy_api=True,
)
TICKETS = Endpoint(
    "tickets",
    "POST",
    DEP_SLUG + "/tickets",
    "slug",
    m.TicketResult,
    idempotent=False,
    result_keys=("failed", "skipped", "succeeded"),
)
FINDINGS = Endpoint("findings", "GET", DEP_SLUG + "/findings", "slug", m.FindingsPage)
PROJECTS = Endpoint("projects", "GET", DEP_SLUG + "/projects", "slug", m.ProjectsPage)
MANAGED_SCAN = Endpoint(
    "managed_scan",
    "PATCH",
    DEP_SLUG + "/projects/{project_name}/managed-scan",
    "slug",
    m.ProjectResponse,
)
TRIAGE = Endpoint("triage", "POST", DEP_SLUG + "/triage", "slug", m.TriageResult)
TAGS_ADD = Endpoint("tags_add", "PUT", DEP_SLUG + "/projects/{project_name}/tags", "slug", m.ProjectResponse)
TAGS_REMOVE = Endpoint("tags_remove", "DELETE", DEP_SLUG + "/projects/{project_name}/tags", "slug", m.ProjectResponse)
SECRETS = Endpoint("secrets", "GET", DEP_ID + "/secrets", "id", m.SecretsPage)

# The operations of api-notes beyond the reference: one project, lockfiles, SBOM export, ticket links, liveness.
PING = Endpoint("ping", "GET", API + "/ping", "none", m.PingResponse)
PROJECT_GET = Endpoint("project_get", "GET", DEP_SLUG + "/projects/{project_name}", "slug", m.ProjectResponse)
PROJECT_UPDATE = Endpoint(
    "project_update",
    "PATCH",
    DEP_SLUG + "/projects/{project_name}",
    "slug",
    m.ProjectResponse,
    idempotent=False,
    result_keys=("project",),
    after_ambiguity="read the project (get_project) to see whether the change was made before trying again",
)
PROJECT_DELETE = Endpoint(
    "project_delete",
    "DELETE",
    DEP_SLUG + "/projects/{project_name}",
    "slug",
    m.ProjectDeleted,
    idempotent=False,
    result_keys=("project_name", "projectName"),
    after_ambiguity="read the project (get_project raises NotFoundError once it is deleted) before trying again",
)
LOCKFILES = Endpoint(
    "lockfiles", "POST", DEP_ID + "/dependencies/repositories/{repository_id}/lockfiles", "id", m.LockfilesPage
)
SBOM_EXPORT = Endpoint(
    "sbom_export",
    "POST",
    DEP_ID + "/sbom/export",
    "id",
    m.SbomExportTask,
    idempotent=False,
    result_keys=("taskToken", "task_token"),
    after_ambiguity="an export job may have started without its task token reaching us; starting another one "
    "costs a second job against the service's export rate limit",
)
SBOM_EXPORT_STATUS = Endpoint(
    "sbom_export_status", "GET", DEP_ID + "/sbom/export/{task_token}", "id", m.SbomExportState, result_keys=("status",)
)
SBOM_DOWNLOAD = Endpoint(
    "sbom_download",
    "GET",
    "{url}",
    "none",
    m.SbomDocument,
    result_keys=("bomFormat", "specVersion"),
    authenticated=False,
    too_large_advice="Pass a larger max_bytes to download_sbom (default: the connection extra max_response_bytes)",
)
TICKET_LINK = Endpoint(
    "ticket_link",
    "POST",
    DEP_ID + "/tickets/link",
    "id",
    m.TicketLinkResult,
    idempotent=False,
    result_keys=("ticket_id", "ticketId"),
)
TICKET_UNLINK = Endpoint(
    "ticket_unlink", "POST", DEP_ID + "/tickets/unlink", "id", m.TicketUnlinkResult, idempotent=False
)
TICKET_LINK_DELETE = Endpoint(
    "ticket_link_delete",
    "DELETE",
    DEP_ID + "/ticketing/v2/tickets/{external_ticket_id}",
    "id",
    m.TicketLinkDeleted,
    idempotent=False,
)

#: Every operation by name: the ``Endpoint`` constants above (each typed with its response model, for the client).
ENDPOINTS: dict[str, Endpoint[Any]] = {e.name: e for e in list(globals().values()) if isinstance(e, Endpoint)}


class Call(Generic[T]):
    """One prepared request: an endpoint, its path values, query parameters and JSON body.

    Generic in what its ``parse`` returns: the endpoint's response model, unless a ``parser`` is given.
    """

    __slots__ = ("endpoint", "json", "max_bytes", "params", "parser", "path_params")

    @overload
    def __init__(
        self: Call[R],
        endpoint: Endpoint[R],
        path_params: dict[str, str] | None = None,
        params: list[tuple[str, Any]] | None = None,
        json: Any = None,
        parser: None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        endpoint: Endpoint[Any],
        path_params: dict[str, str] | None = None,
        params: list[tuple[str, Any]] | None = None,
        json: Any = None,
        *,
        parser: Callable[[bytes], T],
    ) -> None: ...

    def __init__(
        self,
        endpoint: Endpoint[Any],
        path_params: dict[str, str] | None = None,
        params: list[tuple[str, Any]] | None = None,
        json: Any = None,
        parser: Callable[[bytes], T] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.path_params = path_params or {}
        self.params = params
        self.json = json
        #: Turns the 2xx body into the result; default: the endpoint's pydantic response model.
        self.parser = parser
        #: The size cap of this call's response body; default: the client's ``max_response_bytes``.
        self.max_bytes: int | None = None

    def __repr__(self) -> str:
        return (
            f"Call(endpoint={self.endpoint.name!r}, path_params={self.path_params!r}, params={self.params!r}, "
            f"json={self.json!r})"
        )

    def path(self, deployment_id: str | None, deployment_slug: str | None) -> str:
        """The URL path with every segment percent-encoded (project names keep their slashes); for an
        unauthenticated endpoint (a link the service handed out) the absolute URL as it was given."""
        if not self.endpoint.authenticated:
            return self.path_params["url"]
        values = {
            "deployment_id": quote(deployment_id or "", safe=""),
            "deployment_slug": quote(deployment_slug or "", safe=""),
        }
        for key, value in self.path_params.items():
            values[key] = quote(value, safe="/" if key == "project_name" else "")
        return self.endpoint.path.format(**values)

    def parse(self, body: bytes) -> T:
        if self.parser is not None:
            return self.parser(body)
        # without a parser, T is the endpoint's response model (the first ``__init__`` overload)
        result: T = parse_model(self.endpoint, body)
        return result


#: What decoding a body can raise: not JSON, invalid UTF-8 in a string, or nesting deeper than the decoder allows.
_UNDECODABLE = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def decode_json(endpoint: Endpoint[Any], body: bytes) -> Any:
    """Decode a 2xx JSON body or raise ``ResponseDecodeError`` with an excerpt."""
    try:
        return msgspec.json.decode(body)
    except _UNDECODABLE as exc:
        raise ResponseDecodeError(
            f"response is not valid JSON ({exc})",
            endpoint=endpoint.name,
            body_excerpt=excerpt(body),
            malformed=True,
        ) from None


def parse_model(endpoint: Endpoint[R], body: bytes) -> R:
    """Decode and validate a 2xx body into the endpoint's response model."""
    data = decode_json(endpoint, body)
    if endpoint.result_keys and not (isinstance(data, dict) and any(k in data for k in endpoint.result_keys)):
        raise ResponseDecodeError(
            f"response is not a {endpoint.response.__name__}: expected a JSON object with "
            f"{', '.join(endpoint.result_keys)}",
            endpoint=endpoint.name,
            body_excerpt=excerpt(body),
        )
    try:
        return endpoint.response.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise ResponseDecodeError(
            f"response does not match {endpoint.response.__name__}: field '{where}': {err.get('msg')}",
            endpoint=endpoint.name,
            body_excerpt=excerpt(body),
        ) from None


class RawFindingsEnvelope(msgspec.Struct, forbid_unknown_fields=False):
    findings: list[msgspec.Raw] = []


class RawFindingsPage(msgspec.Struct, forbid_unknown_fields=False):
    """A page of findings whose items stay undecoded (``msgspec.Raw``: the exact bytes of each finding).

    Either envelope (api-notes): a flat ``findings`` list (the real service; also secrets, with ``cursor``) or
    per-type objects ``sastFindings``/``scaFindings``/``aiSastFindings`` each holding ``findings``. The items are
    turned into canonical rows by ``warehouse.rows.finding_rows`` (the table of ``client.canonical``).
    """

    sastFindings: RawFindingsEnvelope | None = None
    scaFindings: RawFindingsEnvelope | None = None
    aiSastFindings: RawFindingsEnvelope | None = None
    findings: list[msgspec.Raw] | None = None
    secrets: list[msgspec.Raw] | None = None
    items_: list[msgspec.Raw] | None = msgspec.field(default=None, name="items")
    cursor: str | int | None = None
    nextCursor: str | int | None = None

    @property
    def items(self) -> list[msgspec.Raw]:
        for flat in (self.findings, self.secrets, self.items_):
            if flat is not None:
                return flat
        out: list[msgspec.Raw] = []
        for part in (self.sastFindings, self.scaFindings, self.aiSastFindings):
            if part is not None:
                out.extend(part.findings)
        return out

    @property
    def next_cursor(self) -> str | None:
        value = self.cursor if self.cursor not in (None, "") else self.nextCursor
        return None if value in (None, "") else str(value)


_RAW_DECODER = msgspec.json.Decoder(RawFindingsPage)


def raw_findings_parser(endpoint: Endpoint[Any]) -> Callable[[bytes], RawFindingsPage]:
    """A parser that keeps each finding's original bytes (the extraction fast path)."""

    def parse(body: bytes) -> RawFindingsPage:
        try:
            return _RAW_DECODER.decode(body)
        except _UNDECODABLE as exc:
            raise ResponseDecodeError(
                f"findings page is not the documented JSON shape ({exc})",
                endpoint=endpoint.name,
                body_excerpt=excerpt(body),
                malformed=not isinstance(exc, msgspec.ValidationError),
            ) from None

    return parse


def error_for_status(
    endpoint: Endpoint[Any], status: int, body: bytes, retry_after: float | None
) -> FindingsApiError:
    """Map a non-2xx response to the typed error that says what to do about it."""
    kw: dict[str, Any] = {"status_code": status, "endpoint": endpoint.name, "body_excerpt": excerpt(body)}
    if not endpoint.authenticated and 400 <= status < 500 and status != 429:
        return DownloadLinkError(
            "the download link was refused: such links are short-lived; read the export status again for a fresh "
            "downloadUrl (the API token is never sent to it, so this is not about the token)",
            **kw,
        )
    if status in (401, 403):
        return AuthenticationError(
            "authentication failed: check the API token, and that Web API access is enabled on it "
            "(deployment settings > Tokens)",
            **kw,
        )
    if status == 404:
        if endpoint.scope != "none" and _is_deployment_level(endpoint):
            return DeploymentNotFoundError(
                "deployment not found, or the API token lacks Web API access (the service answers 404 for both); "
                "check the connection's deployment id/slug and enable Web API access on the token",
                **kw,
            )
        return NotFoundError(
            "not found: the object named in the path does not exist, or the deployment was not found "
            "or the API token lacks Web API access",
            **kw,
        )
    if status == 410 and endpoint.policy_api:
        return PolicyApiRetiredError(
            "the policy API was retired for this deployment (410 Gone): it migrated to the newer policy system",
            **kw,
        )
    if status in (400, 422):
        return ValidationError("the server refused the request as invalid", **kw)
    if status == 429:
        return RateLimitedError(
            "rate limited by the server; retries exhausted", retry_after=retry_after, **kw
        )
    if status >= 500:
        return ServerError("server error; retries exhausted", **kw)
    return FindingsApiError("unexpected response status", **kw)


def _is_deployment_level(endpoint: Endpoint[Any]) -> bool:
    """Paths whose only variable is the deployment: a 404 there can only be about the deployment or token."""
    return endpoint.path.count("{") == 1
