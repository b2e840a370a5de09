"""Trigger that waits in the triggerer until SBOM export jobs finish, polling with a growing interval."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from findings_provider.client import AsyncFindingsClient, FindingsApiError
from findings_provider.governance.sbom import (
    COMPLETED,
    DEFAULT_MAX_POLL_INTERVAL,
    DEFAULT_POLL_INTERVAL,
    FAILED,
    ExportJob,
    apply_state,
    give_up,
    next_wait,
    pending,
    poll_delays,
    stop_polling,
)
from findings_provider.hooks.findings_api import DEFAULT_CONN_ID, FindingsApiHook


def sbom_event(status: str, jobs: list[ExportJob], message: str) -> dict[str, Any]:
    """The one event payload the trigger yields (a plain JSON dict): ``status`` is ``done`` (every job finished,
    successfully or not), ``timeout`` (some were still running at the deadline: ``timeout`` jobs) or ``error`` (the
    status could not be read: the jobs still running are ``failed`` with the message); ``jobs`` every job as
    :meth:`ExportJob.as_dict` (never a download link)."""
    return {"status": status, "message": message, "jobs": [job.as_dict() for job in jobs]}


class SbomExportTrigger(BaseTrigger):
    """Poll ``GET .../sbom/export/{taskToken}`` of every job in progress until none is, or the deadline.

    The first round comes ``poll_interval`` seconds after the start, each next wait doubles up to
    ``max_poll_interval`` (the service rate-limits exports). Serialised: the jobs (repository, token, status; a job
    already finished, e.g. one that could not be started, is carried along untouched), the deadline as epoch seconds,
    the connection id (never the token), the deployment id and the two intervals. A triggerer restart begins the
    backoff again at ``poll_interval``. Transient API errors are retried by the client; a round that still fails is
    retried up to ``MAX_TRANSIENT_FAILURES`` times in a row. Cancelling only closes the HTTP client.

    :param jobs: the jobs, as :meth:`ExportJob.as_dict` dicts.
    :param deadline: epoch seconds after which the jobs still running are given up (``timeout``).
    :param findings_conn_id: the ``findings_api`` connection.
    :param deployment_id: the deployment's numeric id, when already known (saves a lookup).
    :param poll_interval: seconds before the first poll.
    :param max_poll_interval: the longest wait between two polls.
    """

    def __init__(
        self,
        *,
        jobs: list[dict[str, Any]],
        deadline: float,
        findings_conn_id: str = DEFAULT_CONN_ID,
        deployment_id: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        max_poll_interval: float = DEFAULT_MAX_POLL_INTERVAL,
    ) -> None:
        super().__init__()
        self.jobs = [ExportJob.from_dict(job).as_dict() for job in jobs]
        self.deadline = float(deadline)
        self.findings_conn_id = findings_conn_id
        self.deployment_id = str(deployment_id) if deployment_id else None
        self.poll_interval = float(poll_interval)
        self.max_poll_interval = float(max_poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "jobs": [dict(job) for job in self.jobs],
                "deadline": self.deadline,
                "findings_conn_id": self.findings_conn_id,
                "deployment_id": self.deployment_id,
                "poll_interval": self.poll_interval,
                "max_poll_interval": self.max_poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        jobs = [ExportJob.from_dict(job) for job in self.jobs]
        try:
            client = await FindingsApiHook(findings_conn_id=self.findings_conn_id).get_async_client()
        except Exception as exc:  # a missing or invalid connection: nothing to poll with
            message = f"cannot build the API client: {type(exc).__name__}: {exc}"
            give_up(jobs, FAILED, message)
            yield TriggerEvent(sbom_event("error", jobs, message))
            return
        if self.deployment_id and not client.deployment_id:
            client.deployment_id = self.deployment_id
        async with client:
            yield TriggerEvent(await self._wait(client, jobs))

    async def _wait(self, client: AsyncFindingsClient, jobs: list[ExportJob]) -> dict[str, Any]:
        delays = poll_delays(self.poll_interval, self.max_poll_interval)
        failures = 0
        while pending(jobs):
            waiting = ", ".join(str(job.repository_id) for job in pending(jobs))
            delay = next_wait(jobs, self.deadline - time.time(), delays)
            if delay is None:
                return sbom_event("timeout", jobs, f"gave up waiting at the deadline; still running: {waiting}")
            await asyncio.sleep(delay)
            try:
                for job in pending(jobs):
                    apply_state(job, await client.get_sbom_export(str(job.task_token)))
                failures = 0
            except FindingsApiError as exc:
                failures += 1
                message = stop_polling(jobs, exc, failures)
                if message is not None:
                    return sbom_event("error", jobs, message)
        completed = sum(1 for job in jobs if job.status == COMPLETED)
        return sbom_event("done", jobs, f"{len(jobs)} SBOM export(s) finished, {completed} completed")
