"""The API's numeric limits, defined once: the API reference's section 8 ("Limits"), plus the few it states elsewhere.

The request models (:mod:`.requests`), the pipeline configuration (``config.py``), the operators' parameter checks
and the pipeline's chunking all read these; ``tests/test_one_source.py`` fails when a maximum is written out again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field


@dataclass(frozen=True)
class Limit:
    """One numeric limit: its default, minimum and maximum, and what it counts (for messages)."""

    what: str
    default: int
    minimum: int
    maximum: int

    def field(self, default: int | None = None, *, minimum: int | None = None) -> Any:
        """A pydantic ``Field`` bounded by this limit; ``default`` and a higher ``minimum`` may be our own."""
        return Field(default=self.default if default is None else default,
                     ge=self.minimum if minimum is None else minimum, le=self.maximum)

    def check(self, value: int, name: str) -> int:
        """Return ``value`` when within the limit; otherwise raise ``ValueError`` naming ``name``, the value and the
        allowed range."""
        if not self.minimum <= value <= self.maximum:
            raise ValueError(f"{name} = {value} is out of range: {self.what} must be "
                             f"{self.minimum}..{self.maximum} (the API's limit)")
        return value


#: List dependencies: ``pageSize``.
DEPENDENCIES_PAGE_SIZE = Limit("dependencies per page", 1000, 1, 10000)
#: List repositories with dependencies: ``pageSize``.
DEPENDENCY_REPOSITORIES_PAGE_SIZE = Limit("repositories per page", 5, 1, 100)
#: List scans: ``limit`` (no minimum stated: 1).
SCANS_LIMIT = Limit("scans per page", 100, 1, 500)
#: List policy rules: ``limit`` (no minimum stated: 1).
POLICY_RULES_LIMIT = Limit("rules per page", 500, 1, 2000)
#: List code or supply-chain findings: ``page_size``.
FINDINGS_PAGE_SIZE = Limit("findings per page", 100, 100, 3000)
#: Create tickets: ``limit``.
TICKETS_LIMIT = Limit("tickets per call", 20, 1, 20)
#: Create tickets: findings in one ticket (the service groups at most this many into one).
FINDINGS_PER_TICKET = 50
#: Bulk triage: ``limit`` (ids per request).
TRIAGE_LIMIT = Limit("findings per bulk-triage request", 3000, 1, 3000)
#: List all projects: ``page_size`` (offset pagination, section 6; no maximum stated: the findings list's).
PROJECTS_PAGE_SIZE = Limit("projects per page", 100, 1, 3000)
#: List secrets: ``limit`` (cursor pagination, section 6; no maximum stated: the findings list's).
SECRETS_LIMIT = Limit("secrets per page", 100, 1, 3000)
#: Bulk triage: ``new_note`` characters.
NOTE_MAX_CHARS = 3000
