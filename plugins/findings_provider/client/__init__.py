"""Client of the security findings management API: pure Python (httpx, pydantic, msgspec), no Airflow."""

from findings_provider.client.client import AsyncFindingsClient, FindingsClient, check_base_url, is_loopback
from findings_provider.client.endpoints import ENDPOINTS, RawFindingsPage
from findings_provider.client.errors import (
    AmbiguousWriteError,
    AuthenticationError,
    ConfigurationError,
    DeploymentNotFoundError,
    FindingsApiError,
    NotFoundError,
    PaginationError,
    PolicyApiRetiredError,
    RateLimitedError,
    ResponseDecodeError,
    ServerError,
    TransportError,
    ValidationError,
)
from findings_provider.client.models import (
    AutotriageVerdict,
    Finding,
    IssueType,
    PolicyMode,
    ScanDetails,
    ScanStatus,
    Severity,
    TriageReason,
    TriageState,
    UnknownScanStatusError,
)
from findings_provider.client.requests import TicketRequest, TriageRequest
from findings_provider.client.transport import RetryPolicy

__all__ = [
    "ENDPOINTS",
    "AmbiguousWriteError",
    "AsyncFindingsClient",
    "AuthenticationError",
    "AutotriageVerdict",
    "ConfigurationError",
    "DeploymentNotFoundError",
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
    "is_loopback",
]
