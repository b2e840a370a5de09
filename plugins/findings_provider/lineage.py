"""OpenLineage datasets of the provider's operators: the API operations they read, the warehouse tables they write.

Used by ``FindingsBaseOperator.get_openlineage_facets_on_complete``, which Airflow's OpenLineage provider calls
when it is installed and configured. Nothing here imports OpenLineage at module level: without the provider, the
operators never call this module and users pay nothing.

Dataset names follow OpenLineage's naming conventions:

- an API operation: namespace the service's origin (``https://findings.example.com``), name the path with the
  deployment filled in (``/api/v1/deployments/acme/findings``; a key the run never resolved stays a placeholder);
- a PostgreSQL table: namespace ``postgres://{host}:{port}``, name ``{database}.{schema}.{table}``;
- a SQLite table: namespace ``sqlite://{absolute file path}``, name ``{table}`` (SQLite has no convention there).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import URL

from findings_provider.client.endpoints import ENDPOINTS
from findings_provider.text import fill


def api_dataset_name(base_url: str, operation: str, *, deployment_id: str | None,
                     deployment_slug: str | None) -> tuple[str, str]:
    """(namespace, name) of one API operation of ``client.endpoints.ENDPOINTS``."""
    parts = urlsplit(base_url)
    path = fill(ENDPOINTS[operation].path, {"deployment_id": deployment_id, "deployment_slug": deployment_slug})
    return f"{parts.scheme}://{parts.netloc}", f"{parts.path.rstrip('/')}{path}"


def warehouse_dataset_name(url: URL, table: str, schema: str | None = None) -> tuple[str, str]:
    """(namespace, name) of a warehouse table on the database ``url`` names (``schema``: PostgreSQL's, default
    ``public``)."""
    if url.get_backend_name() == "sqlite":
        return f"sqlite://{url.database or ':memory:'}", table
    return f"postgres://{url.host or 'localhost'}:{url.port or 5432}", f"{url.database}.{schema or 'public'}.{table}"


def operator_lineage(inputs: Iterable[tuple[str, str]], outputs: Iterable[tuple[str, str]]) -> Any:
    """An ``OperatorLineage`` of datasets given as (namespace, name); needs the OpenLineage provider."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    return OperatorLineage(inputs=[Dataset(namespace=n, name=m) for n, m in inputs],
                           outputs=[Dataset(namespace=n, name=m) for n, m in outputs])
