"""Apache Airflow provider for a security findings management API.

Layers (each importable on its own): ``client`` (pure Python), ``warehouse`` (pure SQLAlchemy), ``hooks``,
``operators``/``sensors``/``triggers`` (thin Airflow wrappers).
"""

from pathlib import Path
from typing import Any

__version__ = "0.1.0"

_PACKAGE = Path(__file__).resolve().parent
_INTEGRATION = "Security Findings"


def _modules(package: str, *, besides: tuple[str, ...] = ()) -> list[str]:
    """The dotted names of the modules of ``findings_provider.<package>``, found on disk (nothing is imported:
    Airflow reads the provider info in every process); ``besides`` names modules that hold no such classes (a
    base class, the operator links)."""
    return [f"findings_provider.{package}.{path.stem}" for path in sorted((_PACKAGE / package).glob("*.py"))
            if not path.stem.startswith("_") and path.stem not in besides]


CONN_FIELDS: dict[str, dict[str, Any]] = {
    "deployment_slug": {
        "label": "Deployment slug",
        "description": "Slug of the deployment (organisation); used by findings, triage, tickets, projects.",
        "schema": {"type": ["string", "null"]},
    },
    "deployment_id": {
        "label": "Deployment id",
        "description": "Numeric id of the deployment; used by scans, policies, dependencies, secrets. "
        "Either may be left empty when the API can resolve it from the other.",
        "schema": {"type": ["string", "null"], "pattern": "^[0-9]*$"},
    },
    "timeout": {"label": "Timeout (seconds)", "schema": {"type": ["number", "null"], "default": 30}},
    "max_retries": {"label": "Max retries", "schema": {"type": ["integer", "null"], "default": 4}},
    "total_timeout": {
        "label": "Total timeout per request (seconds)",
        "description": "Bounds a whole response, however slowly it arrives; default max(60, 4 x timeout).",
        "schema": {"type": ["number", "null"]},
    },
    "max_response_bytes": {
        "label": "Largest response (bytes)",
        "description": "A larger response is refused; default 128 MiB.",
        "schema": {"type": ["integer", "null"]},
    },
    "verify": {
        "label": "TLS verification",
        "description": "true (default), false, or the path of a CA bundle.",
        "schema": {"type": ["string", "null"]},
    },
    "allow_insecure_http": {
        "label": "Allow plain http to a non-loopback host",
        "schema": {"type": ["boolean", "null"], "default": False},
    },
    "tracker_project_field": {
        "label": "Tracker project field name",
        "description": "Body field name of the issue-tracker project id in ticket creation. The reference calls "
        "it tracker_project_id; the real service names it after the tracker's brand plus _project_id "
        "(e.g. jira_project_id).",
        "schema": {"type": ["string", "null"], "default": "tracker_project_id"},
    },
    "tags_body": {
        "label": "Project tags body",
        "description": "How adding project tags sends them: array (default, a bare JSON array as the reference "
        'says) or object ({"tags": [...]}, as the real service takes it). Removing tags always sends them as '
        "repeated query keys.",
        "schema": {"type": ["string", "null"], "enum": ["array", "object", None], "default": "array"},
    },
}


def get_provider_info() -> dict:
    """Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point."""
    return {
        "package-name": "findings-airflow",
        "name": "Security Findings",
        "description": "Scans, findings, bulk triage, tickets, rule policies and project settings of a "
        "security findings management API.",
        "versions": [__version__],
        "connection-types": [
            {
                "connection-type": "findings_api",
                "hook-class-name": "findings_provider.hooks.findings_api.FindingsApiHook",
                "hook-name": "Security Findings API",
                "conn-fields": CONN_FIELDS,
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "login"],
                    "relabeling": {"host": "Base URL", "password": "API token"},
                    "placeholders": {
                        "host": "https://findings.example.com (or http://127.0.0.1:8900 for the local emulator)",
                        "password": "token with Web API access enabled",
                        "deployment_slug": "acme",
                        "deployment_id": "1",
                    },
                },
            }
        ],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": _modules("hooks")}],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://github.com/findings-airflow/findings-airflow",
                "tags": ["service"],
            }
        ],
        "operators": [{"integration-name": _INTEGRATION,
                       "python-modules": _modules("operators", besides=("base", "links"))}],
        "sensors": [{"integration-name": _INTEGRATION, "python-modules": _modules("sensors")}],
        "triggers": [{"integration-name": _INTEGRATION, "python-modules": _modules("triggers")}],
        "extra-links": [
            f"findings_provider.operators.links.{name}"
            for name in ("ScanLink", "FindingsTriagedLink", "FindingsTicketedLink", "TicketsCreatedLink",
                         "RulesChangedLink", "SummaryReportLink", "PolicyReportLink", "InventoryReportLink")
        ],
        "plugins": [
            {
                "name": "findings_dashboard",
                "plugin-class": "findings_provider.dashboard.plugin.FindingsDashboardPlugin",
            }
        ],
        "notifications": [
            "findings_provider.notifications.FindingsAlertNotifier",
            "findings_provider.notifications.ScanAlertNotifier",
        ],
    }
