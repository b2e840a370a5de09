"""Extra links of the provider's operators (buttons on the task page of the Airflow UI)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


def scan_url(details: Any) -> str | None:
    """The most useful URL of a scan: its CI job, else its repository (``ScanDetails`` or its meta dict)."""
    meta = getattr(details, "meta", None)
    if meta is None:
        return None
    for key in ("ci_job_url", "repo_url"):
        value = getattr(meta, key, None)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            return value
    return None


class ScanLink(BaseOperatorLink):
    """Link to the CI job of the scan a task waits for (or its repository when the job URL is unknown).

    The task pushes the URL to XCom (``ScanLink.persist``) before it starts waiting, so the link works even
    when the wait fails.
    """

    name = "Scan"

    @classmethod
    def persist(cls, context: Any, url: str | None) -> None:
        """Store the link target of this task instance (nothing when there is no URL)."""
        if url:
            context["ti"].xcom_push(key=cls().xcom_key, value=url)

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        value = XCom.get_value(ti_key=ti_key, key=self.xcom_key)
        return value if isinstance(value, str) else ""
