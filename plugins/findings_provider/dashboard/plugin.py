"""The Airflow plugin of the dashboard (declared under ``plugins`` in the provider info): the FastAPI app on the
API server, and the React app in Airflow's UI: a "Findings" entry in the navigation, a tab on every DAG and run,
and a widget on Airflow's home page."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from findings_provider.dashboard.links import APP_NAMES, NAV_ROUTE, URL_PREFIX, bundle_path


def _app() -> object:
    from findings_provider.dashboard.app import create_app

    return create_app()


class FindingsDashboardPlugin(AirflowPlugin):
    """Findings dashboard: overview, findings, repositories, scans, triage and tickets, policies, inventory,
    reports."""

    name = "findings_dashboard"
    fastapi_apps = [{"app": _app(), "url_prefix": URL_PREFIX, "name": "Findings dashboard"}]
    react_apps = [
        {"name": APP_NAMES["nav"], "bundle_url": bundle_path(), "destination": "nav", "category": "browse",
         "url_route": NAV_ROUTE},
        {"name": APP_NAMES["dag"], "bundle_url": bundle_path(), "destination": "dag", "url_route": "findings-dag"},
        {"name": APP_NAMES["dag_run"], "bundle_url": bundle_path(), "destination": "dag_run",
         "url_route": "findings-run"},
        {"name": APP_NAMES["dashboard"], "bundle_url": bundle_path(), "destination": "dashboard"},
    ]
