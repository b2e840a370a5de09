"""The dependency inventory's filter in the API's form: pure, no I/O, so a DAG file computes it when it is parsed
without importing the inventory's pull (the warehouse, SQLAlchemy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from findings_provider.config import DependencyFilters


def dependency_filter(filters: DependencyFilters | dict[str, Any] | None) -> dict[str, Any] | None:
    """The API's ``dependencyFilter`` from the YAML's ``dependency_inventory.filters`` (None when empty)."""
    if filters is None:
        return None
    if not isinstance(filters, dict):
        filters = filters.model_dump()
    body: dict[str, Any] = {}
    if filters.get("licenses"):
        body["license"] = list(filters["licenses"])
    packages = []
    for p in filters.get("packages") or ():
        package = {"name": p["name"], "exactNameMatch": p.get("exact_name_match", True)}
        for key, api_key in (
            ("exact_version", "exactVersion"),
            ("version_lower_bound", "versionLowerBound"),
            ("version_upper_bound", "versionUpperBound"),
        ):
            if p.get(key) is not None:
                package[api_key] = str(p[key])
        packages.append(package)
    if packages:
        body["packageFilters"] = packages
    return body or None
