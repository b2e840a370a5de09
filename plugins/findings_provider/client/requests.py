"""Request models: validation of every input before a request is sent.

Limits come from section 8 of the reference, the triage rules from the notes on the real service. A refused input
raises ``ValidationError`` naming the field, the value given and what is allowed.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from findings_provider.client.errors import ValidationError
from findings_provider.client.limits import (
    DEPENDENCIES_PAGE_SIZE,
    DEPENDENCY_REPOSITORIES_PAGE_SIZE,
    FINDINGS_PAGE_SIZE,
    NOTE_MAX_CHARS,
    POLICY_RULES_LIMIT,
    PROJECTS_PAGE_SIZE,
    SCANS_LIMIT,
    SECRETS_LIMIT,
    TICKETS_LIMIT,
    TRIAGE_LIMIT,
)
from findings_provider.client.timeutil import to_epoch_seconds, to_iso
from findings_provider.client.vocabulary import (
    CODE_TYPES,
    SBOM_METADATA_COMPONENT_TYPE_PREFIX,
    AutotriageVerdict,
    Confidence,
    CycloneDxVersion,
    Exposure,
    FindingStatus,
    IssueType,
    PolicyMode,
    Product,
    SbomFormat,
    ScanStatus,
    Severity,
    Transitivity,
    TriageReason,
    TriageState,
)

UINT32_MAX = 2**32 - 1

NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
Digits = Annotated[str, StringConstraints(pattern=r"^[0-9]+$")]


def _project_name(value: str) -> str:
    # Names keep their slashes in the URL (org/repo), so a "." or ".." segment would be resolved by the URL
    # parser and send the request to another path (another project, or another deployment's endpoint).
    if any(part in ("", ".", "..") for part in value.split("/")):
        raise ValueError("a project name is org/repo: empty, '.' and '..' path segments are refused")
    return value


ProjectName = Annotated[str, StringConstraints(min_length=1), AfterValidator(_project_name)]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("a blank value is not allowed: give a non-blank value, or leave it out")
    return value


#: A string that must hold more than whitespace.
NonBlankStr = Annotated[str, AfterValidator(_not_blank)]


def _path_segment(value: str) -> str:
    # one URL path segment: it is percent-encoded, but "." and ".." would still be resolved by the URL parser
    if not value.strip() or value in (".", ".."):
        raise ValueError("expected an id (one path segment): blank, '.' and '..' are refused")
    return value


def _id_text(value: Any) -> Any:
    """An id given as an integer becomes its digits (a boolean stays, to be refused)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


#: One id in a URL path: an integer or a non-blank string that is not "." or "..".
PathSegment = Annotated[str, BeforeValidator(_id_text), AfterValidator(_path_segment)]


def _ids_as_strings(value: Any) -> Any:
    """Issue ids given as integers become digit strings (what ticket requests send)."""
    if isinstance(value, (list, tuple, set)):
        return [_id_text(v) for v in value]
    return value


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an absolute http(s) URL with a host, e.g. https://host.example.com/path")
    return value


#: An absolute http(s) URL.
HttpUrl = Annotated[str, AfterValidator(_http_url)]
UInt32 = Annotated[int, Field(ge=0, le=UINT32_MAX)]


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], what: str, **values: Any) -> M:
    """Build ``model`` from ``values`` or raise ``ValidationError`` naming field, value and what is allowed."""
    try:
        return model(**values)
    except (
        ValidationError
    ) as exc:  # raised by RequestModel.__init__, named after the model: name the operation
        raise ValidationError(f"{what}: {exc.detail}", field=exc.field) from None


def _as_validation_error(exc: pydantic.ValidationError, what: str) -> ValidationError:
    """The client's ``ValidationError`` for a pydantic one: first error's field, value and rule."""
    err = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in err.get("loc", ())) or None
    given = err.get("input")
    msg = err.get("msg", "invalid")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if field and isinstance(given, dict) and field.split(".")[-1] not in given:
        text = f"{what}: field '{field}': {msg}"
    else:
        text = f"{what}: field '{field}' = {given!r}: {msg}" if field else f"{what}: {msg}"
    extra = len(exc.errors()) - 1
    if extra:
        text += f" (and {extra} more error{'s' if extra > 1 else ''})"
    return ValidationError(text, field=field, detail=text.removeprefix(f"{what}: "))


class RequestModel(BaseModel):
    """Base of request models: unknown keyword arguments are refused (a typo must not become a no-op filter)."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True, populate_by_name=True, defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:  # callers catch the client's error type, never pydantic's
            raise _as_validation_error(exc, type(self).__name__) from None

    def body(self) -> dict[str, Any]:
        """The JSON body: set fields only, enums as values, ``None`` dropped."""
        return self.model_dump(mode="json", exclude_none=True, by_alias=True, exclude=self._not_sent())

    def _not_sent(self) -> set[str]:
        return set()


# --- findings listing (4.8) -----------------------------------------------------------------------------------

#: The ``ref`` of the findings list that means each project's primary branch (accepted by the service; to match the
#: web UI's counts name the project's ``primary_branch`` with ``dedup=True``, api-notes "Deduplication").
DEFAULT_REF = "_default"

SAST_ONLY_FILTERS = ("policies", "rules", "categories", "confidence", "autotriage_verdict")
SCA_ONLY_FILTERS = ("exposures", "transitivities", "is_malicious")


class FindingsQuery(RequestModel):
    """Query of ``GET .../findings``: validation of section 8 and of the per-type filters."""

    #: ``ai_sast`` (AI-detected code findings) takes the code filters.
    issue_type: str = IssueType.SAST.value
    since: float | None = None
    page: UInt32 = 0
    page_size: int = FINDINGS_PAGE_SIZE.field()
    dedup: bool | None = None
    repos: list[NonEmptyStr] | None = None
    repository_ids: list[UInt32] | None = None
    status: FindingStatus | None = None
    triage_reasons: list[TriageReason] | None = None
    severities: list[Severity] | None = None
    #: A branch reference, or ``DEFAULT_REF`` (``_default``: the project's primary branch, as production clients send
    #: it with ``dedup=true``).
    ref: NonBlankStr | None = None
    policies: list[Literal["rule-board-audit", "rule-board-pr-comments", "rule-board-block"]] | None = None
    rules: list[NonEmptyStr] | None = None
    categories: list[NonEmptyStr] | None = None
    confidence: Confidence | None = None
    autotriage_verdict: AutotriageVerdict | None = None
    component_tags: list[NonEmptyStr] | None = None
    exposures: list[Exposure] | None = None
    transitivities: list[Transitivity] | None = None
    is_malicious: bool | None = None
    click_to_fix_pr_state: list[Literal["open", "merged"]] | None = None

    @field_validator("issue_type")
    @classmethod
    def _code_type(cls, value: str) -> str:
        if value not in CODE_TYPES:
            raise ValueError(f"not an issue type of this endpoint; expected one of {', '.join(CODE_TYPES)} "
                             "(secrets have their own endpoint)")
        return value

    @field_validator("since", mode="before")
    @classmethod
    def _since(cls, value: Any) -> Any:
        return None if value is None else to_epoch_seconds(value) if isinstance(value, datetime) else value

    @model_validator(mode="after")
    def _per_type_filters(self) -> FindingsQuery:
        code = self.issue_type != IssueType.SCA
        wrong = SCA_ONLY_FILTERS if code else SAST_ONLY_FILTERS
        for name in wrong:
            if getattr(self, name) is not None:
                raise ValueError(
                    f"filter '{name}' applies only to issue_type "
                    f"'{'sca' if code else 'sast'}', not '{self.issue_type}'"
                )
        return self

    def params(self) -> list[tuple[str, Any]]:
        """Query parameters: arrays as repeated keys, booleans as ``true``/``false``."""
        out: list[tuple[str, Any]] = []
        for key, value in self.body().items():
            if isinstance(value, list):
                out.extend((key, v) for v in value)
            elif isinstance(value, bool):
                out.append((key, "true" if value else "false"))
            else:
                out.append((key, value))
        return out


# --- selection shared by triage and tickets (4.11) ------------------------------------------------------------


class Selection(RequestModel):
    """The filters of section 4.11. Either ``issue_ids`` or at least one filter selects findings.

    Values that narrow nothing are refused (blank strings, ``since`` at or before the epoch) or do not count as a
    filter (empty lists, the server's default of a flag), so they cannot stand in for a real selection.
    """

    issue_type: IssueType
    autotriage_verdict: AutotriageVerdict | None = None
    categories: list[NonEmptyStr] | None = None
    component_tags: list[NonEmptyStr] | None = None
    confidence: Confidence | None = None
    dependencies: list[NonEmptyStr] | None = None
    deploymentSlug: str | None = None
    epss_probability: list[NonEmptyStr] | None = None
    exposures: list[Exposure] | None = None
    include_historical: bool | None = None
    policies: list[NonEmptyStr] | None = None
    policy_mode: list[NonEmptyStr] | None = None
    pro_only: bool | None = None
    project_tags: list[NonEmptyStr] | None = None
    ref: str | None = None
    repos: list[NonEmptyStr] | None = None
    repository_visibility: list[Literal["public", "private"]] | None = None
    rules: list[NonEmptyStr] | None = None
    ruleset: list[NonEmptyStr] | None = None
    secret_types: list[NonEmptyStr] | None = None
    severities: list[Severity] | None = None
    since: Digits | None = None
    status: FindingStatus | None = None
    transitivities: list[str] | None = None
    triage_reasons: list[TriageReason] | None = None
    validation_state: list[Literal["valid", "invalid"]] | None = None
    #: Explicit opt-in to send a request with neither ``issue_ids`` nor any filter (never sent to the server).
    allow_unfiltered: bool = False

    @field_validator("transitivities")
    @classmethod
    def _transitivities(cls, value: list[str] | None) -> list[str] | None:
        allowed = (Transitivity.DIRECT.value, Transitivity.TRANSITIVE.value)
        for item in value or ():
            if item not in allowed:
                raise ValueError(f"{item!r} is not a transitivity filter; expected one of {', '.join(allowed)}")
        return value

    @field_validator("since", mode="before")
    @classmethod
    def _since(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or (isinstance(value, str) and not re.fullmatch(r"[0-9]+", value)):
            raise ValueError("expected epoch seconds (a positive number, digits or a datetime)")
        try:
            seconds = int(value) if isinstance(value, str) else int(to_epoch_seconds(value))
        except (TypeError, ValueError, OverflowError):
            raise ValueError("expected epoch seconds (a positive number, digits or a datetime)") from None
        if seconds <= 0:
            raise ValueError(
                "must be a time after the epoch (epoch seconds > 0): 0 or earlier selects every finding; "
                "leave since out to select by the other filters"
            )
        return str(seconds)

    @field_validator("*")
    @classmethod
    def _no_blank_filter(cls, value: Any, info: ValidationInfo) -> Any:
        # a blank value narrows nothing: counted as a filter it would let a request select every finding
        if info.field_name in SELECTION_FILTERS:
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, str) and not v.strip() for v in values):
                raise ValueError("a blank value narrows nothing: give a non-blank value, or leave the filter out")
        return value

    @model_validator(mode="after")
    def _needs_selection(self) -> Selection:
        issue_ids = getattr(self, "issue_ids", None)
        if issue_ids is not None and len(issue_ids) == 0:
            raise ValueError("issue_ids is empty; give at least one id, or leave it out and use filters")
        if issue_ids is None and not self.filters() and not self.allow_unfiltered:
            raise ValueError(
                "neither issue_ids nor any filter was given: the request would select every finding; "
                "give issue_ids or a filter, or pass allow_unfiltered=True to do that on purpose"
            )
        return self

    def filters(self) -> dict[str, Any]:
        """The filters that are set (``deploymentSlug`` is not a filter)."""
        return {
            name: value
            for name in SELECTION_FILTERS
            if (value := getattr(self, name)) is not None
            and value != []
            and NEUTRAL_FLAGS.get(name, object()) != value
        }

    def _not_sent(self) -> set[str]:
        return {"allow_unfiltered"}


#: Flags whose value alone narrows nothing (the server's default), so they do not count as a selection.
NEUTRAL_FLAGS = {"include_historical": True, "pro_only": False}

SELECTION_FILTERS = tuple(
    name
    for name in Selection.model_fields
    if name not in ("issue_type", "deploymentSlug", "allow_unfiltered")
)


class TriageRequest(Selection):
    """Body of bulk triage (4.10), with the rules the server enforces checked before sending."""

    issue_ids: list[UInt32] | None = None
    limit: int = TRIAGE_LIMIT.field()
    new_note: str | None = Field(default=None, max_length=NOTE_MAX_CHARS)
    new_triage_reason: TriageReason | None = None
    new_triage_state: TriageState | None = None

    @model_validator(mode="after")
    def _triage_rules(self) -> TriageRequest:
        if self.new_triage_state is None and self.new_note is None:
            raise ValueError("one of new_triage_state or new_note is required")
        if self.new_triage_reason is not None and self.new_triage_state != TriageState.IGNORED.value:
            raise ValueError(
                f"new_triage_reason={self.new_triage_reason!r} is only allowed with new_triage_state='ignored', "
                f"not {self.new_triage_state!r}"
            )
        return self


class TicketRequest(Selection):
    """Body of ticket creation (4.7). ``issue_ids`` are strings of digits here."""

    issue_ids: list[Digits] | None = None
    group_issues: bool = True
    tracker_project_id: Digits | None = None
    limit: int = TICKETS_LIMIT.field()

    @field_validator("issue_ids", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        return _ids_as_strings(value)

    def body_with_tracker_field(self, tracker_field: str) -> dict[str, Any]:
        """The body, with the tracker project under the field name the deployment's tracker uses."""
        body = self.body()
        if "tracker_project_id" in body and tracker_field != "tracker_project_id":
            body[tracker_field] = body.pop("tracker_project_id")
        return body


# --- scans (4.3) ----------------------------------------------------------------------------------------------


class TimeRange(RequestModel):
    min: float | None = None
    max: float | None = None


class ScanSearch(RequestModel):
    branch: str | None = None
    cursor: str | None = None
    deploymentId: str | None = None
    is_full_scan: bool | None = None
    limit: int = SCANS_LIMIT.field()
    products: list[Product] | None = None
    repository_id: UInt32 | None = None
    since: str | None = None
    statuses: list[ScanStatus] | None = None
    total_time: TimeRange | None = None

    @field_validator("since", mode="before")
    @classmethod
    def _since(cls, value: Any) -> Any:
        return None if value is None else to_iso(value)

    def body(self) -> dict[str, Any]:
        body = super().body()
        if "is_full_scan" in body:  # the reference types it as an integer flag
            body["is_full_scan"] = int(body["is_full_scan"])
        return body


# --- dependencies (4.1, 4.2) ----------------------------------------------------------------------------------


class PackageFilter(RequestModel):
    exactNameMatch: bool | None = None
    exactVersion: str | None = None
    name: str | None = None
    versionLowerBound: str | None = None
    versionUpperBound: str | None = None


def _transitivities(value: Any) -> Any:
    """``direct``/``transitive``/``unknown`` in either case -> the dependencies endpoint's upper-case values."""
    if isinstance(value, (list, tuple)):
        upper = {"unknown": "UNKNOWN_TRANSITIVITY"}
        return [upper.get(v.lower(), v.upper()) if isinstance(v, str) else v for v in value]
    return value


class DependencyFilter(RequestModel):
    """The ``dependencyFilter`` of the dependency endpoints (reference 2.3, plus the real service's fields)."""

    ecosystem: list[NonEmptyStr] | None = None
    includeArchived: bool | None = None
    license: list[NonEmptyStr] | None = None
    licensePolicySettings: list[NonEmptyStr] | None = None
    lockfilePath: str | None = None
    name: str | None = None
    packageFilters: list[PackageFilter] | None = None
    repositoryId: list[int] | None = None
    transitivity: (
        Annotated[
            list[Literal["DIRECT", "TRANSITIVE", "UNKNOWN_TRANSITIVITY"]], BeforeValidator(_transitivities)
        ]
        | None
    ) = None
    version: str | None = None


class DependenciesQuery(RequestModel):
    cursor: Digits | None = None
    dependencyFilter: DependencyFilter | None = None
    deploymentId: str | None = None
    pageSize: int = DEPENDENCIES_PAGE_SIZE.field()


class RepositoriesQuery(RequestModel):
    cursor: UInt32 | None = None
    dependencyFilter: DependencyFilter | None = None
    deploymentId: str | None = None
    pageSize: int = DEPENDENCY_REPOSITORIES_PAGE_SIZE.field()


# --- policies (4.5, 4.6) --------------------------------------------------------------------------------------


class PolicyRulesQuery(RequestModel):
    cursor: str | None = None
    limit: int = POLICY_RULES_LIMIT.field()


class UpdatePolicy(RequestModel):
    deploymentId: str | None = None
    policyId: Digits
    policyMode: PolicyMode
    rulePath: NonEmptyStr


# --- projects (4.9, 4.12, 4.13) and secrets (4.15) ------------------------------------------------------------


class Toggle(RequestModel):
    enabled: bool


class ManagedScanUpdate(RequestModel):
    deploymentSlug: str | None = None
    projectName: ProjectName
    diff_scan: Toggle | None = None
    full_scan: Toggle | None = None

    @model_validator(mode="after")
    def _something(self) -> ManagedScanUpdate:
        if self.diff_scan is None and self.full_scan is None:
            raise ValueError("give diff_scan or full_scan (or both); nothing to change")
        return self


#: How a tags body is sent: ``array`` (the reference: a bare JSON array) or ``object`` (the real service:
#: ``{"tags": [...]}``).
TAGS_BODY_FORMS = ("array", "object")


class Tags(RequestModel):
    project_name: ProjectName
    tags: list[NonEmptyStr] = Field(min_length=1)

    def add_body(self, form: str) -> list[str] | dict[str, list[str]]:
        """The body of add-tags: a bare array (reference) or ``{"tags": [...]}`` (real service)."""
        return {"tags": list(self.tags)} if form == "object" else list(self.tags)

    def remove_params(self) -> list[tuple[str, str]]:
        """The query of remove-tags: ``tags`` as repeated keys. Never a body, whatever the tags-body form: a DELETE
        body is not part of the API (reference 4.13, api-notes), and proxies may drop or refuse it."""
        return [("tags", tag) for tag in self.tags]


class ProjectsQuery(RequestModel):
    page: UInt32 = 0
    page_size: int = PROJECTS_PAGE_SIZE.field()


class SecretsQuery(RequestModel):
    cursor: str | None = None
    limit: int = SECRETS_LIMIT.field()


# --- one project: get, update, delete (api-notes, "Projects") ------------------------------------------------


class ProjectRef(RequestModel):
    """The project named in ``.../projects/{projectName}``."""

    project_name: ProjectName


class ManagedScanConfigBody(RequestModel):
    diff_scan: Toggle | None = None
    full_scan: Toggle | None = None


class ProjectUpdate(RequestModel):
    """Body of ``PATCH .../projects/{projectName}``: ``{tags?, primary_branch?, managed_scan_config?}``.

    At least one field is needed. ``tags`` replaces the project's tags (an empty list clears them); use
    ``add_project_tags``/``remove_project_tags`` to change some of them.
    """

    project_name: ProjectName
    tags: list[NonBlankStr] | None = None
    primary_branch: NonBlankStr | None = None
    managed_scan_config: ManagedScanConfigBody | None = None

    @model_validator(mode="after")
    def _something(self) -> ProjectUpdate:
        if self.tags is None and self.primary_branch is None and self.managed_scan_config is None:
            raise ValueError("give tags, primary_branch, diff_scan or full_scan (at least one); nothing to change")
        config = self.managed_scan_config
        if config is not None and config.diff_scan is None and config.full_scan is None:
            raise ValueError("managed_scan_config needs diff_scan or full_scan (or both)")
        return self

    def _not_sent(self) -> set[str]:
        return {"project_name"}


# --- lockfiles of a repository (api-notes, "Repositories with dependencies / lockfiles") -----------------------


class LockfilesQuery(RequestModel):
    """Body of ``POST .../dependencies/repositories/{repositoryId}/lockfiles``: ``{pageSize, cursor}`` (mixed
    pagination, reference 4.14). No page size limits are documented: at least 1, sent only when given."""

    repository_id: Annotated[str, BeforeValidator(_id_text), StringConstraints(pattern=r"^[0-9]+$")]
    cursor: str | int | None = None
    pageSize: Annotated[int, Field(ge=1, le=UINT32_MAX)] | None = None

    @field_validator("cursor")
    @classmethod
    def _cursor(cls, value: str | int | None) -> str | int | None:
        if isinstance(value, bool) or (isinstance(value, int) and value < 0):
            raise ValueError("a cursor is the value of the previous page's cursor (a number or a string)")
        # a numeric cursor is sent as a number, as the repositories list of the same family takes it
        return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value

    def _not_sent(self) -> set[str]:
        return {"repository_id"}


# --- SBOM export (api-notes, "SBOM export and liveness") -------------------------------------------------------


def _cyclonedx_version(value: Any) -> Any:
    """``1.5``, ``v1.5``, ``V1_5`` or the full ``SBOM_CYCLONE_DX_VERSION_V1_5`` -> the full value."""
    if isinstance(value, str):
        short = value.strip().upper().removeprefix("SBOM_CYCLONE_DX_VERSION_").removeprefix("V").replace(".", "_")
        full = f"SBOM_CYCLONE_DX_VERSION_V{short}"
        if full in {v.value for v in CycloneDxVersion}:
            return full
    return value


class SbomFormatVersion(RequestModel):
    format: SbomFormat = SbomFormat.CYCLONEDX
    cyclonedxVersion: Annotated[CycloneDxVersion, BeforeValidator(_cyclonedx_version)]


def _component_type(value: Any) -> Any:
    """``application`` or the full ``SBOM_METADATA_COMPONENT_TYPE_CYCLONE_DX_V15_APPLICATION`` -> the full value;
    anything not of that shape is refused (the notes list two values and say more exist)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("expected a component type such as 'application' or 'library'")
    text = value.strip().upper()
    full = text if text.startswith(SBOM_METADATA_COMPONENT_TYPE_PREFIX) else SBOM_METADATA_COMPONENT_TYPE_PREFIX + text
    if not re.fullmatch(re.escape(SBOM_METADATA_COMPONENT_TYPE_PREFIX) + r"[A-Z][A-Z0-9_]*", full):
        raise ValueError(
            f"expected a component type such as 'application' or 'library' (sent as "
            f"{SBOM_METADATA_COMPONENT_TYPE_PREFIX}APPLICATION, ...)"
        )
    return full


class SbomContact(RequestModel):
    name: NonBlankStr | None = None
    email: NonBlankStr | None = None
    phone: NonBlankStr | None = None


class SbomSupplier(RequestModel):
    name: NonBlankStr | None = None
    url: HttpUrl | None = None
    contact: SbomContact | None = None


class SbomExportRequest(RequestModel):
    """Body of ``POST .../sbom/export`` (camelCase): the repository, the branch (the primary one when left out), the
    CycloneDX version, and optionally the metadata component type and supplier."""

    repositoryId: Annotated[str, BeforeValidator(_id_text), StringConstraints(pattern=r"^[0-9]+$")]
    ref: NonBlankStr | None = None
    formatVersion: SbomFormatVersion
    metadataComponentType: Annotated[str | None, BeforeValidator(_component_type)] = None
    metadataSupplier: SbomSupplier | None = None


# --- ticket links (api-notes, "Tickets and triage") --------------------------------------------------------------

#: Issue ids of the ticket-link operations: at least one, each a numeric id (sent as digit strings, which a
#: proto-JSON server reads as a string or as an int64 field alike).
IssueIds = Annotated[list[Digits], BeforeValidator(_ids_as_strings), Field(min_length=1)]


class TicketLink(RequestModel):
    """Body of ``POST .../tickets/link``: link an existing tracker ticket to findings."""

    ticket_url: HttpUrl
    issue_ids: IssueIds


class TicketUnlink(RequestModel):
    """Body of ``POST .../tickets/unlink``: remove the findings' ticket links."""

    issue_ids: IssueIds


class TicketRef(RequestModel):
    """The ticket named in ``DELETE .../ticketing/v2/tickets/{externalTicketId}``."""

    external_ticket_id: PathSegment


class SbomTaskRef(RequestModel):
    """The export job named in ``GET .../sbom/export/{taskToken}``."""

    task_token: PathSegment
