"""SBOM export jobs: each finishes after a set number of polls, or fails on demand; the finished document is a
CycloneDX JSON built from the repository's dependencies, fetched from a short-lived URL that carries its own key.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from . import __version__, timefmt

IN_PROGRESS = "SBOM_EXPORT_STATUS_IN_PROGRESS"
COMPLETED = "SBOM_EXPORT_STATUS_COMPLETED"
FAILED = "SBOM_EXPORT_STATUS_FAILED"
#: ``formatVersion.cyclonedxVersion`` -> the document's ``specVersion``.
CYCLONEDX_VERSIONS = {f"SBOM_CYCLONE_DX_VERSION_V1_{minor}": f"1.{minor}" for minor in (4, 5, 6, 7)}
COMPONENT_TYPE_PREFIX = "SBOM_METADATA_COMPONENT_TYPE_CYCLONE_DX_V15_"
#: CycloneDX component types (``metadataComponentType``'s suffix, lower case, ``_`` as ``-``).
COMPONENT_TYPES = frozenset({"application", "framework", "library", "container", "platform", "operating-system",
                             "device", "device-driver", "firmware", "file", "machine-learning-model", "data",
                             "cryptographic-asset"})
#: Package URL types of the inventory's ecosystems (https://github.com/package-url/purl-spec).
PURL_TYPES = {"npm": "npm", "pypi": "pypi", "gomod": "golang", "cargo": "cargo", "maven": "maven", "gem": "gem",
              "composer": "composer", "nuget": "nuget", "pub": "pub", "swiftpm": "swift", "hex": "hex"}
DOWNLOAD_PATH = "/downloads/sbom"


def component_type(value: str | None) -> str:
    """The CycloneDX type named by a ``metadataComponentType`` (``application`` when absent); ``ValueError`` for
    an unknown one."""
    if not value:
        return "application"
    kind = value.removeprefix(COMPONENT_TYPE_PREFIX).lower().replace("_", "-")
    if not value.startswith(COMPONENT_TYPE_PREFIX) or kind not in COMPONENT_TYPES:
        raise ValueError(f"{value!r} is not {COMPONENT_TYPE_PREFIX}<TYPE> with TYPE one of "
                         f"{', '.join(sorted(t.upper().replace('-', '_') for t in COMPONENT_TYPES))}")
    return kind


def purl(ecosystem: str, name: str, version: str) -> str:
    """The package URL of a dependency (maven ``group:artifact`` as ``group/artifact``)."""
    kind = PURL_TYPES.get(ecosystem, "generic")
    path = name.replace(":", "/") if kind == "maven" else name
    return f"pkg:{kind}/{quote(path, safe='/')}@{quote(version, safe='')}"


def _component(dep: dict[str, Any]) -> dict[str, Any]:
    return {"type": "library", "bom-ref": purl(dep["ecosystem"], dep["name"], dep["version"]), "name": dep["name"],
            "version": dep["version"], "purl": purl(dep["ecosystem"], dep["name"], dep["version"]),
            "licenses": [{"license": {"id": lic}} for lic in dep["licenses"]]}


def cyclonedx(job: SbomJob, repo_name: str, repo_url: str, deps: list[dict[str, Any]], now: float) -> dict[str, Any]:
    """The CycloneDX document of ``job``: one component per package version (licences merged across lockfiles)."""
    components: dict[str, dict[str, Any]] = {}
    for dep in deps:
        component = _component(dep)
        known = components.setdefault(component["bom-ref"], component)
        for lic in component["licenses"]:
            if lic not in known["licenses"]:
                known["licenses"].append(lic)
    tool = {"name": "findings-emulator", "version": __version__}
    metadata: dict[str, Any] = {
        "timestamp": timefmt.iso_z(now),
        "tools": [{"vendor": "findings-emulator", **tool}] if job.spec_version == "1.4"
        else {"components": [{"type": "application", **tool}]},
        "component": {"type": job.component_type, "bom-ref": f"{repo_name}@{job.ref}", "name": repo_name,
                      "version": job.ref, "externalReferences": [{"type": "vcs", "url": repo_url}]},
    }
    if job.supplier:
        metadata["supplier"] = job.supplier
    return {"bomFormat": "CycloneDX", "specVersion": job.spec_version,
            "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'{repo_url}@{job.ref}#{job.token}')}",
            "version": 1, "metadata": metadata, "components": list(components.values())}


@dataclass
class SbomJob:
    """One export job."""

    token: str
    repository_id: int
    ref: str
    spec_version: str
    component_type: str
    supplier: dict[str, Any] | None
    polls_needed: int
    error: str | None = None
    polls: int = 0
    key: str = ""
    expires_at: float = 0.0
    document: bytes | None = None
    downloads: int = 0
    created_at: float = field(default_factory=time.time)

    @property
    def status(self) -> str:
        """Its status as the last poll reported it."""
        if self.polls < self.polls_needed:
            return IN_PROGRESS
        return FAILED if self.error else COMPLETED

    def describe(self) -> dict[str, Any]:
        """The job as the admin route lists it."""
        return {"task_token": self.token, "repository_id": self.repository_id, "ref": self.ref,
                "spec_version": self.spec_version, "polls": self.polls, "polls_needed": self.polls_needed,
                "status": self.status, "error": self.error, "downloads": self.downloads,
                "expires_at": timefmt.iso_z(self.expires_at) if self.key else None}


class SbomJobs:
    """The export jobs of one emulator and how new ones behave (polls to finish, failures to inject)."""

    def __init__(self, polls: int, url_ttl: float) -> None:
        self.polls = polls
        self.url_ttl = url_ttl
        self.fail_next = 0
        self.fail_repositories: set[int] = set()
        self.error_message = "SBOM generation failed"
        self._jobs: dict[str, SbomJob] = {}
        self._lock = threading.Lock()

    def settings(self) -> dict[str, Any]:
        """What the admin route shows and sets."""
        return {"polls": self.polls, "url_ttl": self.url_ttl, "fail_next": self.fail_next,
                "fail_repositories": sorted(self.fail_repositories), "error_message": self.error_message}

    def start(self, repository_id: int, ref: str, spec_version: str, kind: str, supplier: dict[str, Any] | None,
              error: str | None = None) -> SbomJob:
        """A new job; it fails (with ``error`` or the injected failure) when its last poll comes."""
        with self._lock:
            if error is None and repository_id in self.fail_repositories:
                error = self.error_message
            elif error is None and self.fail_next > 0:
                error = self.error_message
                self.fail_next -= 1
            job = SbomJob(secrets.token_hex(16), repository_id, ref, spec_version, kind, supplier, self.polls, error)
            self._jobs[job.token] = job
            return job

    def get(self, token: str) -> SbomJob | None:
        """The job ``token``, if any."""
        with self._lock:
            return self._jobs.get(token)

    def poll(self, job: SbomJob) -> bool:
        """Count one poll of ``job``; True when this poll completes it successfully (its document is due)."""
        with self._lock:
            before = job.status
            job.polls += 1
            done = before == IN_PROGRESS and job.status == COMPLETED
            if done:
                job.key = secrets.token_urlsafe(24)
                job.expires_at = time.time() + self.url_ttl
            return done

    def check_key(self, job: SbomJob, key: str | None, now: float) -> str | None:
        """Why ``key`` does not open ``job``'s document (None when it does)."""
        if not job.key or job.document is None:
            return "the export is not finished"
        if not key:
            return "missing signature"
        if not hmac.compare_digest(key, job.key):
            return "signature does not match"
        if now > job.expires_at:
            return "the download link has expired"
        return None

    def jobs(self) -> list[SbomJob]:
        """Every job, oldest first."""
        with self._lock:
            return list(self._jobs.values())
