"""Typed responses of the findings API (pydantic v2).

Every model keeps unknown fields (the service labels every endpoint experimental and adds fields), accepts the
loose types the reference warns about, and parses every timestamp shape the service sends into aware UTC.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from findings_provider.client import canonical
from findings_provider.client.dependency_identity import canonical_transitivity, dependency_key, licence_list
from findings_provider.client.timeutil import parse_timestamp
from findings_provider.client.vocabulary import SbomExportStatus, ScanStatus

#: A timestamp in any shape the service sends, parsed to aware UTC (None stays None).
Timestamp = Annotated[datetime | None, BeforeValidator(parse_timestamp)]


def _as_list(value: Any) -> Any:
    """Accept a single string where a list of strings is documented (``vulnerabilityClass``)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


StrList = Annotated[list[str], BeforeValidator(_as_list)]


def _as_str(value: Any) -> Any:
    """Accept numbers where the reference carries an id as a string (strings on one endpoint, ints on another)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    return value


IdStr = Annotated[str, BeforeValidator(_as_str)]


def _not_bool(value: Any) -> Any:
    """Refuse a JSON boolean where an integer is documented (pydantic would silently read ``true`` as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got the boolean {str(value).lower()}")
    return value


#: An integer field: lax about ``"12"`` and ``12.0`` (the same value) but never reading a boolean as 0 or 1.
Int = Annotated[int, BeforeValidator(_not_bool)]


def _none_as_empty(value: Any) -> Any:
    """``null`` where a list is documented means an empty list."""
    return [] if value is None else value


#: A list of integer ids: numbers or digit strings, ``null`` read as empty.
IntList = Annotated[list[Int], BeforeValidator(_none_as_empty)]


def _empty_as_none(value: Any) -> Any:
    """``""`` (proto-JSON's unset string) where a text is optional means unset."""
    return None if value == "" else value


#: An optional text whose empty value means unset.
OptionalText = Annotated[str | None, BeforeValidator(_empty_as_none)]


def text_of(value: Any) -> str | None:
    """Return the text of a loosely typed value (``commit_title`` may be a string or an object)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("value", "text", "title", "string"):
            text = value.get(key)
            if isinstance(text, str):
                return text
        return next((v for v in value.values() if isinstance(v, str)), None)
    if isinstance(value, list):
        return " ".join(t for t in (text_of(v) for v in value) if t)
    return str(value)


class ApiModel(BaseModel):
    """Base of every response model: unknown fields are kept, never an error."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=False, defer_build=True)


# --- deployments --------------------------------------------------------------------------------------------


class Deployment(ApiModel):
    id: IdStr | None = None
    slug: str | None = None
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            data.setdefault("id", data.get("deploymentId"))
            data.setdefault("slug", data.get("deploymentSlug"))
        return data


class DeploymentsResponse(ApiModel):
    deployments: list[Deployment] = Field(default_factory=list)


# --- dependencies ---------------------------------------------------------------------------------------------


class PackageRef(ApiModel):
    """The package of a dependency as the real service sends it."""

    name: str | None = None
    versionSpecifier: str | None = None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class CodeLocation(ApiModel):
    """Where a dependency is defined (real service): lines and columns arrive as digit strings."""

    path: str | None = None
    url: str | None = None
    committedAt: Timestamp = None
    startLine: Int | None = None
    endLine: Int | None = None
    startCol: Int | None = None
    endCol: Int | None = None

    @model_validator(mode="after")
    def _unset_epoch(self) -> CodeLocation:
        if self.committedAt == _EPOCH:  # the service's placeholder for "not set"
            self.committedAt = None
        return self


class Dependency(ApiModel):
    """A dependency in either dialect, with the same canonical values.

    The reference sends ``id``, ``name``, ``version``; the real service sends no id and no top-level name or version
    but ``repositoryId`` (digit string), ``package {name, versionSpecifier}``, ``ecosystem``, ``transitivity`` (upper
    case), ``licenses`` and ``definedAt``/``manifestDefinition`` locations. ``name`` and ``version`` are filled from
    ``package``, ``licenses`` from a ``license`` field, ``transitivity`` is lower case (``direct``, ``transitive``,
    ``unknown``); ``key`` is ``id`` or, without one, the canonical key of ``dependency_identity``.
    """

    id: IdStr | None = None
    name: str | None = None
    version: str | None = None
    package: PackageRef | str | None = None
    ecosystem: str | None = None
    transitivity: Annotated[str | None, BeforeValidator(canonical_transitivity)] = None
    licenses: Annotated[list[str], BeforeValidator(licence_list)] = Field(default_factory=list)
    repositoryId: IdStr | None = None
    lockfilePath: str | None = None
    definedAt: CodeLocation | None = None
    manifestDefinition: CodeLocation | None = None

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        package = data.get("package")
        if isinstance(package, dict):
            if data.get("name") is None and package.get("name") is not None:
                data["name"] = package["name"]
            if data.get("version") is None and package.get("versionSpecifier") is not None:
                data["version"] = package["versionSpecifier"]
        elif isinstance(package, str) and data.get("name") is None:
            data["name"] = package
        if data.get("licenses") is None and data.get("license") is not None:
            data["licenses"] = data["license"]
        if data.get("repositoryId") is None and data.get("repository_id") is not None:
            data["repositoryId"] = data["repository_id"]
        if data.get("lockfilePath") is None and data.get("lockfile_path") is not None:
            data["lockfilePath"] = data["lockfile_path"]
        return data

    @property
    def lockfile_path(self) -> str | None:
        """``lockfilePath``, else the path of ``definedAt`` (real service)."""
        return self.lockfilePath or (self.definedAt.path if self.definedAt else None)

    @property
    def key(self) -> str | None:
        """The id the warehouse stores: ``id`` when sent, else the canonical key (None without repository or name)."""
        if self.id is not None:
            return self.id
        return dependency_key(self.repositoryId, self.lockfile_path, self.ecosystem, self.name, self.version)


class DependenciesPage(ApiModel):
    dependencies: list[Dependency] = Field(default_factory=list)
    cursor: IdStr | None = None
    hasMore: bool | None = None

    @property
    def items(self) -> list[Dependency]:
        return self.dependencies


class RepositorySummary(ApiModel):
    id: Int | None = None
    name: str | None = None
    numDependencies: Int | None = None
    hasDependencyPathScan: bool | None = None


class RepositoriesPage(ApiModel):
    repositorySummaries: list[RepositorySummary] = Field(default_factory=list)
    cursor: IdStr | None = None
    hasMore: bool | None = None

    @property
    def items(self) -> list[RepositorySummary]:
        return self.repositorySummaries


# --- scans --------------------------------------------------------------------------------------------------


class FindingsCounts(ApiModel):
    code: Int | None = None
    secrets: Int | None = None
    supply_chain: Int | None = None
    total: Int | None = None


class Scan(ApiModel):
    """A scan as returned by scan search (4.3): carries ``status``."""

    id: IdStr
    deployment_id: IdStr | None = None
    repository_id: IdStr | None = None
    branch: str | None = None
    commit: str | None = None
    started_at: Timestamp = None
    completed_at: Timestamp = None
    status: str | None = None
    exit_code: Int | None = None
    is_full_scan: bool | None = None
    enabled_products: list[str] = Field(default_factory=list)
    findings_counts: FindingsCounts | None = None
    total_time: float | None = None

    @property
    def scan_status(self) -> ScanStatus:
        """The status as an enum; raises ``UnknownScanStatusError`` for a value this client does not know."""
        return ScanStatus.parse(self.status or "")


class ScansPage(ApiModel):
    scans: list[Scan] = Field(default_factory=list)
    cursor: IdStr | None = None

    @property
    def items(self) -> list[Scan]:
        return self.scans


class ScanMeta(ApiModel):
    branch: str | None = None
    commit: str | None = None
    config: Any = None
    repo_url: str | None = None
    ci_job_url: str | None = None
    repository: str | None = None
    commit_title: Any = None
    pull_request_id: Int | None = None
    pull_request_title: Any = None
    commit_author_name: str | None = None
    commit_author_email: str | None = None
    commit_author_username: str | None = None
    commit_author_image_url: str | None = None
    pull_request_author_username: str | None = None
    pull_request_author_image_url: str | None = None

    @property
    def commit_title_text(self) -> str | None:
        return text_of(self.commit_title)


class ScanStats(ApiModel):
    findings: Int | None = None
    total_time: float | None = None


#: A scan with no completion report after this long is never finished (reference 3.1).
NEVER_FINISHED_AFTER = timedelta(hours=1)


class ScanDetails(ApiModel):
    """One scan (4.4). The service sends no status here; ``status`` derives it (see api-notes)."""

    id: IdStr
    deployment_id: IdStr | None = None
    repository_id: IdStr | None = None
    started_at: Timestamp = None
    completed_at: Timestamp = None
    enabled_products: list[str] = Field(default_factory=list)
    exit_code: Int | None = None
    has_logs: bool | None = None
    stats: ScanStats | None = None
    meta: ScanMeta = Field(default_factory=ScanMeta)

    def derive_status(self, now: datetime | None = None) -> ScanStatus:
        """Derive the status: an explicit ``status`` field wins (mapped strictly), else the reference's rules."""
        explicit = (self.model_extra or {}).get("status")
        if explicit:
            return ScanStatus.parse(explicit)
        if self.completed_at is not None:
            return ScanStatus.COMPLETED if self.exit_code in (0, 1) else ScanStatus.ERROR
        now = now or datetime.now(timezone.utc)
        if self.started_at is not None and now - self.started_at > NEVER_FINISHED_AFTER:
            return ScanStatus.NEVER_FINISHED
        return ScanStatus.RUNNING

    @property
    def status(self) -> ScanStatus:
        return self.derive_status()


# --- policies -----------------------------------------------------------------------------------------------


class Policy(ApiModel):
    id: IdStr | None = None
    name: str | None = None
    slug: str | None = None
    isDefault: bool | None = None
    productType: str | None = None


class PoliciesResponse(ApiModel):
    policies: list[Policy] = Field(default_factory=list)


class Rule(ApiModel):
    id: IdStr | None = None
    path: str | None = None
    category: str | None = None
    confidence: str | None = None
    severity: str | None = None
    source: str | None = None
    policyMode: str | None = None
    languages: StrList = Field(default_factory=list)
    technologies: StrList = Field(default_factory=list)
    cweCategories: StrList = Field(default_factory=list)
    owaspCategories: StrList = Field(default_factory=list)
    vulnerabilityClass: StrList = Field(default_factory=list)
    rulesets: StrList = Field(default_factory=list)
    registryMaintainer: str | None = None
    lastChangeAt: Timestamp = None
    lastChangeBy: str | None = None
    url: str | None = None
    hasValidators: bool | None = None
    secretType: str | None = None


class PolicyRulesPage(ApiModel):
    policy: Policy | None = None
    rules: list[Rule] = Field(default_factory=list)
    cursor: IdStr | None = None

    @property
    def items(self) -> list[Rule]:
        return self.rules


class UpdatePolicyResponse(ApiModel):
    policyId: IdStr | None = None
    updatedRule: Rule | None = None


# --- findings -----------------------------------------------------------------------------------------------


def _either(*names: str) -> Any:
    """A field read from any of ``names`` (the canonical, reference spelling first)."""
    return Field(default=None, validation_alias=AliasChoices(*names))


class Location(ApiModel):
    """Canonical keys are the reference's (camelCase); the real dialect's snake_case is read too."""

    filePath: str | None = _either("filePath", "file_path")
    line: Int | None = None
    column: Int | None = None
    endLine: Int | None = _either("endLine", "end_line")
    endColumn: Int | None = _either("endColumn", "end_column")


class ExternalTicket(ApiModel):
    id: Int | None = None
    externalSlug: str | None = _either("externalSlug", "external_slug")
    url: str | None = None
    linkedIssueIds: list[Int] = Field(
        default_factory=list, validation_alias=AliasChoices("linkedIssueIds", "linked_issue_ids")
    )

    @model_validator(mode="before")
    @classmethod
    def _no_null_list(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("linkedIssueIds", data.get("linked_issue_ids", [])) is None:
            data = {k: v for k, v in data.items() if k not in ("linkedIssueIds", "linked_issue_ids")}
        return data


class ReviewComment(ApiModel):
    externalDiscussionId: IdStr | None = _either("externalDiscussionId", "external_discussion_id")
    #: A string in the schema, an integer in one client: canonical is the string.
    externalNoteId: IdStr | None = _either("externalNoteId", "external_note_id")


class Repository(ApiModel):
    name: str | None = None
    url: str | None = None


def _strs(value: Any) -> Any:
    return [] if value is None else _as_list(value)


class FindingRule(ApiModel):
    name: str | None = None
    message: str | None = None
    category: str | None = None
    confidence: Annotated[str | None, BeforeValidator(lambda v: canonical.enum_value("confidence", v))] = None
    cweNames: Annotated[list[str], BeforeValidator(_strs)] = Field(
        default_factory=list, validation_alias=AliasChoices("cweNames", "cwe_names")
    )
    owaspNames: Annotated[list[str], BeforeValidator(_strs)] = Field(
        default_factory=list, validation_alias=AliasChoices("owaspNames", "owasp_names")
    )
    subcategories: StrList = Field(default_factory=list)
    vulnerabilityClasses: Annotated[list[str], BeforeValidator(_strs)] = Field(
        default_factory=list, validation_alias=AliasChoices("vulnerabilityClasses", "vulnerability_classes")
    )


class Autotriage(ApiModel):
    verdict: Annotated[str | None, BeforeValidator(lambda v: canonical.enum_value("verdict", v))] = None
    reason: str | None = None


class Assistant(ApiModel):
    autotriage: Autotriage | None = None
    autofix: dict[str, Any] | None = None
    component: dict[str, Any] | None = None
    guidance: dict[str, Any] | None = None
    rule_explanation: dict[str, Any] | None = None


#: Finding attributes that hold the canonical value of ``canonical.FINDING_FIELDS`` of the same name.
_CANONICAL_ATTRIBUTES = tuple(canonical.FINDING_FIELDS)


class Finding(ApiModel):
    """A code, supply-chain, AI or secrets finding in canonical form, from either dialect (docs/canonical.md).

    The canonical fields (``_CANONICAL_ATTRIBUTES``) are read through ``canonical.FINDING_FIELDS``, the table the
    warehouse's row path reads too: enums in their canonical spelling (an unknown value kept as received), ids as
    integers, timestamps aware UTC. Sub-objects take either key style and keep the reference's spelling.
    """

    id: Int
    categories: StrList = Field(default_factory=list)
    confidence: str | None = None
    severity: str | None = None
    created_at: Timestamp = _either("created_at", "createdAt")
    updated_at: Timestamp = _either("updated_at", "updatedAt")
    relevant_since: Timestamp = None
    first_seen_scan_id: Int | None = None
    match_based_id: str | None = None
    syntactic_id: str | None = None
    ref: str | None = None
    repository: Repository | None = None
    repository_name: str | None = None
    location: Location | None = None
    line_of_code_url: str | None = None
    external_ticket: ExternalTicket | None = _either("external_ticket", "externalTicket")
    external_ticket_id: Int | None = None
    review_comments: list[ReviewComment] = Field(
        default_factory=list, validation_alias=AliasChoices("review_comments", "reviewComments")
    )
    rule: FindingRule | None = None
    rule_name: str | None = None
    rule_message: str | None = None
    state: str | None = None
    state_updated_at: Timestamp = None
    status: str | None = None
    triage_state: str | None = None
    triage_reason: str | None = None
    triage_comment: str | None = None
    triaged_at: Timestamp = None
    autotriage_verdict: str | None = None
    # code (sast) and AI (ai_sast)
    sourcing_policy: dict[str, Any] | None = None
    click_to_fix_prs: list[dict[str, Any]] = Field(default_factory=list)
    click_to_fix_failures: list[dict[str, Any]] = Field(default_factory=list)
    assistant: Assistant | None = None
    ai_impact: str | None = None
    # supply chain (sca)
    epss_score: dict[str, Any] | None = None
    fix_recommendations: list[dict[str, Any]] = Field(default_factory=list)
    found_dependency: dict[str, Any] | None = None
    is_malicious: bool | None = None
    reachability: str | None = None
    reachable_condition: str | None = None
    usage: dict[str, Any] | None = None
    vulnerability_identifier: str | None = None
    # secrets
    validation_state: str | None = None
    path: str | None = None
    autotriage: Autotriage | None = None

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        values = canonical.source_values(data)
        out = {k: v for k, v in data.items() if k not in ("validationState", "findingPath")}
        for name in _CANONICAL_ATTRIBUTES:
            if values[name] is not None or name in out:
                out[name] = values[name] if values[name] is not None else out[name]
        for key in ("review_comments", "reviewComments", "categories", "click_to_fix_prs",
                    "click_to_fix_failures", "fix_recommendations"):
            if key in out and out[key] is None:
                del out[key]
        return out

    @property
    def ticket_id(self) -> int | None:
        """The finding's external ticket id (also the one under ``usage`` of a supply-chain finding)."""
        return self.external_ticket_id


class FindingsList(ApiModel):
    findings: list[Finding] = Field(default_factory=list)


class FindingsPage(ApiModel):
    """A page of findings in either shape: a flat ``findings`` list (the real service) or per-type objects
    (``sastFindings``, ``scaFindings``, ``aiSastFindings``: the reference and older docs)."""

    sastFindings: FindingsList | None = None
    scaFindings: FindingsList | None = None
    aiSastFindings: FindingsList | None = None
    flat: list[Finding] | None = Field(default=None, alias="findings")

    @property
    def items(self) -> list[Finding]:
        if self.flat is not None:
            return self.flat
        out: list[Finding] = []
        for part in (self.sastFindings, self.scaFindings, self.aiSastFindings):
            if part is not None:
                out.extend(part.findings)
        return out


class SecretsPage(ApiModel):
    """A page of secrets findings. The reference does not show the field names: accept the likely ones."""

    items_: list[Finding] = Field(default_factory=list, alias="findings")
    cursor: IdStr | None = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "findings" not in data:
            for key in ("secrets", "secretFindings", "items"):
                if isinstance(data.get(key), list):
                    data = {**data, "findings": data[key]}
                    break
        if data.get("cursor") in (None, ""):
            data = {**data, "cursor": data.get("nextCursor") or data.get("next_cursor")}
        return data

    @property
    def items(self) -> list[Finding]:
        return self.items_


# --- triage and tickets -------------------------------------------------------------------------------------


class TriageResult(ApiModel):
    num_triaged: Int
    triaged_issues: list[Int] = Field(default_factory=list)


class TicketFailed(ApiModel):
    error: str | None = None
    issue_ids: list[Int] = Field(default_factory=list)


class TicketSkipped(ApiModel):
    reason: str | None = None
    issue_ids: list[Int] = Field(default_factory=list)


class TicketSucceeded(ApiModel):
    ticket_id: Int | None = None
    ticket_url: str | None = None
    external_slug: str | None = None
    issue_ids: list[Int] = Field(default_factory=list)


class TicketResult(ApiModel):
    failed: list[TicketFailed] = Field(default_factory=list)
    skipped: list[TicketSkipped] = Field(default_factory=list)
    succeeded: list[TicketSucceeded] = Field(default_factory=list)


# --- projects -----------------------------------------------------------------------------------------------


class ScanToggle(ApiModel):
    enabled: bool | None = None


class ManagedScanConfig(ApiModel):
    diff_scan: ScanToggle | None = None
    full_scan: ScanToggle | None = None


def _tag_list(value: Any) -> Any:
    """Project ``tags``: a list (clients, the reference), or one string (the published schema: read as
    comma-separated), or ``null`` (none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [tag.strip() for tag in value.split(",") if tag.strip()]
    return value


class Project(ApiModel):
    id: Int | None = None
    name: str
    tags: Annotated[list[str], BeforeValidator(_tag_list)] = Field(default_factory=list)
    created_at: Timestamp = None
    default_branch: str | None = None
    primary_branch: str | None = None
    latest_scan_at: Timestamp = None
    url: str | None = None
    managed_scan_config: ManagedScanConfig | None = None


class ProjectResponse(ApiModel):
    project: Project


class ProjectsPage(ApiModel):
    projects: list[Project] = Field(default_factory=list)

    @property
    def items(self) -> list[Project]:
        return self.projects


class ProjectDeleted(ApiModel):
    """The answer of deleting a project: the name of the project deleted."""

    project_name: str | None = _either("project_name", "projectName")


# --- lockfiles of a repository --------------------------------------------------------------------------------


class Lockfile(ApiModel):
    lockfilePath: str | None = _either("lockfilePath", "lockfile_path")
    numDependencies: Int | None = _either("numDependencies", "num_dependencies")


class LockfilesPage(ApiModel):
    """A page of a repository's lockfiles (mixed pagination: ``hasMore`` and ``cursor``), either key style."""

    lockfileSummaries: Annotated[list[Lockfile], BeforeValidator(_none_as_empty)] = Field(
        default_factory=list, validation_alias=AliasChoices("lockfileSummaries", "lockfile_summaries")
    )
    hasMore: bool | None = _either("hasMore", "has_more")
    cursor: Annotated[IdStr | None, BeforeValidator(_empty_as_none)] = None

    @property
    def items(self) -> list[Lockfile]:
        return self.lockfileSummaries


# --- SBOM export ----------------------------------------------------------------------------------------------


class SbomExportTask(ApiModel):
    """The answer of starting an SBOM export: the token to poll it with."""

    taskToken: str | None = _either("taskToken", "task_token")


class SbomExportState(ApiModel):
    """The state of an SBOM export job. ``downloadUrl`` is set once it completed (a short-lived link, fetched
    without the API token: ``download_sbom``); ``errorMessage`` when it failed."""

    status: str | None = None
    downloadUrl: OptionalText = _either("downloadUrl", "download_url")
    errorMessage: OptionalText = _either("errorMessage", "error_message")

    @property
    def export_status(self) -> SbomExportStatus:
        """The status as an enum (either dialect's spelling); an unknown value raises
        ``UnknownSbomExportStatusError`` naming it."""
        return SbomExportStatus.parse(self.status or "")


class SbomDocument(ApiModel):
    """A CycloneDX JSON document (the downloaded SBOM); every other key of the document is kept."""

    bomFormat: str | None = None
    specVersion: str | None = None
    serialNumber: str | None = None
    version: Int | None = None
    metadata: dict[str, Any] | None = None
    components: Annotated[list[dict[str, Any]], BeforeValidator(_none_as_empty)] = Field(default_factory=list)
    dependencies: Annotated[list[dict[str, Any]], BeforeValidator(_none_as_empty)] = Field(default_factory=list)


# --- ticket links ---------------------------------------------------------------------------------------------


class TicketLinkResult(ApiModel):
    """The answer of linking a ticket: the ticket, the findings now linked to it and those whose earlier link it
    replaced. Snake_case (the service) or camelCase keys; ids as numbers or digit strings."""

    ticket_id: Int | None = _either("ticket_id", "ticketId")
    ticket_url: str | None = _either("ticket_url", "ticketUrl")
    external_slug: str | None = _either("external_slug", "externalSlug")
    linked_issue_ids: IntList = Field(
        default_factory=list, validation_alias=AliasChoices("linked_issue_ids", "linkedIssueIds")
    )
    replaced_issue_ids: IntList = Field(
        default_factory=list, validation_alias=AliasChoices("replaced_issue_ids", "replacedIssueIds")
    )


class TicketUnlinkResult(ApiModel):
    unlinked_issue_ids: IntList = Field(
        default_factory=list, validation_alias=AliasChoices("unlinked_issue_ids", "unlinkedIssueIds")
    )


class TicketLinkDeleted(ApiModel):
    """The answer of deleting a ticket link: the findings that were linked to it."""

    issueIds: IntList = Field(default_factory=list, validation_alias=AliasChoices("issueIds", "issue_ids"))


# --- liveness -------------------------------------------------------------------------------------------------


class PingResponse(ApiModel):
    """The answer of ``GET /api/v1/ping``: ``{}`` (any field the service adds is kept)."""
