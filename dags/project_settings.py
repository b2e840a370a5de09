"""project_settings: make projects' tags, managed-scan settings and primary branches match include/projects.yaml."""

from __future__ import annotations

from airflow.sdk import DAG
from findings_provider.config import load_pipeline_config, projects_file_path
from findings_provider.dag_defaults import conn_ids, dag_settings, dry_run_param
from findings_provider.operators.projects import ApplyProjectSettingsOperator, ProjectSettingsPlanOperator

CONFIG = load_pipeline_config()
CFG = CONFIG.project_settings

DOC = """
### Project settings as code

`include/projects.yaml` (the `project_settings.file` of `include/pipeline.yaml`) declares, per project name or
glob of names, the tags the project must carry, whether managed diff and full scans are enabled and its primary
branch. Later entries override earlier ones for the same project. Only tags listed under `managed_tags` are ever
removed; an entry without `tags` leaves a project's tags alone.

1. **plan_project_settings** reads the file (an invalid file fails the task with the line and the reason),
   lists the deployment's projects (stored in the warehouse) and prints the plan, one line per action
   (`PLAN add_tags acme/api: +pci`, `PLAN remove_tags ...`, `PLAN set_managed_scans ...: full_scan=on`,
   `PLAN set_primary_branch acme/api: master -> main`). Names or globs that match no project are reported
   (`SKIP pattern ...`) and skipped, not an error. Drift is reported and left alone: projects no entry names
   (only a catch-all such as `*` matches them) and projects carrying tags the file neither lists nor manages
   (`DRIFT ...`). The full plan is stored in the warehouse.
2. **apply_project_settings** prints the plan again, refuses it when it changes more than
   `project_settings.max_projects_changed` projects, lists the projects again, then sends only what still
   differs from that listing: the tags to add or remove (tag endpoints, a delta: tags a person added stay), the
   managed scans (managed-scan endpoint), and a primary branch in one PATCH of the project together with its
   managed scans (a file without `primary_branch` never sends that PATCH, which a server following only the API
   reference lacks). The service's answers are stored in the warehouse's `projects`. A second run right after
   has an empty plan.

**Params**

- `dry_run` (boolean, default from `project_settings.dry_run` in `include/pipeline.yaml`): print the plan and
  change nothing.
"""

with DAG(
    description="Make projects' tags, managed scans and primary branches match include/projects.yaml",
    **dag_settings(CONFIG, "project_settings", schedule=CFG.schedule),
    doc_md=DOC,
    tags=["findings", "governance", "projects"],
    params={
        "dry_run": dry_run_param(CFG.dry_run, "Print the plan and change nothing."),
    },
) as dag:
    plan = ProjectSettingsPlanOperator(
        task_id="plan_project_settings",
        projects_file=str(projects_file_path(CONFIG)),
        **conn_ids(CONFIG),
    )
    apply = ApplyProjectSettingsOperator(
        task_id="apply_project_settings",
        **conn_ids(CONFIG),
        plan_task_id="plan_project_settings",
        dry_run="{{ params.dry_run }}",
        max_projects_changed=CFG.max_projects_changed,
    )
    plan >> apply
