"""Trigger that waits in the triggerer until one or more scans finish."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from findings_provider.client import AsyncFindingsClient, FindingsApiError, ScanStatus, UnknownScanStatusError
from findings_provider.hooks.findings_api import DEFAULT_CONN_ID, FindingsApiHook

#: Consecutive polls that may fail with an error a later poll could fix before the trigger gives up.
MAX_TRANSIENT_FAILURES = 5


def scan_event(
    status: str,
    scan_ids: list[str],
    message: str,
    *,
    scan_id: str | None = None,
    scan_status: str | None = None,
    statuses: dict[str, str] | None = None,
    retryable: bool = False,
) -> dict[str, Any]:
    """The one event payload the trigger yields (a plain JSON dict).

    ``status`` is ``success``, ``failed`` (a scan ended unsuccessfully), ``error`` (the status could not be
    read or is unknown) or ``timeout``; ``scan_id``/``scan_status`` name the scan the event is about.
    """
    return {
        "status": status,
        "scan_id": scan_id if scan_id is not None else (scan_ids[0] if scan_ids else None),
        "scan_ids": scan_ids,
        "scan_status": scan_status,
        "statuses": statuses or {},
        "message": message,
        "retryable": retryable,
    }


class ScanStatusTrigger(BaseTrigger):
    """Poll ``GET .../scan/{scanId}`` until every scan is finished, the first failure, or the deadline.

    Everything needed to resume after a triggerer restart is serialised: the connection id (never the
    token), the deployment id, the scan ids, the poll interval and the deadline as absolute epoch seconds.
    Transient API errors are retried by the client; a poll that still fails is retried up to
    ``MAX_TRANSIENT_FAILURES`` times in a row, an error no retry can fix ends the wait with an ``error``
    event. Cancelling the trigger only closes its HTTP client: it never writes anything.

    :param scan_ids: the scan id, or a list of them; the wait ends when all are finished.
    :param deadline: epoch seconds after which the trigger yields a ``timeout`` event.
    :param findings_conn_id: the ``findings_api`` connection.
    :param deployment_id: the deployment's numeric id, when already known (saves a lookup).
    :param poll_interval: seconds between status checks.
    """

    def __init__(
        self,
        *,
        scan_ids: str | list[str],
        deadline: float,
        findings_conn_id: str = DEFAULT_CONN_ID,
        deployment_id: str | None = None,
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        self.scan_ids = [str(s) for s in ([scan_ids] if isinstance(scan_ids, (str, int)) else scan_ids)]
        self.deadline = float(deadline)
        self.findings_conn_id = findings_conn_id
        self.deployment_id = str(deployment_id) if deployment_id else None
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "scan_ids": list(self.scan_ids),
                "deadline": self.deadline,
                "findings_conn_id": self.findings_conn_id,
                "deployment_id": self.deployment_id,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            client = await FindingsApiHook(findings_conn_id=self.findings_conn_id).get_async_client()
        except Exception as exc:  # a missing or invalid connection: nothing to poll with
            yield TriggerEvent(
                scan_event("error", self.scan_ids, f"cannot build the API client: {type(exc).__name__}: {exc}")
            )
            return
        if self.deployment_id and not client.deployment_id:
            client.deployment_id = self.deployment_id
        async with client:
            yield TriggerEvent(await self._wait(client))

    async def _wait(self, client: AsyncFindingsClient) -> dict[str, Any]:
        pending = list(self.scan_ids)
        statuses: dict[str, str] = {}
        failures = 0
        while True:
            try:
                for scan_id in list(pending):
                    status = (await client.get_scan(scan_id)).status
                    statuses[scan_id] = status.value
                    if status.is_failure:
                        return scan_event(
                            "failed",
                            self.scan_ids,
                            f"scan {scan_id} finished unsuccessfully: {status.value}",
                            scan_id=scan_id,
                            scan_status=status.value,
                            statuses=statuses,
                        )
                    if status is ScanStatus.COMPLETED:
                        pending.remove(scan_id)
                failures = 0
            except UnknownScanStatusError as exc:
                return scan_event(
                    "error",
                    self.scan_ids,
                    f"scan {scan_id}: {exc}",
                    scan_id=scan_id,
                    scan_status=str(exc.value),
                    statuses=statuses,
                )
            except FindingsApiError as exc:
                failures += 1
                if not exc.retryable_by_task or failures >= MAX_TRANSIENT_FAILURES:
                    return scan_event(
                        "error",
                        self.scan_ids,
                        f"cannot read the status of scan {scan_id}: {type(exc).__name__}: {exc}",
                        scan_id=scan_id,
                        statuses=statuses,
                        retryable=exc.retryable_by_task,
                    )
                self.log.warning("polling scan %s failed (%d in a row), polling again: %s", scan_id, failures, exc)
            if not pending:
                return scan_event(
                    "success",
                    self.scan_ids,
                    f"{len(self.scan_ids)} scan(s) completed: {', '.join(self.scan_ids)}",
                    scan_status=ScanStatus.COMPLETED.value,
                    statuses=statuses,
                )
            remaining = self.deadline - time.time()
            if remaining <= 0:
                waiting = ", ".join(f"{s} ({statuses.get(s, 'unknown')})" for s in pending)
                return scan_event(
                    "timeout",
                    self.scan_ids,
                    f"gave up waiting at the deadline; still not finished: {waiting}",
                    scan_id=pending[0],
                    scan_status=statuses.get(pending[0]),
                    statuses=statuses,
                )
            self.log.info("%d of %d scan(s) still running; next check in %.0fs", len(pending),
                          len(self.scan_ids), min(self.poll_interval, remaining))
            await asyncio.sleep(min(self.poll_interval, remaining))
