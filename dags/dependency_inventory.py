"""dependency_inventory: pull the dependency inventory into the warehouse and report on it."""

from __future__ import annotations

from airflow.sdk import DAG
from findings_provider.assets import DEPENDENCIES
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import conn_ids, dag_settings
from findings_provider.governance.dependency_inventory import dependency_filter
from findings_provider.operators.dependencies import (
    DependencyReportOperator,
    ExtractDependenciesOperator,
    ExtractDependencyRepositoriesOperator,
)

CONFIG = load_pipeline_config()
CFG = CONFIG.dependency_inventory
FILTER = dependency_filter(CFG.filters)

DOC = """
### Dependency inventory

1. **extract_dependencies** pulls every dependency (mixed cursor pagination, `pageSize` up to 10000) into the
   warehouse table `dependencies`; rows the API no longer serves are removed, so the table mirrors the
   inventory.
2. **extract_dependency_repositories** pulls every repository with dependencies (its summary: number of
   dependencies, dependency path scan) into `dependency_repositories`.
3. **dependency_report** summarises licences and the most widespread dependencies with pandas into an HTML
   report with charts and CSV files (`$FINDINGS_REPORT_DIR/dependency_inventory/`).

Page sizes and optional filters come from `dependency_inventory` in `include/pipeline.yaml`:
`filters.licenses` (licences to keep) and `filters.packages` (package names, with an exact version or a
version range); they are sent to the API as its `dependencyFilter`.

**Params**: none.
"""

with DAG(
    description="Pull the dependency inventory into the warehouse and report on it",
    **dag_settings(CONFIG, "dependency_inventory", schedule=CFG.schedule),
    doc_md=DOC,
    tags=["findings", "governance", "dependencies"],
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
    [dependencies, repositories] >> report
