"""The Airflow plugin of the dashboard (declared under ``plugins`` in the provider info): the FastAPI app on the
API server, a "Findings" entry in the navigation, and a "Findings" tab on the pipeline's DAGs."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from findings_provider.dashboard.links import URL_PREFIX


def _app() -> object:
    from findings_provider.dashboard.app import create_app

    return create_app()


class FindingsDashboardPlugin(AirflowPlugin):
    """Findings dashboard: overview, findings, scans, triage and tickets, policy proposals, inventory, reports."""

    name = "findings_dashboard"
    fastapi_apps = [{"app": _app(), "url_prefix": URL_PREFIX, "name": "Findings dashboard"}]
    external_views = [
        {"name": "Findings", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav", "category": "browse",
         "url_route": "findings"},
        {"name": "Findings dashboard", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "dag",
         "url_route": "findings-dag"},
    ]
