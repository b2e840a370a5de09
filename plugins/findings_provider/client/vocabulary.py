"""The API's vocabularies, defined once: issue types, statuses, severities, triage states and the other enums.

Every other module (the client's requests and models, the warehouse, the pipeline, the DAG params) imports these;
``tests/test_one_source.py`` fails when a second literal copy of a vocabulary appears in provider code. Values are
the canonical (reference) words; the real service's dialect is mapped onto them in :mod:`.canonical`. The API
reference's sections "Findings", "Bulk triage" and "Scans" list them.
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """A string enum whose ``str()`` is its value."""

    def __str__(self) -> str:
        return str(self.value)


class IssueType(StrEnum):
    """The issue types of ``canonical.ISSUE_TYPES`` (checked by a test): code, supply chain, AI, secrets."""

    SAST = "sast"
    SCA = "sca"
    AI_SAST = "ai_sast"
    SECRETS = "secrets"


class FindingStatus(StrEnum):
    OPEN = "open"
    FIXED = "fixed"
    IGNORED = "ignored"
    REVIEWING = "reviewing"
    FIXING = "fixing"
    PROVISIONALLY_IGNORED = "provisionally_ignored"


class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Confidence(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class TriageState(StrEnum):
    """Triage states that bulk triage can set."""

    IGNORED = "ignored"
    REVIEWING = "reviewing"
    FIXING = "fixing"
    REOPENED = "reopened"
    PROVISIONALLY_IGNORED = "provisionally_ignored"


class TriageReason(StrEnum):
    ACCEPTABLE_RISK = "acceptable_risk"
    FALSE_POSITIVE = "false_positive"
    NO_TIME = "no_time"
    NO_TRIAGE_REASON = "no_triage_reason"
    DUPLICATE = "duplicate"


class AutotriageVerdict(StrEnum):
    TRUE_POSITIVE = "true_positive"
    FALSE_POSITIVE = "false_positive"


class ValidationState(StrEnum):
    """Whether a secret was found to work (real dialect ``VALIDATION_STATE_*``)."""

    CONFIRMED_VALID = "confirmed_valid"
    CONFIRMED_INVALID = "confirmed_invalid"
    VALIDATION_ERROR = "validation_error"
    NO_VALIDATOR = "no_validator"


class Reachability(StrEnum):
    """Canonical ``reachability`` of a supply-chain finding: the ``exposures`` filter's words (the real service
    sends ``always reachable``, ..., and ``no reachability analysis`` for ``unknown``)."""

    REACHABLE = "reachable"
    ALWAYS_REACHABLE = "always_reachable"
    CONDITIONALLY_REACHABLE = "conditionally_reachable"
    UNREACHABLE = "unreachable"
    UNKNOWN = "unknown"


class PolicyMode(StrEnum):
    MONITOR = "MODE_MONITOR"
    COMMENT = "MODE_COMMENT"
    BLOCK = "MODE_BLOCK"
    DISABLED = "MODE_DISABLED"


class Product(StrEnum):
    UNSPECIFIED = "PRODUCT_UNSPECIFIED"
    SAST = "PRODUCT_SAST"
    SCA = "PRODUCT_SCA"
    SECRETS = "PRODUCT_SECRETS"
    AI_SAST = "PRODUCT_AI_SAST"


class Transitivity(StrEnum):
    DIRECT = "direct"
    TRANSITIVE = "transitive"
    UNKNOWN = "unknown"


class ScanStatus(StrEnum):
    """Every scan status the service is known to report, mapped explicitly."""

    PENDING = "SCAN_STATUS_PENDING"
    RUNNING = "SCAN_STATUS_RUNNING"
    COMPLETED = "SCAN_STATUS_COMPLETED"
    ERROR = "SCAN_STATUS_ERROR"
    NEVER_FINISHED = "SCAN_STATUS_NEVER_FINISHED"
    CANCELLED = "SCAN_STATUS_CANCELLED"

    @property
    def is_terminal(self) -> bool:
        """True when the scan will not change any more."""
        return self not in (ScanStatus.PENDING, ScanStatus.RUNNING)

    @property
    def is_success(self) -> bool:
        return self is ScanStatus.COMPLETED

    @property
    def is_failure(self) -> bool:
        """Terminal and not successful: error, never finished or cancelled."""
        return self.is_terminal and not self.is_success

    @classmethod
    def parse(cls, value: str) -> ScanStatus:
        """Map a status string; an unknown value raises ``UnknownScanStatusError`` naming it."""
        try:
            return cls(value)
        except ValueError:
            raise UnknownScanStatusError(value) from None


class UnknownScanStatusError(ValueError):
    """The service reported a scan status this client does not know."""

    def __init__(self, value: object) -> None:
        self.value = value
        known = ", ".join(s.value for s in ScanStatus)
        super().__init__(f"unknown scan status {value!r}; known statuses: {known}")

    def __reduce__(self) -> tuple[type[UnknownScanStatusError], tuple[object]]:
        # unpickle from the value, not from the formatted message
        return (type(self), (self.value,))


#: The ``exposures`` filter of the supply-chain findings list takes the words of ``reachability``.
Exposure = Reachability

#: The status a finding has after bulk triage set its triage state (reopening makes it open again).
STATUS_AFTER_TRIAGE: dict[str, str] = {
    TriageState.IGNORED.value: FindingStatus.IGNORED.value,
    TriageState.REVIEWING.value: FindingStatus.REVIEWING.value,
    TriageState.FIXING.value: FindingStatus.FIXING.value,
    TriageState.REOPENED.value: FindingStatus.OPEN.value,
}

#: Statuses that only a triage (by a person or a policy) gives a finding.
TRIAGED_STATUSES: tuple[str, ...] = (FindingStatus.IGNORED.value, FindingStatus.REVIEWING.value,
                                     FindingStatus.FIXING.value)

#: Statuses of a finding that still needs work (counted as open on the dashboard and in the alerts).
OPEN_STATUSES: tuple[str, ...] = (FindingStatus.OPEN.value, FindingStatus.REVIEWING.value, FindingStatus.FIXING.value)

#: Severities from the most to the least severe.
SEVERITY_ORDER: tuple[str, ...] = tuple(s.value for s in reversed(Severity))

#: The issue types the findings list endpoint serves: every one but ``secrets``, which has its own endpoint.
CODE_TYPES: tuple[str, ...] = tuple(t.value for t in IssueType if t is not IssueType.SECRETS)


# --- SBOM export (api-notes, "SBOM export and liveness") ----------------------------------------------------------


class SbomFormat(StrEnum):
    """``formatVersion.format`` of an SBOM export: CycloneDX is the only format the service offers."""

    CYCLONEDX = "SBOM_FORMAT_CYCLONEDX"


class CycloneDxVersion(StrEnum):
    """``formatVersion.cyclonedxVersion`` of an SBOM export."""

    V1_4 = "SBOM_CYCLONE_DX_VERSION_V1_4"
    V1_5 = "SBOM_CYCLONE_DX_VERSION_V1_5"
    V1_6 = "SBOM_CYCLONE_DX_VERSION_V1_6"
    V1_7 = "SBOM_CYCLONE_DX_VERSION_V1_7"


#: The prefix of every ``metadataComponentType`` value of an SBOM export (``..._APPLICATION``, ``..._LIBRARY``, ...:
#: the notes list two and say more exist, so the value is checked by its shape, not against a closed list).
SBOM_METADATA_COMPONENT_TYPE_PREFIX = "SBOM_METADATA_COMPONENT_TYPE_CYCLONE_DX_V15_"


class SbomExportStatus(StrEnum):
    """The status of an SBOM export job."""

    IN_PROGRESS = "SBOM_EXPORT_STATUS_IN_PROGRESS"
    COMPLETED = "SBOM_EXPORT_STATUS_COMPLETED"
    FAILED = "SBOM_EXPORT_STATUS_FAILED"

    @property
    def is_terminal(self) -> bool:
        """True when the job will not change any more."""
        return self is not SbomExportStatus.IN_PROGRESS

    @classmethod
    def parse(cls, value: str) -> SbomExportStatus:
        """Map a status in either dialect (``SBOM_EXPORT_STATUS_COMPLETED``, ``completed``, ``COMPLETED``); an
        unknown value raises ``UnknownSbomExportStatusError`` naming it (never a silent success)."""
        text = value.strip().upper() if isinstance(value, str) else ""
        for candidate in (text, "SBOM_EXPORT_STATUS_" + text):
            try:
                return cls(candidate)
            except ValueError:
                continue
        raise UnknownSbomExportStatusError(value)


class UnknownSbomExportStatusError(ValueError):
    """The service reported an SBOM export status this client does not know."""

    def __init__(self, value: object) -> None:
        self.value = value
        known = ", ".join(s.value for s in SbomExportStatus)
        super().__init__(f"unknown SBOM export status {value!r}; known statuses: {known}")

    def __reduce__(self) -> tuple[type[UnknownSbomExportStatusError], tuple[object]]:
        return (type(self), (self.value,))
