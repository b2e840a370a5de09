"""Extra links of the provider's operators (buttons on the task page of the Airflow UI)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

from findings_provider.text import http_url

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


def scan_url(details: Any) -> str | None:
    """The most useful URL of a scan: its CI job, else its repository (``ScanDetails`` or its meta dict)."""
    meta = getattr(details, "meta", None)
    if meta is None:
        return None
    for key in ("ci_job_url", "repo_url"):
        value = http_url(getattr(meta, key, None))
        if value:
            return value
    return None


class UrlLink(BaseOperatorLink):
    """A link whose target the task stores in XCom (``persist``) under the link's key: what Airflow's UI reads."""

    name = "Link"

    @classmethod
    def persist(cls, context: Any, url: str | None) -> None:
        """Store the link target of this task instance (nothing when there is no URL, or no task instance: an
        ``execute`` called outside a run)."""
        ti = context.get("ti")
        if url and ti is not None:
            ti.xcom_push(key=cls().xcom_key, value=url)

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        value = XCom.get_value(ti_key=ti_key, key=self.xcom_key)
        return value if isinstance(value, str) else ""


class ScanLink(UrlLink):
    """Link to the CI job of the scan a task waits for (or its repository when the job URL is unknown).

    The task pushes the URL to XCom (``ScanLink.persist``) before it starts waiting, so the link works even
    when the wait fails.
    """

    name = "Scan"


class DashboardLink(UrlLink):
    """A page of the findings dashboard about this run; ``FindingsBaseOperator`` stores every such link of its
    operator when the task starts, before any request or wait, so the link is there whatever happens next."""

    #: The dashboard page (``dashboard.links.PAGES`` or ``DETAIL_VIEWS``).
    page = ""
    #: Extra query parameters; ``run_id`` is added.
    query: dict[str, str] = {}

    def target(self, context: Any) -> str:
        from findings_provider.dashboard.links import dashboard_url

        run_id = context.get("run_id") or getattr(context.get("ti"), "run_id", None)
        query = {**self.query, **({"run_id": str(run_id)} if run_id else {})}
        return dashboard_url(self.page, query)


class FindingsTriagedLink(DashboardLink):
    """The findings this triage run triaged (or planned to), in the dashboard's findings table."""

    name = "Findings triaged"
    page = "findings"
    query = {"touched": "triage"}


class FindingsTicketedLink(DashboardLink):
    """The findings this ticket run created tickets for, in the dashboard's findings table."""

    name = "Findings ticketed"
    page = "findings"
    query = {"touched": "ticket"}


class TicketsCreatedLink(DashboardLink):
    """The tickets this run created (their links in the tracker), on the dashboard's view of the run."""

    name = "Tickets created"
    page = "run"


class RulesChangedLink(DashboardLink):
    """The rule mode changes this run sent, on the dashboard's view of the run."""

    name = "Rules changed"
    page = "run"


class SummaryReportLink(DashboardLink):
    """This run's findings summary report, stored in the warehouse."""

    name = "Findings report"
    page = "reports"
    query = {"name": "findings_summary"}


class PolicyReportLink(DashboardLink):
    """This run's policy tuning report (the proposals), stored in the warehouse."""

    name = "Policy report"
    page = "reports"
    query = {"name": "policy_tuning"}


class InventoryReportLink(DashboardLink):
    """This run's dependency inventory report, stored in the warehouse."""

    name = "Inventory report"
    page = "reports"
    query = {"name": "dependency_inventory"}
