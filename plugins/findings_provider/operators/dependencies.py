"""Operators of the dependency inventory: pull dependencies and repositories, report on them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from findings_provider.governance.common import run_identity
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.operators.links import InventoryReportLink


class _InventoryPullOperator(FindingsBaseOperator):
    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "dependency_filter")

    def __init__(
        self,
        *,
        page_size: int | None = None,
        dependency_filter: dict[str, Any] | None = None,
        prune: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.page_size = page_size
        self.dependency_filter = dependency_filter or None
        self.prune = prune


class ExtractDependenciesOperator(_InventoryPullOperator):
    """Pull the whole dependency inventory (mixed cursor pagination) into the warehouse's ``dependencies``.

    Every run is a complete pull; with ``prune`` the dependencies the API no longer serves are removed, so the
    table mirrors the (filtered) inventory.

    :param page_size: dependencies per page, 1-10000 (None: the API's default of 1000).
    :param dependency_filter: the API's ``dependencyFilter`` (``license``, ``packageFilters`` with ``name``,
        ``exactNameMatch``, ``exactVersion``, ``versionLowerBound``, ``versionUpperBound``, ...); see
        ``findings_provider.governance.filters.dependency_filter`` to build it from the YAML.
    :param prune: remove rows not served any more (default True).
    :return: ``{"dependencies", "pages", "written", "removed"}``.
    """

    lineage_reads = ("dependencies",)
    lineage_writes = ("dependencies",)

    def run(self, context: Any) -> dict[str, int]:
        from findings_provider.governance.dependency_inventory import extract_dependencies

        counts = extract_dependencies(
            self.api_hook.client,
            self.warehouse_hook.get_warehouse(),
            page_size=self.page_size,
            dependency_filter=self.dependency_filter,
            prune=self.prune,
        )
        self.log.info("dependency inventory: %s", counts)
        return counts


class ExtractDependencyRepositoriesOperator(_InventoryPullOperator):
    """Pull every repository with dependencies (summaries) into the warehouse's ``dependency_repositories``.

    :param page_size: summaries per page, 1-100 (None: the API's default of 5).
    :param dependency_filter: as for :class:`ExtractDependenciesOperator`.
    :param prune: remove rows not served any more (default True).
    :return: ``{"repositories", "pages", "written", "removed"}``.
    """

    lineage_reads = ("dependency_repositories",)
    lineage_writes = ("dependency_repositories",)

    def run(self, context: Any) -> dict[str, int]:
        from findings_provider.governance.dependency_inventory import extract_repositories

        counts = extract_repositories(
            self.api_hook.client,
            self.warehouse_hook.get_warehouse(),
            page_size=self.page_size,
            dependency_filter=self.dependency_filter,
            prune=self.prune,
        )
        self.log.info("repositories with dependencies: %s", counts)
        return counts


class DependencyReportOperator(FindingsBaseOperator):
    """Summarise the warehouse's dependency inventory (pandas) into an HTML report with charts and CSV files.

    Tables: dependencies per licence, the most widespread dependencies (by repositories), the repositories
    with the most dependencies, totals. Charts: licences, most widespread dependencies. Reads only the
    warehouse.

    :param top: rows of the "most widespread" and "largest repositories" tables.
    :param report_dir: directory of the report (default ``$FINDINGS_REPORT_DIR/dependency_inventory``).
    :return: ``{"report": {"html", "csv"}, "dependencies", "repositories", "licences"}``.
    """

    operator_extra_links = (InventoryReportLink(),)

    def __init__(self, *, top: int = 20, report_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.top = top
        self.report_dir = report_dir

    def run(self, context: Any) -> dict[str, Any]:
        from pathlib import Path

        from findings_provider.governance.dependency_inventory import dependency_tables
        from findings_provider.reports import Chart, log_table, report_dir, write_report

        warehouse = self.warehouse_hook.get_warehouse()
        tables = dependency_tables(warehouse, top=self.top)
        licence_table, widespread_table = list(tables)[:2]
        for name in (licence_table, widespread_table):
            log_table(self.log, name, tables[name], max_rows=self.top)
        totals = tables["totals"]["value"]
        _, run_id = run_identity(context)
        report = write_report(
            f"dependency_inventory__{run_id or 'adhoc'}",
            "Dependency inventory",
            tables,
            charts=[
                Chart("Dependencies per licence", table=licence_table),
                Chart("Most widespread dependencies", table=widespread_table),
            ],
            out_dir=Path(self.report_dir) if self.report_dir else report_dir("dependency_inventory"),
            warehouse=warehouse,
            kind="dependency_inventory",
        )
        self.log.info("report: %s", report.html)
        return {
            "report": report.as_xcom(),
            "dependencies": int(totals["dependencies"]),
            "repositories": int(totals["repositories"]),
            "licences": len(tables[licence_table]),
        }
