"""dependency_inventory: pull the dependency inventory into the warehouse and report on it."""

from __future__ import annotations

from airflow.sdk import DAG, Param
from findings_provider.assets import DEPENDENCIES
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import conn_ids, dag_settings
from findings_provider.governance.filters import dependency_filter
from findings_provider.operators.dependencies import (
    DependencyReportOperator,
    ExtractDependenciesOperator,
    ExtractDependencyRepositoriesOperator,
)
from findings_provider.operators.sbom import SbomExportOperator

CONFIG = load_pipeline_config()
CFG = CONFIG.dependency_inventory
FILTER = dependency_filter(CFG.filters)
SBOM = CFG.sbom

DOC = """
### Dependency inventory

1. **extract_dependencies** pulls every dependency (mixed cursor pagination, `pageSize` up to 10000) into the
   warehouse table `dependencies`; rows the API no longer serves are removed, so the table mirrors the
   inventory.
2. **extract_dependency_repositories** pulls every repository with dependencies (its summary: number of
   dependencies, dependency path scan) into `dependency_repositories`.
3. **export_sboms** (after the repositories) exports a CycloneDX SBOM of each repository with dependencies (or
   of the `sbom_repositories` param's), polling each export job with a growing interval (5 s doubling to 60 s;
   deferred to the triggerer when Airflow's `[operators] default_deferrable` is on), downloads each document
   without the API token and stores it in `sboms`, its components in `sbom_components`. A repository whose export
   fails is recorded with its error and the others go on; the task fails only when every export failed.
4. **dependency_report** summarises licences and the most widespread dependencies with pandas into an HTML
   report with charts and CSV files (`$FINDINGS_REPORT_DIR/dependency_inventory/`).

Page sizes and optional filters come from `dependency_inventory` in `include/pipeline.yaml`:
`filters.licenses` (licences to keep) and `filters.packages` (package names, with an exact version or a
version range); they are sent to the API as its `dependencyFilter`. The SBOM export's settings are
`dependency_inventory.sbom` (`enabled`, `cyclonedx_version`, the poll intervals, `timeout`).

**Params**

- `sbom` (boolean, default `dependency_inventory.sbom.enabled`): export the SBOMs; false skips `export_sboms`.
- `sbom_repositories` (list of repository ids, default empty): the repositories to export; empty: every
  repository with dependencies.
"""

with DAG(
    description="Pull the dependency inventory into the warehouse and report on it",
    **dag_settings(CONFIG, "dependency_inventory", schedule=CFG.schedule),
    doc_md=DOC,
    tags=["findings", "governance", "dependencies"],
    params={
        "sbom": Param(SBOM.enabled, type="boolean", title="Export SBOMs",
                      description="Export a CycloneDX SBOM of the repositories into the warehouse."),
        "sbom_repositories": Param(
            [],
            type="array",
            items={"type": "integer"},
            uniqueItems=True,
            title="SBOM repositories",
            description="Repository ids to export an SBOM of; empty: every repository with dependencies.",
        ),
    },
) as dag:
    dependencies = ExtractDependenciesOperator(
        task_id="extract_dependencies",
        **conn_ids(CONFIG),
        page_size=CFG.page_size,
        dependency_filter=FILTER,
        outlets=[DEPENDENCIES],
    )
    repositories = ExtractDependencyRepositoriesOperator(
        task_id="extract_dependency_repositories",
        **conn_ids(CONFIG),
        page_size=CFG.repositories_page_size,
        dependency_filter=FILTER,
    )
    report = DependencyReportOperator(
        task_id="dependency_report",
        warehouse_conn_id=CONFIG.connections.warehouse_conn_id,
    )
    sbom = SbomExportOperator(
        task_id="export_sboms",
        **conn_ids(CONFIG),
        repository_ids="{{ params.sbom_repositories }}",
        enabled="{{ params.sbom }}",
        cyclonedx_version=SBOM.cyclonedx_version,
        poll_interval=SBOM.poll_interval,
        max_poll_interval=SBOM.max_poll_interval,
        timeout=SBOM.timeout,
        deferrable=True,  # exports take minutes: wait in the triggerer, not in a worker slot
    )
    [dependencies, repositories] >> report
    repositories >> sbom
