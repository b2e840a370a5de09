"""Operators of project settings as code: plan the difference to ``projects.yaml`` (and report the drift), then
apply it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from findings_provider.client.limits import PROJECTS_PAGE_SIZE
from findings_provider.config.models import DEFAULT_MAX_PROJECTS_CHANGED
from findings_provider.governance.common import preview, run_identity, state_key
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.values import as_bool, as_int

PLAN_STATE = "project_settings/plan"


def _compute_plan(operator: FindingsBaseOperator, projects_file: Any, page_size: int) -> Any:
    from findings_provider.config import ProjectsFile, load_yaml_model
    from findings_provider.governance.project_settings import plan_project_settings, read_managed_scans
    from findings_provider.warehouse.branches import store_projects

    if not projects_file or not str(projects_file).strip():
        raise ValueError(f"projects_file = {projects_file!r}: give the path of the projects file (the "
                         "project_settings DAG passes project_settings.file of pipeline.yaml)")
    spec = load_yaml_model(str(projects_file), ProjectsFile)  # the file named by the argument, and no other
    client = operator.api_hook.client
    projects = list(client.items(client.list_projects, page_size=page_size))
    # the complete listing, kept as the extraction keeps it (the primary branches decide which copy counts)
    store_projects(operator.warehouse_hook.get_warehouse(), projects)
    # the real service's listing leaves the managed scans out: read them for the projects whose entry sets them
    return plan_project_settings(read_managed_scans(client, projects, spec), spec)


def _print_plan(operator: FindingsBaseOperator, plan: Any) -> None:
    for line in plan.lines():
        operator.log.info(line)
    operator.log.info("plan: %s", plan.summary() if plan.actions else "empty, every matched project is in shape")
    if plan.drift:
        operator.log.warning("drift: %d project(s) the file does not decide (DRIFT lines above), left as they are",
                             len(plan.drift))


def _drift_xcom(plan: Any) -> list[str]:
    from findings_provider.governance.project_settings import DRIFT_XCOM_ROWS

    return [d.describe() for d in plan.drift[:DRIFT_XCOM_ROWS]]


class ProjectSettingsPlanOperator(FindingsBaseOperator):
    """Compare the projects' tags, managed scans and primary branches with ``projects.yaml`` and print the plan.

    Reads the file (an invalid one fails the task with file, line and reason), lists every project (stored in
    the warehouse's ``projects``), reads the managed scans the listing leaves out (the real service's) with
    ``get_project`` for the projects whose entry sets ``diff_scan`` or ``full_scan`` (a server that does not serve
    that GET: their settings are planned as wanted, ``current state unknown``), and prints one line per action
    (``PLAN add_tags acme/api: +pci``, ``PLAN set_primary_branch acme/api: master -> main``), then one per
    pattern that matches no project (reported and skipped), then one per drifting project (``DRIFT unmentioned
    ...``, ``DRIFT unmanaged_tags ...``: reported, never changed). The full plan is stored in the warehouse's
    ``pipeline_state``; the XCom carries counts, its key, the first lines and the first drift lines. Changes
    nothing in the service.

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
            "drift_projects": _drift_xcom(plan),
        }


class ApplyProjectSettingsOperator(FindingsBaseOperator):
    """Apply a project settings plan: tags through the add/remove tag endpoints (only the difference), managed
    scans through the managed-scan endpoint, and a primary branch, with that project's managed scans, in one PATCH
    of the project (the only write a server following the API reference alone lacks: a file that names no
    ``primary_branch`` never sends it).

    The plan is the one stored by ``plan_task_id`` (a :class:`ProjectSettingsPlanOperator`), or, when that is
    None, computed here from ``projects_file``. It is printed one line per action before anything is applied.
    With ``dry_run`` nothing is applied. A plan that changes more than ``max_projects_changed`` projects is
    refused before any write. Right before the first write the projects are listed again (and the managed scans
    the listing leaves out read with ``get_project`` for the projects whose plan sets them); each project's writes
    carry only what still differs from that state (nothing: no request); a project no longer there is skipped.
    The projects the service answered are stored in the warehouse's ``projects``. XCom: ``changed`` (projects
    written to), ``unchanged`` (in shape when listed), ``skipped`` (gone), with the plan's counts.

    :param plan_task_id: task whose XCom carries ``plan_key``; None: plan here.
    :param projects_file: path of the projects file when planning here (templated; required then).
    :param dry_run: print the plan and change nothing. Templated.
    :param page_size: projects per page when listing them.
    :param max_projects_changed: most projects one run may change. Templated.
    """

    template_fields: Sequence[str] = (
        *FindingsBaseOperator.template_fields, "is_dry_run", "projects_file", "max_projects_changed")

    def __init__(
        self,
        *,
        plan_task_id: str | None = "plan_project_settings",
        projects_file: str | None = None,
        dry_run: Any = False,
        page_size: int = PROJECTS_PAGE_SIZE.default,
        max_projects_changed: Any = DEFAULT_MAX_PROJECTS_CHANGED,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_task_id = plan_task_id
        self.projects_file = projects_file
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.page_size = page_size
        self.max_projects_changed = max_projects_changed

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
        cap = as_int(self.max_projects_changed, "max_projects_changed", minimum=1)
        plan = self._plan(context)
        _print_plan(self, plan)
        changing = len(plan.projects_changed())
        base = {"planned": len(plan.actions), "projects": changing, "drift": len(plan.drift),
                "drift_projects": _drift_xcom(plan)}
        if dry_run:
            self.log.info("dry run: %d actions on %d projects not applied", len(plan.actions), changing)
            over_cap = changing > cap
            if over_cap:
                self.log.warning("a run that applies this plan refuses it: %d projects to change, more than "
                                 "max_projects_changed = %d", changing, cap)
            return {"dry_run": True, **base, "over_cap": over_cap, "changed": 0, "unchanged": 0, "skipped": 0}
        counts = apply_project_plan(self.api_hook.client, plan, self.warehouse_hook.get_warehouse(),
                                    max_projects_changed=cap, page_size=self.page_size)
        self.log.info("%d projects changed, %d in shape when listed, %d skipped, of %d planned",
                      counts["changed"], counts["unchanged"], counts["skipped"], changing)
        return {"dry_run": False, **base, **counts}

