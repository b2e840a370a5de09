"""Project settings as code: the difference between ``projects.yaml`` and the deployment, and applying it.

For every project a pattern of the file matches (later entries override earlier ones):

- ``tags`` given: add the missing ones; remove the project's tags that are in ``managed_tags`` but not wanted.
  Tags outside ``managed_tags`` are never removed. An entry without ``tags`` leaves the project's tags alone.
- ``diff_scan`` / ``full_scan`` given: toggle the managed scan when it differs.
- ``primary_branch`` given: set it when the service's differs (or the service names none).

The plan is deterministic (projects by name; per project: add tags, remove tags, managed scans, primary branch)
and prints one line per action. Patterns or names that match no project of the deployment are reported and
skipped. Drift is reported and never changed (see :class:`ProjectDrift`).

Applying sends one ``PATCH .../projects/{name}`` per project (``update_project``: tags, primary branch and managed
scans in one body, api-notes "Projects"), computed against the project read right before it (``get_project``):
only the fields whose fresh value differs from the plan's target are sent, and none when the project is already
in shape. The service's answer is stored in the warehouse's ``projects`` table (the counted copy of a finding
follows the primary branch at once).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from findings_provider.client.errors import DeploymentNotFoundError, NotFoundError
from findings_provider.config.models import ConfigError

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient
    from findings_provider.client.models import Project
    from findings_provider.config import ProjectsFile
    from findings_provider.warehouse import Warehouse

log = logging.getLogger(__name__)

Action = Literal["add_tags", "remove_tags", "set_managed_scans", "set_primary_branch"]
_ORDER = {"add_tags": 0, "remove_tags": 1, "set_managed_scans": 2, "set_primary_branch": 3}
DriftKind = Literal["unmentioned", "unmanaged_tags"]
DRIFT_KINDS: tuple[DriftKind, ...] = ("unmentioned", "unmanaged_tags")
#: Drift lines copied into an XCom; the stored plan keeps them all.
DRIFT_XCOM_ROWS = 20


@dataclass(frozen=True)
class ProjectAction:
    """One change to one project. ``previous`` is the service's primary branch when planned (for the plan line)."""

    project: str
    action: Action
    tags: tuple[str, ...] = ()
    diff_scan: bool | None = None
    full_scan: bool | None = None
    primary_branch: str | None = None
    previous: str | None = None

    def describe(self) -> str:
        """One plan line, e.g. ``add_tags acme/payments-api: +pci +tier-1``."""
        if self.action == "add_tags":
            detail = " ".join(f"+{t}" for t in self.tags)
        elif self.action == "remove_tags":
            detail = " ".join(f"-{t}" for t in self.tags)
        elif self.action == "set_primary_branch":
            detail = f"{self.previous or '(none)'} -> {self.primary_branch}"
        else:
            parts = []
            if self.diff_scan is not None:
                parts.append(f"diff_scan={'on' if self.diff_scan else 'off'}")
            if self.full_scan is not None:
                parts.append(f"full_scan={'on' if self.full_scan else 'off'}")
            detail = " ".join(parts)
        return f"{self.action} {self.project}: {detail}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tags": list(self.tags)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProjectAction:
        return cls(**{**data, "tags": tuple(data.get("tags") or ())})


@dataclass(frozen=True)
class ProjectDrift:
    """A project whose settings the file does not decide, reported and left as it is.

    - ``unmentioned``: the deployment lists the project but no entry of the file names it: none matches, or only
      a catch-all (a pattern of wildcards only, ``*`` or ``*/*``, which matches every project and so says nothing
      about this one). A new repository nobody classified shows up here.
    - ``unmanaged_tags``: an entry gives the project's ``tags``, and the project carries other tags that are not
      in ``managed_tags``: the file's list and the project differ, but the run never removes a tag it does not
      manage.
    """

    project: str
    kind: DriftKind
    detail: str

    def describe(self) -> str:
        return f"{self.kind} {self.project}: {self.detail}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProjectPlan:
    """The actions that make the deployment match the file, the patterns that matched nothing, and the drift."""

    actions: list[ProjectAction] = field(default_factory=list)
    unmatched_patterns: list[str] = field(default_factory=list)
    projects_total: int = 0
    projects_matched: int = 0
    drift: list[ProjectDrift] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The plan, one line per action, then one per skipped pattern, then one per drifting project."""
        out = [f"PLAN {a.describe()}" for a in self.actions]
        out += [f"SKIP pattern {p!r}: matches no project of the deployment" for p in self.unmatched_patterns]
        out += [f"DRIFT {d.describe()}" for d in self.drift]
        return out

    def projects_changed(self) -> list[str]:
        """The projects the plan changes (one PATCH each), in plan order."""
        return list(dict.fromkeys(a.project for a in self.actions))

    def summary(self) -> dict[str, int]:
        counts = {k: 0 for k in _ORDER}
        for a in self.actions:
            counts[a.action] += 1
        drift = {f"drift_{k}": 0 for k in DRIFT_KINDS}
        for d in self.drift:
            drift[f"drift_{d.kind}"] += 1
        return {
            "projects": self.projects_total,
            "projects_matched": self.projects_matched,
            "projects_changed": len(self.projects_changed()),
            "actions": len(self.actions),
            **counts,
            "unmatched_patterns": len(self.unmatched_patterns),
            "drift": len(self.drift),
            **drift,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "actions": [a.as_dict() for a in self.actions],
            "unmatched_patterns": list(self.unmatched_patterns),
            "projects_total": self.projects_total,
            "projects_matched": self.projects_matched,
            "drift": [d.as_dict() for d in self.drift],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProjectPlan:
        return cls(
            actions=[ProjectAction.from_dict(a) for a in data.get("actions", [])],
            unmatched_patterns=list(data.get("unmatched_patterns", [])),
            projects_total=int(data.get("projects_total", 0)),
            projects_matched=int(data.get("projects_matched", 0)),
            drift=[ProjectDrift(**d) for d in data.get("drift", [])],
        )


def _enabled(project: Project, which: str) -> bool | None:
    config = project.managed_scan_config
    toggle = getattr(config, which, None) if config is not None else None
    return toggle.enabled if toggle is not None else None


def _settings(project: Project) -> str:
    tags = ", ".join(project.tags) or "none"
    return f"tags {tags}; primary branch {project.primary_branch or '(none)'}"


def plan_project_settings(projects: Iterable[Project], spec: ProjectsFile) -> ProjectPlan:
    """Compare each project with the file and list the actions that close the difference, and the drift."""
    by_name = {p.name: p for p in projects}
    plan = ProjectPlan(projects_total=len(by_name))
    managed = set(spec.managed_tags)
    for name in sorted(by_name):
        project = by_name[name]
        desired = spec.desired(name)
        if not spec.mentions(name):
            how = "only a catch-all entry matches it" if desired is not None else "no entry matches it"
            plan.drift.append(ProjectDrift(name, "unmentioned", f"not named by the file ({how}); {_settings(project)}"))
        if desired is None:
            continue
        plan.projects_matched += 1
        if desired.tags is not None:
            current = set(project.tags)
            wanted = set(desired.tags)
            add = sorted(wanted - current)
            remove = sorted((current & managed) - wanted)
            if add:
                plan.actions.append(ProjectAction(name, "add_tags", tags=tuple(add)))
            if remove:
                plan.actions.append(ProjectAction(name, "remove_tags", tags=tuple(remove)))
            unmanaged = sorted(current - managed - wanted)
            if unmanaged:
                plan.drift.append(ProjectDrift(
                    name, "unmanaged_tags",
                    f"carries {', '.join(unmanaged)}, not in the file's tags for it nor in managed_tags: left as is"))
        toggles = {}
        for which in ("diff_scan", "full_scan"):
            want = getattr(desired, which)
            if want is not None and _enabled(project, which) is not want:
                toggles[which] = want
        if toggles:
            plan.actions.append(ProjectAction(name, "set_managed_scans", **toggles))
        if desired.primary_branch is not None and project.primary_branch != desired.primary_branch:
            plan.actions.append(ProjectAction(name, "set_primary_branch", primary_branch=desired.primary_branch,
                                              previous=project.primary_branch or None))
    plan.actions.sort(key=lambda a: (a.project, _ORDER[a.action]))
    plan.unmatched_patterns = spec.patterns_without_match(list(by_name))
    return plan


def patch_fields(project: Project, actions: Iterable[ProjectAction]) -> dict[str, Any]:
    """The arguments of ``update_project`` that bring ``project`` (read right before) to the targets of its
    ``actions``: only the fields whose current value differs; empty when it is in shape already.

    ``tags`` (the PATCH replaces them as a whole) is the project's current tags without the ones to remove, plus
    the ones to add: a tag added in the service since the plan is kept.
    """
    add: set[str] = set()
    remove: set[str] = set()
    fields: dict[str, Any] = {}
    for action in actions:
        if action.action == "add_tags":
            add.update(action.tags)
        elif action.action == "remove_tags":
            remove.update(action.tags)
        elif action.action == "set_managed_scans":
            for which in ("diff_scan", "full_scan"):
                want = getattr(action, which)
                if want is not None and _enabled(project, which) is not want:
                    fields[which] = want
        elif action.primary_branch and project.primary_branch != action.primary_branch:
            fields["primary_branch"] = action.primary_branch
    current = list(project.tags)
    tags = [t for t in current if t not in remove] + sorted(add - set(current))
    if set(tags) != set(current):
        fields["tags"] = tags
    return fields


def check_cap(plan: ProjectPlan, max_projects_changed: int | None) -> None:
    """Refuse (``ConfigError``, before any write) a plan that changes more projects than the cap."""
    changed = plan.projects_changed()
    if max_projects_changed is not None and len(changed) > max_projects_changed:
        raise ConfigError(
            f"the plan changes {len(changed)} projects, more than max_projects_changed = {max_projects_changed} "
            "(project_settings.max_projects_changed in pipeline.yaml): check projects.yaml (a glob may match more "
            "projects than meant), then raise the cap to apply it; nothing was changed"
        )


def apply_project_plan(client: FindingsClient, plan: ProjectPlan, warehouse: Warehouse | None = None, *,
                       max_projects_changed: int | None = None) -> dict[str, int]:
    """Apply the plan: per project, read it (``get_project``), then send one PATCH with the fields that still
    differ (none: nothing is sent). A project that vanished since the plan (404) is skipped. The projects the
    service answered are stored in ``warehouse`` (when given), also when a later project fails.

    Every PATCH sets a target state computed from a fresh read, so a retried task repeats it safely. Returns
    ``patched`` (PATCH requests sent), ``unchanged`` (in shape when read), ``skipped`` (gone).
    """
    from findings_provider.warehouse.branches import store_projects

    check_cap(plan, max_projects_changed)
    by_project: dict[str, list[ProjectAction]] = {}
    for action in plan.actions:
        by_project.setdefault(action.project, []).append(action)
    counts = {"patched": 0, "unchanged": 0, "skipped": 0}
    answered: list[Project] = []
    try:
        for name, actions in by_project.items():
            try:
                fresh = client.get_project(name)
                fields = patch_fields(fresh, actions)
                if not fields:
                    counts["unchanged"] += 1
                    log.info("UNCHANGED %s: in shape when read", name)
                    continue
                answered.append(client.update_project(name, **fields))
            except NotFoundError as exc:
                if isinstance(exc, DeploymentNotFoundError):
                    raise
                counts["skipped"] += 1
                log.warning("SKIPPED %s: project not found (%s)", name, exc)
                continue
            counts["patched"] += 1
            log.info("APPLIED %s: PATCH %s", name, ", ".join(sorted(fields)))
    finally:
        if answered and warehouse is not None:
            store_projects(warehouse, answered, complete=False)
    return counts
