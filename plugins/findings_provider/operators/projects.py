"""Operators of project settings as code: plan the difference to ``projects.yaml``, then apply it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from findings_provider.client.limits import PROJECTS_PAGE_SIZE
from findings_provider.governance.common import preview, run_identity, state_key
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.values import as_bool

PLAN_STATE = "project_settings/plan"


def _compute_plan(operator: FindingsBaseOperator, projects_file: Any, page_size: int) -> Any:
    from findings_provider.config import ProjectsFile, load_yaml_model
    from findings_provider.governance.project_settings import plan_project_settings

    if not projects_file or not str(projects_file).strip():
        raise ValueError(f"projects_file = {projects_file!r}: give the path of the projects file (the "
                         "project_settings DAG passes project_settings.file of pipeline.yaml)")
    spec = load_yaml_model(str(projects_file), ProjectsFile)  # the file named by the argument, and no other
    client = operator.api_hook.client
    projects = list(client.items(client.list_projects, page_size=page_size))
    store_listed_projects(operator.warehouse_hook.get_warehouse(), projects)
    return plan_project_settings(projects, spec)


def store_listed_projects(warehouse: Any, projects: list[Any]) -> None:
    """Keep the complete listing in the warehouse (``projects``: the primary branches decide which copy of a
    finding on several branches is counted), as the extraction does."""
    from datetime import datetime, timezone

    from findings_provider.warehouse.branches import store_projects

    with warehouse.engine.begin() as conn:
        store_projects(conn, projects, datetime.now(timezone.utc))


def _print_plan(operator: FindingsBaseOperator, plan: Any) -> None:
    for line in plan.lines():
        operator.log.info(line)
    operator.log.info("plan: %s", plan.summary() if plan.actions else "empty, every matched project is in shape")


class ProjectSettingsPlanOperator(FindingsBaseOperator):
    """Compare the projects' tags and managed scans with ``projects.yaml`` and print the plan.

    Reads the file (an invalid one fails the task with file, line and reason), lists every project, and prints
    one line per action (``PLAN add_tags acme/api: +pci``), then one per pattern that matches no project
    (reported and skipped). The full plan is stored in the warehouse's ``pipeline_state``; the XCom carries
    counts, its key and the first lines. Changes nothing.

    :param projects_file: path of the projects file (templated; the DAG passes ``project_settings.file`` of
        pipeline.yaml, resolved beside it).
    :param page_size: projects per page when listing them.
    """

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "projects_file")

    def __init__(self, *, projects_file: str, page_size: int = PROJECTS_PAGE_SIZE.default, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.projects_file = projects_file
        self.page_size = page_size

    def run(self, context: Any) -> dict[str, Any]:
        plan = _compute_plan(self, self.projects_file, self.page_size)
        _print_plan(self, plan)
        dag_id, run_id = run_identity(context)
        key = state_key(PLAN_STATE, dag_id, run_id)
        self.warehouse_hook.get_warehouse().set_state(key, plan.to_dict())
        return {
            **plan.summary(),
            "plan_key": key,
            "preview": preview([{"line": line} for line in plan.lines()]),
            "unmatched": plan.unmatched_patterns[:20],
        }


class ApplyProjectSettingsOperator(FindingsBaseOperator):
    """Apply a project settings plan: add tags, remove managed tags, toggle managed scans.

    The plan is the one stored by ``plan_task_id`` (a :class:`ProjectSettingsPlanOperator`), or, when that is
    None, computed here from ``projects_file``. It is printed one line per action before anything is applied.
    With ``dry_run`` nothing is applied. A project removed since the plan is skipped.

    :param plan_task_id: task whose XCom carries ``plan_key``; None: plan here.
    :param projects_file: path of the projects file when planning here (templated; required then).
    :param dry_run: print the plan and change nothing. Templated.
    """

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "is_dry_run", "projects_file")

    def __init__(
        self,
        *,
        plan_task_id: str | None = "plan_project_settings",
        projects_file: str | None = None,
        dry_run: Any = False,
        page_size: int = PROJECTS_PAGE_SIZE.default,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_task_id = plan_task_id
        self.projects_file = projects_file
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.page_size = page_size

    def _plan(self, context: Any) -> Any:
        from findings_provider.governance.project_settings import ProjectPlan

        if self.plan_task_id is None:
            return _compute_plan(self, self.projects_file, self.page_size)
        summary = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        key = summary.get("plan_key")
        stored = self.warehouse_hook.get_warehouse().get_state(key) if key else None
        if stored is None:
            raise ValueError(f"no project settings plan from task {self.plan_task_id!r} (key {key!r})")
        return ProjectPlan.from_dict(stored)

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.governance.project_settings import apply_project_plan

        dry_run = as_bool(self.is_dry_run, "dry_run")
        plan = self._plan(context)
        _print_plan(self, plan)
        if dry_run:
            self.log.info("dry run: %d actions not applied", len(plan.actions))
            return {"dry_run": True, "planned": len(plan.actions), "applied": 0, "skipped": 0}
        counts = apply_project_plan(self.api_hook.client, plan)
        self.log.info("applied %d of %d actions (%d skipped)", counts["applied"], len(plan.actions), counts["skipped"])
        return {"dry_run": False, "planned": len(plan.actions), **counts}
