"""Settings of one emulator instance: served deployment, tokens, data volumes and behaviour switches."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .faults import FaultSpec
from .rows import MAX_FINDINGS_PER_TYPE

# Settings that ``POST /_emulator/reset`` may override; the others (host, port, tokens, deployment, db) are
# fixed for the life of the process.
RESETTABLE = (
    "seed",
    "findings",
    "repositories",
    "scans",
    "rules",
    "dependencies",
    "secrets",
    "ai_findings",
    "scan_duration",
    "flat_findings",
    "retired_policies",
    "dialect",
    "sbom_polls",
    "sbom_url_ttl",
)
#: Wire formats: the API reference's, or the real service's (see the README's "Dialects").
DIALECTS = ("reference", "real")


@dataclass(frozen=True)
class EmulatorConfig:
    """Everything an emulator needs to generate its data and answer requests."""

    host: str = "127.0.0.1"
    port: int = 8900
    tokens: tuple[str, ...] = ("emulator-token",)
    no_web_api_tokens: tuple[str, ...] = ()
    seed: int = 42
    findings: int = 5000
    repositories: int = 12
    scans: int = 60
    rules: int = 40
    dependencies: int = 300
    secrets: int = 200
    ai_findings: int = 0
    deployment_id: str = "1"
    deployment_slug: str = "acme"
    db: str | None = None
    scan_duration: float = 30.0
    flat_findings: bool = False
    retired_policies: bool = False
    dialect: str = "reference"
    sbom_polls: int = 3
    sbom_url_ttl: float = 300.0
    faults: tuple[FaultSpec, ...] = ()
    log_level: str = "info"

    def __post_init__(self) -> None:
        if not self.deployment_id.isdigit():
            raise ValueError(f"deployment_id: must be digits, got {self.deployment_id!r}")
        for name in ("findings", "repositories", "scans", "rules", "dependencies", "secrets", "ai_findings"):
            value = getattr(self, name)
            if not 0 <= value <= MAX_FINDINGS_PER_TYPE:
                raise ValueError(f"{name}: must be between 0 and {MAX_FINDINGS_PER_TYPE}, got {value}")
        if self.repositories < 1 or self.rules < 1:
            raise ValueError("repositories and rules: at least 1 each")
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect: must be one of {', '.join(DIALECTS)}, got {self.dialect!r}")
        if self.sbom_polls < 1:
            raise ValueError(f"sbom_polls: at least 1 (the poll that finishes the job), got {self.sbom_polls}")
        if self.sbom_url_ttl <= 0:
            raise ValueError(f"sbom_url_ttl: must be positive, got {self.sbom_url_ttl}")
        if self.scan_duration < 0:
            raise ValueError(f"scan_duration: must not be negative, got {self.scan_duration}")

    @property
    def deployment_name(self) -> str:
        """Display name of the deployment, derived from its slug."""
        return self.deployment_slug.replace("-", " ").title()

    def with_overrides(self, overrides: dict[str, Any]) -> EmulatorConfig:
        """Return a copy with the resettable settings in ``overrides`` replaced.

        Raises ``ValueError`` (its message starts with the setting's name) for a key that cannot be overridden
        or a value of the wrong type or out of range.
        """
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in RESETTABLE:
                raise ValueError(f"{key}: cannot be overridden by a reset; allowed: {', '.join(RESETTABLE)}")
            expected = type(getattr(self, key))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise ValueError(f"{key}: expected {expected.__name__}, got {value!r}")
            changes[key] = value
        return dataclasses.replace(self, **changes)
