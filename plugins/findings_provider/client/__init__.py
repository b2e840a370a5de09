"""Client of the security findings management API: pure Python (httpx, pydantic, msgspec), no Airflow."""

from findings_provider.client.client import AsyncFindingsClient, FindingsClient
from findings_provider.client.endpoints import ENDPOINTS, RawFindingsPage
from findings_provider.client.errors import (
    AmbiguousWriteError,
    AuthenticationError,
    ConfigurationError,
    DeploymentNotFoundError,
    DownloadLinkError,
    FindingsApiError,
    NotFoundError,
    PaginationError,
    PolicyApiRetiredError,
    RateLimitedError,
    ResponseDecodeError,
    ResponseTooLargeError,
    ServerError,
    TransportError,
    ValidationError,
)
from findings_provider.client.models import Finding, ScanDetails
from findings_provider.client.requests import TicketRequest, TriageRequest
from findings_provider.client.security import check_base_url, check_token, is_loopback
from findings_provider.client.transport import RetryPolicy
from findings_provider.client.vocabulary import (
    AutotriageVerdict,
    IssueType,
    PolicyMode,
    ScanStatus,
    Severity,
    TriageReason,
    TriageState,
    UnknownScanStatusError,
)

__all__ = [
    "ENDPOINTS",
    "AmbiguousWriteError",
    "AsyncFindingsClient",
    "AuthenticationError",
    "AutotriageVerdict",
    "ConfigurationError",
    "DeploymentNotFoundError",
    "DownloadLinkError",
    "Finding",
    "FindingsApiError",
    "FindingsClient",
    "IssueType",
    "NotFoundError",
    "PaginationError",
    "PolicyApiRetiredError",
    "PolicyMode",
    "RateLimitedError",
    "RawFindingsPage",
    "ResponseDecodeError",
    "ResponseTooLargeError",
    "RetryPolicy",
    "ScanDetails",
    "ScanStatus",
    "ServerError",
    "Severity",
    "TicketRequest",
    "TransportError",
    "TriageReason",
    "TriageRequest",
    "TriageState",
    "UnknownScanStatusError",
    "ValidationError",
    "check_base_url",
    "check_token",
    "is_loopback",
]
