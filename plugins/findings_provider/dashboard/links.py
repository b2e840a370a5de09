"""Where the dashboard lives: one definition of its path, for the plugin, alerts and operator links."""

from __future__ import annotations

#: Path of the dashboard's FastAPI app on the Airflow API server.
URL_PREFIX = "/findings-dashboard"
#: Its pages (path under ``URL_PREFIX`` -> navigation title), in navigation order.
PAGES = {
    "": "Overview",
    "findings": "Findings",
    "scans": "Scans",
    "activity": "Triage and tickets",
    "policies": "Policy proposals",
    "inventory": "Inventory",
}


def dashboard_url(page: str = "", query: str = "") -> str:
    """The absolute URL of a dashboard page when Airflow's ``[api] base_url`` is set, else its path."""
    base = ""
    try:
        from airflow.configuration import conf

        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:  # outside Airflow (unit tests, scripts): the path alone
        base = ""
    return f"{base}{URL_PREFIX}/{page}" + (f"?{query}" if query else "")
