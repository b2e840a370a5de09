"""Request bodies of the API, validated by pydantic (failures become 400s naming the field)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    model_validator,
)

from .selection import (
    Confidence,
    Exposure,
    IssueType,
    PolicyBoard,
    PolicyModeName,
    Severity,
    Status,
    Transitivity,
    TriageReason,
    ValidationState,
    Verdict,
    Visibility,
)

#: The tracker project field named after the tracker's brand.
BRANDED_PROJECT_ID = re.compile(r"^[a-z][a-z0-9]*_project_id$")
Digits = Annotated[StrictStr, StringConstraints(pattern=r"^[0-9]+$")]
#: Integers the store can hold (SQLite: signed 64 bits); a larger value names nothing and is refused as invalid.
SqlInt = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
UInt32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
#: A numeric id carried as a string, within what the store can hold.
IdDigits = Annotated[StrictStr, StringConstraints(pattern=r"^[0-9]{1,18}$")]
Product = Literal["PRODUCT_UNSPECIFIED", "PRODUCT_SAST", "PRODUCT_SCA", "PRODUCT_SECRETS", "PRODUCT_AI_SAST"]
ScanStatusFilter = Literal["SCAN_STATUS_RUNNING", "SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR",
                           "SCAN_STATUS_NEVER_FINISHED", "SCAN_STATUS_PENDING", "SCAN_STATUS_CANCELLED"]
PolicyMode = Literal["MODE_MONITOR", "MODE_COMMENT", "MODE_BLOCK", "MODE_DISABLED"]
NewTriageState = Literal["ignored", "reviewing", "fixing", "reopened"]


class Body(BaseModel):
    """Base of request bodies: unknown fields are ignored, as the real service does."""

    model_config = ConfigDict(extra="ignore")


class PackageFilter(Body):
    """Package match of a dependency filter."""

    exactNameMatch: bool | None = None
    exactVersion: str | None = None
    name: str | None = None
    versionLowerBound: str | None = None
    versionUpperBound: str | None = None


class DependencyFilter(Body):
    """Dependency filter (reference 2.3)."""

    ecosystem: list[str] | str | None = None
    license: list[str] | None = None
    transitivity: list[str] | None = None
    lockfilePath: str | None = None
    name: str | None = None
    packageFilters: list[PackageFilter] | None = None
    repositoryId: list[SqlInt] | None = None
    version: str | None = None


class DependenciesBody(Body):
    """List dependencies (4.1)."""

    cursor: Digits | None = None
    dependencyFilter: DependencyFilter | None = None
    deploymentId: str | None = None
    pageSize: int = Field(1000, ge=1, le=10000)


class RepositoriesBody(Body):
    """List repositories with dependencies (4.2); ``page_size`` is accepted for ``pageSize``."""

    cursor: UInt32 | None = None
    dependencyFilter: DependencyFilter | None = None
    deploymentId: str | None = None
    pageSize: int = Field(5, ge=1, le=100, validation_alias=AliasChoices("pageSize", "page_size"))


class LockfilesBody(Body):
    """List lockfiles in a repository: ``cursor`` (a number, or its digits; 0 or absent starts), ``pageSize``
    (``page_size`` accepted; default 100, max 1000), ``dependencyFilter``."""

    cursor: UInt32 | Digits | None = None
    dependencyFilter: DependencyFilter | None = None
    deploymentId: str | None = None
    repositoryId: str | int | None = None
    pageSize: int = Field(100, ge=1, le=1000, validation_alias=AliasChoices("pageSize", "page_size"))


class TotalTimeRange(Body):
    """A range of scan durations."""

    min: float | None = None
    max: float | None = None


class ScanSearchBody(Body):
    """List scans (4.3)."""

    branch: str | None = None
    cursor: str | None = None
    deploymentId: str | None = None
    is_full_scan: bool | None = None
    limit: int = Field(100, ge=1, le=500)
    products: list[Product] | None = None
    repository_id: SqlInt | None = None
    since: str | None = None
    statuses: list[ScanStatusFilter] | ScanStatusFilter | None = None
    total_time: TotalTimeRange | None = None


class PolicyUpdateBody(Body):
    """Update policy (4.6)."""

    deploymentId: str | None = None
    policyId: str | None = None
    policyMode: PolicyMode
    rulePath: str = Field(min_length=1)


class SelectionBody(Body):
    """Selection fields shared by ticket creation and bulk triage (4.11)."""

    issue_type: IssueType
    autotriage_verdict: Verdict | None = None
    categories: list[str] | None = None
    component_tags: list[str] | None = None
    confidence: Confidence | None = None
    dependencies: list[str] | None = None
    deploymentSlug: str | None = None
    epss_probability: list[str] | None = None
    exposures: list[Exposure] | None = None
    include_historical: bool | None = None
    policies: list[PolicyBoard] | None = None
    policy_mode: list[PolicyModeName] | None = None
    pro_only: bool | None = None
    project_tags: list[str] | None = None
    ref: str | None = None
    repos: list[str] | None = None
    repository_visibility: list[Visibility] | None = None
    rules: list[str] | None = None
    ruleset: list[str] | None = None
    secret_types: list[str] | None = None
    severities: list[Severity] | None = None
    since: StrictStr | float | None = None
    status: Status | None = None
    transitivities: list[Transitivity] | None = None
    triage_reasons: list[TriageReason] | None = None
    validation_state: list[ValidationState] | None = None


class TriageBody(SelectionBody):
    """Bulk triage (4.10)."""

    issue_ids: list[Annotated[StrictInt, Field(ge=0, le=2**32 - 1)]] | None = None
    limit: int = Field(3000, ge=1, le=3000)
    new_note: str | None = Field(None, max_length=3000)
    new_triage_reason: TriageReason | None = None
    new_triage_state: NewTriageState | None = None


class TicketBody(SelectionBody):
    """Create tickets (4.7)."""

    issue_ids: list[IdDigits] | None = None
    group_issues: bool = True
    tracker_project_id: Digits | None = None
    limit: int = Field(20, ge=1, le=20)

    @model_validator(mode="before")
    @classmethod
    def _branded_tracker_field(cls, data: Any) -> Any:
        """Accept the tracker project field under its real name, ``<brand>_project_id`` (``jira_project_id``)."""
        if isinstance(data, dict) and data.get("tracker_project_id") is None:
            branded = [key for key in data if key != "tracker_project_id" and BRANDED_PROJECT_ID.match(key)]
            if branded:
                value = data[branded[0]]
                data = {**data, "tracker_project_id": str(value) if isinstance(value, int) else value}
        return data


class Toggle(Body):
    """An on/off setting."""

    enabled: StrictBool


class ManagedScanBody(Body):
    """Toggle managed scans (4.9)."""

    deploymentSlug: str | None = None
    projectName: str | None = None
    diff_scan: Toggle | None = None
    full_scan: Toggle | None = None


class ManagedScanConfig(Body):
    """A project's managed scan settings, as a PATCH sets them."""

    diff_scan: Toggle | None = None
    full_scan: Toggle | None = None


class ProjectPatchBody(Body):
    """Update a project: any of ``tags`` (replacing them), ``primary_branch``, ``managed_scan_config``."""

    deploymentSlug: str | None = None
    projectName: str | None = None
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] | None = None
    primary_branch: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    managed_scan_config: ManagedScanConfig | None = None


CycloneDxVersion = Literal["SBOM_CYCLONE_DX_VERSION_V1_4", "SBOM_CYCLONE_DX_VERSION_V1_5",
                           "SBOM_CYCLONE_DX_VERSION_V1_6", "SBOM_CYCLONE_DX_VERSION_V1_7"]


class SbomFormatVersion(Body):
    """The document format of an SBOM export: CycloneDX in one of its versions."""

    format: Literal["SBOM_FORMAT_CYCLONEDX"]
    cyclonedxVersion: CycloneDxVersion


class SupplierContact(Body):
    """A contact of the SBOM's supplier."""

    name: str | None = None
    email: str | None = None
    phone: str | None = None


class SbomSupplier(Body):
    """The SBOM's supplier (``metadataSupplier``)."""

    name: str | None = None
    url: str | None = None
    contact: SupplierContact | list[SupplierContact] | None = None

    def cyclonedx(self) -> dict[str, Any]:
        """The supplier as CycloneDX's ``metadata.supplier`` (``url`` and ``contact`` are lists there)."""
        contacts = self.contact if isinstance(self.contact, list) else [self.contact] if self.contact else []
        supplier: dict[str, Any] = {"name": self.name} if self.name else {}
        if self.url:
            supplier["url"] = [self.url]
        if contacts:
            supplier["contact"] = [c.model_dump(exclude_none=True) for c in contacts]
        return supplier


class SbomExportBody(Body):
    """Start an SBOM export (camelCase, as the real service takes it); ``repositoryId`` a digit string (a number
    is accepted too)."""

    deploymentId: str | None = None
    repositoryId: IdDigits | Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]
    ref: str | None = None
    formatVersion: SbomFormatVersion
    metadataComponentType: str | None = None
    metadataSupplier: SbomSupplier | None = None


#: A finding id in a ticket request: a digit string (as the service takes them) or, leniently, an integer.
IssueId = IdDigits | Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]


class TicketLinkBody(Body):
    """Link findings to an existing tracker ticket."""

    ticket_url: Annotated[StrictStr, StringConstraints(pattern=r"^https?://\S+$", max_length=2000)]
    issue_ids: list[IssueId] = Field(min_length=1)


class TicketUnlinkBody(Body):
    """Unlink findings from their tickets."""

    issue_ids: list[IssueId] = Field(min_length=1)
