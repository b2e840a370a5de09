"""Client of the security findings management API: pure Python (httpx, pydantic, msgspec), no Airflow.

The names below are loaded from their modules on first use (PEP 562): a DAG file's parse imports the light parts
(``vocabulary``, ``limits``, ``errors``, ``canonical``) through the configuration and the operators, and should not
pay for the HTTP client and its pydantic models, which only a running task needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: The module of this package that defines each exported name.
_EXPORTS = {name: module for module, names in {
    "client": ("AsyncFindingsClient", "FindingsClient"),
    "endpoints": ("ENDPOINTS", "RawFindingsPage"),
    "errors": ("AmbiguousWriteError", "AuthenticationError", "ConfigurationError", "DeploymentNotFoundError",
               "DownloadLinkError", "FindingsApiError", "NotFoundError", "PaginationError", "PolicyApiRetiredError",
               "RateLimitedError", "ResponseDecodeError", "ResponseTooLargeError", "ServerError", "TransportError",
               "ValidationError"),
    "models": ("Finding", "ScanDetails"),
    "requests": ("TicketRequest", "TriageRequest"),
    "security": ("check_base_url", "check_token", "is_loopback"),
    "transport": ("RetryPolicy",),
    "vocabulary": ("AutotriageVerdict", "IssueType", "PolicyMode", "ScanStatus", "Severity", "TriageReason",
                   "TriageState", "UnknownScanStatusError"),
}.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` and cache the name here (called only for names not yet set)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


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
