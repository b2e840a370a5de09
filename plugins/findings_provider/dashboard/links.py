"""Where the dashboard lives: one definition of its paths and names, for the plugin, alerts and operator links.

The dashboard is a React app rendered in Airflow's own UI (``/plugin/findings``); its data comes from the
plugin's FastAPI app under ``URL_PREFIX``. A page of the app is chosen by the ``view`` query parameter.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

#: Path of the dashboard's FastAPI app (its JSON, CSV export, stored reports and bundle) on the API server.
URL_PREFIX = "/findings-dashboard"
#: Route of the dashboard in Airflow's UI: ``{base}/plugin/{NAV_ROUTE}``.
NAV_ROUTE = "findings"
#: The app's pages (``view`` -> navigation title), in navigation order ("" is the overview).
PAGES = {
    "": "Overview",
    "findings": "Findings",
    "repositories": "Repositories",
    "scans": "Scans",
    "activity": "Triage and tickets",
    "policies": "Policies",
    "inventory": "Inventory",
    "reports": "Reports",
}
#: Views reached from a page rather than from the navigation: one run, one repository.
DETAIL_VIEWS = ("run", "repository")
#: The React apps the plugin registers (Airflow keys a loaded component by its name: the bundle registers the
#: same names, ``static/findings-dashboard.js``): where each is shown -> its name in Airflow's UI.
APP_NAMES = {
    "nav": "Findings",
    "dag": "Findings of this DAG",
    "dag_run": "What this run did",
    "dashboard": "Findings programme",
}


def airflow_base() -> str:
    """Airflow's ``[api] base_url`` without its trailing slash ("" outside Airflow or when unset)."""
    try:
        from airflow.configuration import conf

        return (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:  # outside Airflow (unit tests, scripts): paths alone
        return ""


def bundle_path() -> str:
    """The absolute path of the React app's bundle, under Airflow's base path when it has one."""
    return f"{urlsplit(airflow_base()).path.rstrip('/')}{URL_PREFIX}/static/findings-dashboard.js"


def dashboard_url(page: str = "", query: dict[str, str] | None = None) -> str:
    """The URL of a dashboard page (``PAGES`` or ``DETAIL_VIEWS``) with its query: absolute when Airflow's
    ``[api] base_url`` is set, else its path."""
    if page not in PAGES and page not in DETAIL_VIEWS:
        raise ValueError(f"page = {page!r}: expected one of {', '.join(repr(p) for p in (*PAGES, *DETAIL_VIEWS))}")
    params = {**({"view": page} if page else {}), **(query or {})}
    return f"{airflow_base()}/plugin/{NAV_ROUTE}" + (f"?{urlencode(params)}" if params else "")
