"""Sensor that waits for one scan (or a list of scans) to finish."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator

from findings_provider.client import FindingsApiError, ScanStatus, UnknownScanStatusError
from findings_provider.compat import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    default_deferrable,
)
from findings_provider.hooks.findings_api import DEFAULT_CONN_ID, FindingsApiHook
from findings_provider.operators.base import fail_fast
from findings_provider.operators.links import ScanLink, scan_url


class ScanCompletionSensor(BaseSensorOperator):
    """Wait until a scan (or every scan of a list) has finished; fail clearly when one did not succeed.

    It checks once before deferring (an already finished scan never reaches the triggerer), pushes the
    scan's CI job URL for the "Scan" link, then defers to
    :class:`~findings_provider.triggers.scan.ScanStatusTrigger`, which enforces ``timeout`` itself. Not
    deferrable, it pokes in the worker like any sensor.

    Outcomes: ``SCAN_STATUS_COMPLETED`` succeeds; ``SCAN_STATUS_ERROR``, ``SCAN_STATUS_NEVER_FINISHED`` and
    ``SCAN_STATUS_CANCELLED`` fail the task without retries (or only log a warning with
    ``fail_on_failure=False``); ``SCAN_STATUS_RUNNING``/``SCAN_STATUS_PENDING`` keep waiting; any other value
    fails naming it. Returns (XCom) ``{"scan_ids": [...], "statuses": {scan_id: status}}``.

    :param scan_id: the scan id (templated), or a list of ids.
    :param findings_conn_id: the ``findings_api`` connection.
    :param deferrable: wait in the triggerer instead of holding a worker slot; by default as Airflow's
        ``[operators] default_deferrable`` says (the ``scan_monitoring`` DAG passes True).
    :param fail_on_failure: fail the task when a scan finished unsuccessfully (default); with False the
        sensor succeeds and leaves the alerting to a later task.
    :param poke_interval: seconds between status checks (in the triggerer when deferred).
    :param timeout: seconds before the wait is given up (``AirflowSensorTimeout``).
    """

    template_fields: Sequence[str] = ("scan_id", "findings_conn_id")
    operator_extra_links = (ScanLink(),)
    ui_color = "#e8f4fd"

    def __init__(
        self,
        *,
        scan_id: str | int | list[str],
        findings_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool | None = None,
        fail_on_failure: bool = True,
        poke_interval: timedelta | float = 30,
        timeout: timedelta | float = 7200,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.scan_id = scan_id
        self.findings_conn_id = findings_conn_id
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.fail_on_failure = fail_on_failure

    @cached_property
    def hook(self) -> FindingsApiHook:
        return FindingsApiHook(findings_conn_id=self.findings_conn_id)

    @property
    def scan_ids(self) -> list[str]:
        raw = self.scan_id if isinstance(self.scan_id, (list, tuple)) else [self.scan_id]
        ids = [str(s).strip() for s in raw if str(s).strip()]
        if not ids:
            raise AirflowFailException("scan_id is empty: give the id of the scan to wait for")
        return ids

    # -- checking -------------------------------------------------------------------------------------------

    def _statuses(self, context: Any | None = None) -> dict[str, ScanStatus]:
        """Read every scan's status once (pushing the link of the first one); map errors for Airflow."""
        statuses: dict[str, ScanStatus] = {}
        try:
            for scan_id in self.scan_ids:
                details = self.hook.client.get_scan(scan_id)
                if context is not None and not statuses:
                    ScanLink.persist(context, scan_url(details))
                statuses[scan_id] = details.status
        except UnknownScanStatusError as exc:
            raise AirflowFailException(f"scan {scan_id}: {exc}") from exc
        except FindingsApiError as exc:
            raise fail_fast(exc) from exc
        return statuses

    def _judge(self, statuses: dict[str, ScanStatus]) -> bool:
        """True when every scan is finished; raise (or warn) when one finished unsuccessfully."""
        for scan_id, status in statuses.items():
            if status.is_failure:
                self._failed(f"scan {scan_id} finished unsuccessfully: {status.value}")
                return True
        done = all(s.is_terminal for s in statuses.values())
        if not done:
            running = {k: v.value for k, v in statuses.items() if not v.is_terminal}
            self.log.info("still waiting for %d scan(s): %s", len(running), running)
        return done

    def _failed(self, message: str) -> None:
        if self.fail_on_failure:
            raise AirflowFailException(message)
        self.log.warning("%s (not failing: fail_on_failure=False)", message)

    def _result(self, statuses: dict[str, Any]) -> dict[str, Any]:
        values = {k: (v.value if isinstance(v, ScanStatus) else v) for k, v in statuses.items()}
        self.log.info("scan(s) finished: %s", values)
        return {"scan_ids": self.scan_ids, "statuses": values}

    def poke(self, context: Any) -> Any:
        statuses = self._statuses()
        if not self._judge(statuses):
            return False
        from airflow.sdk import PokeReturnValue

        return PokeReturnValue(is_done=True, xcom_value=self._result(statuses))

    # -- execution ------------------------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        try:
            statuses = self._statuses(context)  # checks once (and pushes the link) before any waiting
            if self._judge(statuses):
                return self._result(statuses)
            if not self.deferrable:
                return super().execute(context)
            from findings_provider.triggers.scan import ScanStatusTrigger  # the async client: not at a DAG's parse

            self.defer(
                trigger=ScanStatusTrigger(
                    scan_ids=self.scan_ids,
                    deadline=time.time() + self.timeout,
                    findings_conn_id=self.findings_conn_id,
                    deployment_id=self.hook.client.deployment_id,
                    poll_interval=self.poke_interval,
                ),
                method_name="execute_complete",
                # a safety net only: the trigger enforces the deadline itself and says why
                timeout=timedelta(seconds=self.timeout + 2 * self.poke_interval + 60),
            )
        finally:
            self.hook.close()

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """Turn the trigger's event into the task's outcome (a clear message on anything but success)."""
        status = event.get("status")
        message = event.get("message") or "no message"
        if status == "success":
            return self._result(event.get("statuses") or {})
        if status == "failed":
            self._failed(message)
            return self._result(event.get("statuses") or {})
        if status == "timeout":
            raise AirflowSensorTimeout(f"ScanCompletionSensor timed out after {self.timeout:.0f}s: {message}")
        if status == "error" and event.get("retryable"):
            raise AirflowException(f"ScanCompletionSensor could not read scan status: {message}")
        raise AirflowFailException(f"ScanCompletionSensor failed: {message}")
