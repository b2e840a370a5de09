"""Operator that exports the SBOM (CycloneDX) of repositories into the warehouse."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from findings_provider.compat import AirflowException, AirflowSkipException, default_deferrable
from findings_provider.config.models import SbomConfig
from findings_provider.operators.base import FindingsBaseOperator, fail_fast
from findings_provider.values import as_bool, as_int_list

if TYPE_CHECKING:  # the export's code (the warehouse, the async client) is imported by a run, not by a DAG's parse
    from findings_provider.governance.sbom import ExportJob

#: The defaults of pipeline.yaml's ``dependency_inventory.sbom``: an argument left out takes its value from here.
_SBOM = SbomConfig()


class SbomExportOperator(FindingsBaseOperator):
    """Export the SBOM of each repository (CycloneDX JSON) and store it in the warehouse.

    For each repository it starts an export job, waits for the jobs (the first poll ``poll_interval`` seconds after
    the start, each next wait doubling up to ``max_poll_interval``: the service rate-limits exports), downloads each
    completed document from its short-lived link without the API token and stores it: one ``sboms`` row per
    repository (status, error, ``specVersion``, component count, the document) and the components of the newest
    completed one in ``sbom_components`` (name, version, purl, licences) for a licence report.

    Deferrable, it waits in the triggerer (:class:`~findings_provider.triggers.sbom.SbomExportTrigger`) and
    downloads when it resumes; otherwise it polls in the worker with the same backoff.

    Partial failures: each repository is on its own. An export that cannot be started, that the service reports
    failed, that is still running at ``timeout`` or whose download fails is stored with its error and logged as a
    warning; the task still succeeds and returns the failures. Only when every export failed does the task fail
    (retries allowed), naming the repositories and their errors.

    :param repository_ids: repository ids (templated: a list, or its JSON text); None or empty: every repository
        of the warehouse's ``dependency_repositories`` that has dependencies.
    :param cyclonedx_version: the CycloneDX version of the documents: ``1.4``, ``1.5``, ``1.6`` or ``1.7``
        (templated).
    :param enabled: False skips the task (templated; the ``dependency_inventory`` DAG's ``sbom`` param).
    :param deferrable: wait in the triggerer instead of holding a worker slot; by default as Airflow's
        ``[operators] default_deferrable`` says.
    :param poll_interval: seconds before the first poll of the jobs.
    :param max_poll_interval: the longest wait, in seconds, between two polls.
    :param timeout: seconds after the start when the jobs still running are given up (``timeout``).
    :param max_bytes: the largest document downloaded (None: the connection's ``max_response_bytes``).
    :return: ``{"repositories": [ids], "completed": [ids], "failed": {id: "status: error"}, "components": n}``.
    """

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "repository_ids", "cyclonedx_version",
                                      "enabled")
    lineage_reads = ("sbom_export_status",)
    lineage_writes = ("sboms", "sbom_components")
    ui_color = "#eef7e8"

    def __init__(
        self,
        *,
        repository_ids: Any = None,
        cyclonedx_version: str = _SBOM.cyclonedx_version,
        enabled: Any = True,
        deferrable: bool | None = None,
        poll_interval: float = _SBOM.poll_interval,
        max_poll_interval: float = _SBOM.max_poll_interval,
        timeout: float = _SBOM.timeout,
        max_bytes: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.repository_ids = repository_ids
        self.cyclonedx_version = cyclonedx_version
        self.enabled = enabled
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.poll_interval = float(poll_interval)
        self.max_poll_interval = float(max_poll_interval)
        self.export_timeout = float(timeout)  # not ``timeout``: BaseOperator's is an execution timeout
        self.max_bytes = max_bytes

    def run(self, context: Any) -> Any:
        from findings_provider.governance.sbom import (
            pending,
            repositories_with_dependencies,
            start_exports,
            wait_for_exports,
        )
        from findings_provider.triggers.sbom import SbomExportTrigger

        if not as_bool(self.enabled, "enabled"):
            raise AirflowSkipException("SBOM export is switched off (the sbom param, or dependency_inventory.sbom)")
        ids = as_int_list(self.repository_ids, "repository_ids")
        if not ids:
            ids = repositories_with_dependencies(self.warehouse_hook.get_warehouse())
            self.log.info("exporting the SBOM of every repository with dependencies: %d", len(ids))
        if not ids:
            self.log.info("no repository to export an SBOM of")
            return self._finish([])
        client = self.api_hook.client
        # str(): rendered as a native object (the DAGs' render_template_as_native_obj), "1.6" would be a float
        jobs = start_exports(client, ids, cyclonedx_version=str(self.cyclonedx_version))
        deadline = time.time() + self.export_timeout
        if pending(jobs) and self.deferrable:
            self.defer(
                trigger=SbomExportTrigger(
                    jobs=[job.as_dict() for job in jobs],
                    deadline=deadline,
                    findings_conn_id=self.findings_conn_id,
                    deployment_id=client.deployment_id,
                    poll_interval=self.poll_interval,
                    max_poll_interval=self.max_poll_interval,
                ),
                method_name="execute_complete",
                # a safety net only: the trigger enforces the deadline itself and says why
                timeout=timedelta(seconds=self.export_timeout + self.max_poll_interval + 60),
            )
        wait_for_exports(client, jobs, deadline=deadline, poll_interval=self.poll_interval,
                         max_poll_interval=self.max_poll_interval)
        return self._finish(jobs)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """Download and store the jobs the trigger waited for (each completed one's link is read again)."""
        from findings_provider.governance.sbom import ExportJob

        self.warehouse_hook.run_id = context.get("run_id")
        if event.get("status") != "done":
            self.log.warning("SBOM export wait ended with %s: %s", event.get("status"), event.get("message"))
        try:
            return self._finish([ExportJob.from_dict(job) for job in event.get("jobs") or ()])
        except Exception as exc:
            mapped = fail_fast(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        finally:
            self.api_hook.close()

    def _finish(self, jobs: list[ExportJob]) -> dict[str, Any]:
        from findings_provider.governance.sbom import download_and_store, summary

        components = download_and_store(self.api_hook.client, self.warehouse_hook.get_warehouse(), jobs,
                                        max_bytes=self.max_bytes) if jobs else {}
        result = summary(jobs, components)
        for repository_id, error in result["failed"].items():
            self.log.warning("SBOM export of repository %s did not complete: %s", repository_id, error)
        self.log.info("SBOM export: %d of %d completed, %d component(s) stored", len(result["completed"]),
                      len(jobs), result["components"])
        if jobs and not result["completed"]:
            failures = "; ".join(f"{rid}: {error}" for rid, error in result["failed"].items())
            raise AirflowException(f"every SBOM export failed ({len(jobs)} repositories): {failures}")
        return result
