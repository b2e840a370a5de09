"""SBOM export: start a CycloneDX export per repository, wait for the jobs with a growing interval, store them.

The service generates an SBOM asynchronously (``POST .../sbom/export`` gives a task token, ``GET
.../sbom/export/{token}`` its status) and rate-limits exports: the jobs are polled every ``poll_interval`` seconds
at first, the interval doubling up to ``max_poll_interval`` (:func:`poll_delays`), never in a tight loop. A finished
job's document is fetched from its short-lived ``downloadUrl`` without the API token (``download_sbom``).

Each repository is on its own: an export that cannot be started, that the service reports as failed, that is not
finished at the deadline or whose document cannot be downloaded is stored as such (``sboms.status`` ``failed`` or
``timeout``, with ``error``) and the others go on. :func:`summary` is what the operator returns.

The waiting is here twice, in the same steps: :func:`wait_for_exports` (synchronous, in a worker) and the
triggerer's :class:`findings_provider.triggers.sbom.SbomExportTrigger` (asynchronous); both use
:func:`poll_delays`, :func:`apply_state` and :func:`give_up`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select

from findings_provider.client import FindingsApiError
from findings_provider.client.vocabulary import SbomExportStatus, UnknownSbomExportStatusError
from findings_provider.config.models import SbomConfig
from findings_provider.governance.common import model_json
from findings_provider.warehouse.schema import dependency_repositories, sbom_components, sboms
from findings_provider.warehouse.timestamps import utc_now_text

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient
    from findings_provider.client.models import SbomExportState
    from findings_provider.warehouse import Warehouse

log = logging.getLogger(__name__)

#: Job statuses as stored (``sboms.status``); ``in_progress`` is never stored.
IN_PROGRESS, COMPLETED, FAILED, TIMEOUT = "in_progress", "completed", "failed", "timeout"
#: Seconds before the first poll and the most between two polls, unless told otherwise: the defaults of
#: pipeline.yaml's ``dependency_inventory.sbom`` (``SbomConfig``).
DEFAULT_POLL_INTERVAL = SbomConfig.model_fields["poll_interval"].default
DEFAULT_MAX_POLL_INTERVAL = SbomConfig.model_fields["max_poll_interval"].default
#: Consecutive polling rounds that may fail with an error a later poll could fix before the wait gives up.
MAX_TRANSIENT_FAILURES = 5
#: ``sboms`` rows kept per repository (older ones, with their documents, are deleted when a new one is stored).
SBOMS_KEPT = 10


@dataclass
class ExportJob:
    """One repository's export. ``download_url`` is kept in memory only (a link carrying its own key: it is never
    serialised into a trigger or an event; after a deferral the state is read again for a fresh one)."""

    repository_id: int
    task_token: str | None = None
    status: str = IN_PROGRESS
    error: str | None = None
    download_url: str | None = field(default=None, repr=False)

    @property
    def pending(self) -> bool:
        return self.status == IN_PROGRESS

    def as_dict(self) -> dict[str, Any]:
        """The job as plain JSON (without the download link)."""
        return {"repository_id": self.repository_id, "task_token": self.task_token, "status": self.status,
                "error": self.error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExportJob:
        return cls(int(data["repository_id"]), data.get("task_token"), data.get("status") or IN_PROGRESS,
                   data.get("error"))


def poll_delays(initial: float = DEFAULT_POLL_INTERVAL, maximum: float = DEFAULT_MAX_POLL_INTERVAL) -> Iterator[float]:
    """The waits between polls: ``initial``, then doubling up to ``maximum`` (5, 10, 20, 40, 60, 60, ...)."""
    delay = max(float(initial), 0.0)
    maximum = max(float(maximum), delay)
    while True:
        yield delay
        delay = min(delay * 2 if delay else maximum, maximum)


def pending(jobs: Iterable[ExportJob]) -> list[ExportJob]:
    return [job for job in jobs if job.pending]


def apply_state(job: ExportJob, state: SbomExportState) -> None:
    """Move ``job`` on from one poll's answer: completed (with its link), failed (with the service's message), or
    still in progress. A status this client does not know fails that job, naming it."""
    try:
        status = state.export_status
    except UnknownSbomExportStatusError as exc:
        job.status, job.error = FAILED, str(exc)
        return
    if status is SbomExportStatus.COMPLETED:
        job.status, job.download_url = COMPLETED, state.downloadUrl
    elif status is SbomExportStatus.FAILED:
        job.status, job.error = FAILED, state.errorMessage or "the service reported the export as failed"


def give_up(jobs: Iterable[ExportJob], status: str, error: str) -> None:
    """Mark every job still in progress ``status`` (``timeout`` or ``failed``) with ``error``."""
    for job in pending(jobs):
        job.status, job.error = status, error


def start_exports(client: FindingsClient, repository_ids: Iterable[int], *, cyclonedx_version: str) -> list[ExportJob]:
    """Start one export per repository; one that cannot be started is a failed job (the others still start)."""
    jobs = []
    for repository_id in repository_ids:
        job = ExportJob(int(repository_id))
        try:
            job.task_token = client.start_sbom_export(repository_id, cyclonedx_version=cyclonedx_version).taskToken
            if not job.task_token:
                job.status, job.error = FAILED, "the service started the export without a taskToken"
        except FindingsApiError as exc:
            job.status, job.error = FAILED, f"could not start the export: {type(exc).__name__}: {exc}"
        if job.pending:
            log.info("SBOM export of repository %s started (task %s)", repository_id, job.task_token)
        else:
            log.warning("SBOM export of repository %s: %s", repository_id, job.error)
        jobs.append(job)
    return jobs


def wait_for_exports(
    client: FindingsClient,
    jobs: list[ExportJob],
    *,
    deadline: float,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    max_poll_interval: float = DEFAULT_MAX_POLL_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> list[ExportJob]:
    """Poll the jobs in progress (waiting :func:`poll_delays` between rounds) until none is, or ``deadline``
    (epoch seconds): those still running then are ``timeout``. A poll failing with an error no retry can fix, or
    ``MAX_TRANSIENT_FAILURES`` rounds in a row, fails the jobs still in progress with its message."""
    delays = poll_delays(poll_interval, max_poll_interval)
    failures = 0
    while pending(jobs):
        delay = next_wait(jobs, deadline - clock(), delays)
        if delay is None:
            break
        sleep(delay)
        try:
            for job in pending(jobs):
                apply_state(job, client.get_sbom_export(str(job.task_token)))
            failures = 0
        except FindingsApiError as exc:
            failures += 1
            if stop_polling(jobs, exc, failures) is not None:
                break
    return jobs


def next_wait(jobs: list[ExportJob], remaining: float, delays: Iterator[float]) -> float | None:
    """The wait before the next round of status reads (at most ``remaining`` seconds to the deadline), or None
    when the deadline has passed: the jobs still in progress are then ``timeout``. The synchronous loop and
    the trigger's share it."""
    if remaining <= 0:
        give_up(jobs, TIMEOUT, "not finished at the deadline: gave up waiting")
        return None
    delay = min(next(delays), remaining)
    log.info("%d of %d SBOM export(s) in progress; next check in %.3gs", len(pending(jobs)), len(jobs), delay)
    return delay


def stop_polling(jobs: list[ExportJob], exc: FindingsApiError, failures: int) -> str | None:
    """After a round whose status read failed (the ``failures``-th in a row): the message when polling stops
    (an error no retry can fix, or ``MAX_TRANSIENT_FAILURES`` in a row; the jobs in progress fail with it), or
    None to poll again."""
    message = f"cannot read the export status: {type(exc).__name__}: {exc}"
    if not exc.retryable_by_task or failures >= MAX_TRANSIENT_FAILURES:
        give_up(jobs, FAILED, message)
        return message
    log.warning("%s (%d in a row); polling again", message, failures)
    return None


# --- download and storage -------------------------------------------------------------------------------------


def _licences(component: dict[str, Any]) -> str | None:
    """A component's licences (ids, names or expressions), ``, ``-joined like ``dependencies.license``."""
    names = []
    for entry in component.get("licenses") or ():
        if not isinstance(entry, dict):
            continue
        raw = entry.get("license")
        lic: dict[str, Any] = raw if isinstance(raw, dict) else {}
        name = lic.get("id") or lic.get("name") or entry.get("expression")
        if name and str(name) not in names:
            names.append(str(name))
    return ", ".join(names) or None


def iter_components(components: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Every component of a CycloneDX component list, nested ones (a component's ``components``) included."""
    for component in components:
        if isinstance(component, dict):
            yield component
            yield from iter_components(component.get("components") or ())


def component_rows(repository_id: int, sbom_id: int, document: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``sbom_components`` rows of a document."""
    return [
        {"repository_id": repository_id, "sbom_id": sbom_id, "name": c.get("name"), "version": c.get("version"),
         "purl": c.get("purl"), "licences": _licences(c)}
        for c in iter_components(document.get("components") or ())
    ]


def store_export(warehouse: Warehouse, job: ExportJob, document: dict[str, Any] | None = None) -> int:
    """Store one export (its document when completed) in ``sboms`` and, when completed, replace the repository's
    ``sbom_components``; keep the newest ``SBOMS_KEPT`` exports of the repository. One transaction; returns the
    count of components stored."""
    components = list(iter_components((document or {}).get("components") or ())) if document else []
    with warehouse.engine.begin() as conn:
        result = conn.execute(insert(sboms).values(
            repository_id=job.repository_id, task_token=job.task_token, status=job.status, error=job.error,
            spec_version=(document or {}).get("specVersion"), component_count=len(components) if document else None,
            document=document, run_id=warehouse.run_id, exported_at=utc_now_text(),
        ))
        inserted = result.inserted_primary_key
        if inserted is None:  # pragma: no cover - every dialect the warehouse supports returns it
            raise RuntimeError("the sboms insert returned no id")
        sbom_id = int(inserted[0])
        rows = []
        if document is not None:
            rows = component_rows(job.repository_id, sbom_id, document)
            conn.execute(delete(sbom_components).where(sbom_components.c.repository_id == job.repository_id))
            if rows:
                conn.execute(insert(sbom_components), rows)
        oldest_dropped = conn.execute(
            select(sboms.c.id).where(sboms.c.repository_id == job.repository_id)
            .order_by(sboms.c.id.desc()).offset(SBOMS_KEPT).limit(1)
        ).scalar()
        if oldest_dropped is not None:
            conn.execute(delete(sboms).where(sboms.c.repository_id == job.repository_id, sboms.c.id <= oldest_dropped))
    return len(rows)


def download_and_store(
    client: FindingsClient, warehouse: Warehouse, jobs: list[ExportJob], *, max_bytes: int | None = None
) -> dict[int, int]:
    """Download each completed job's document (without the API token) and store every job; a download that fails
    fails that job only. Returns the components stored per completed repository."""
    components: dict[int, int] = {}
    for job in jobs:
        document = None
        if job.status == COMPLETED:
            try:
                if not job.download_url:  # after a deferral: the link was not carried over, read it again
                    job.download_url = client.get_sbom_export(str(job.task_token)).downloadUrl
                if not job.download_url:
                    raise ValueError("the completed export has no downloadUrl")
                document = model_json(client.download_sbom(job.download_url, max_bytes=max_bytes))
            except (FindingsApiError, ValueError) as exc:
                job.status, job.error = FAILED, f"could not download the document: {type(exc).__name__}: {exc}"
                log.warning("SBOM export of repository %s: %s", job.repository_id, job.error)
        count = store_export(warehouse, job, document)
        if document is not None:
            components[job.repository_id] = count
            log.info("SBOM of repository %s stored: %d component(s)", job.repository_id, count)
    return components


def summary(jobs: list[ExportJob], components: dict[int, int]) -> dict[str, Any]:
    """The operator's return value: ``repositories`` (ids asked for), ``completed`` (ids), ``failed`` (``{id:
    error}``, timeouts included, keys as strings for XCom), ``components`` (total stored)."""
    return {
        "repositories": [job.repository_id for job in jobs],
        "completed": [job.repository_id for job in jobs if job.status == COMPLETED],
        "failed": {str(job.repository_id): f"{job.status}: {job.error}" for job in jobs if job.status != COMPLETED},
        "components": sum(components.values()),
    }


def repositories_with_dependencies(warehouse: Warehouse) -> list[int]:
    """Ids of the repositories of ``dependency_repositories`` that have dependencies, in id order."""
    r = dependency_repositories.c
    with warehouse.engine.connect() as conn:
        return [int(i) for i in conn.execute(select(r.id).where(r.num_dependencies > 0).order_by(r.id)).scalars()]


def sbom_licence_table(warehouse: Warehouse) -> Any:
    """Licences of the stored SBOMs' components (pandas): components and repositories per licence, ``(unknown)``
    for a component without one (the licence report's counting, :func:`.dependency_inventory.per_licence`, over
    the SBOM components only)."""
    from findings_provider.governance.dependency_inventory import licence_items, per_licence

    return per_licence(licence_items(warehouse, inventory=False), "components").drop(columns="source")
