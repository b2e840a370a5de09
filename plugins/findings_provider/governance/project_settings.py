"""Project settings as code: the difference between ``projects.yaml`` and the deployment, and applying it.

For every project a pattern of the file matches (later entries override earlier ones):

- ``tags`` given: add the missing ones; remove the project's tags that are in ``managed_tags`` but not wanted.
  Tags outside ``managed_tags`` are never removed. An entry without ``tags`` leaves the project's tags alone.
- ``diff_scan`` / ``full_scan`` given: toggle the managed scan when it differs.

The plan is deterministic (projects by name; per project: add tags, remove tags, managed scans) and prints one
line per action. Patterns or names that match no project of the deployment are reported and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from findings_provider.client.errors import DeploymentNotFoundError, NotFoundError

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient
    from findings_provider.client.models import Project
    from findings_provider.config import ProjectsFile

log = logging.getLogger(__name__)

Action = Literal["add_tags", "remove_tags", "set_managed_scans"]
_ORDER = {"add_tags": 0, "remove_tags": 1, "set_managed_scans": 2}


@dataclass(frozen=True)
class ProjectAction:
    """One change to one project."""

    project: str
    action: Action
    tags: tuple[str, ...] = ()
    diff_scan: bool | None = None
    full_scan: bool | None = None

    def describe(self) -> str:
        """One plan line, e.g. ``add_tags acme/payments-api: +pci +tier-1``."""
        if self.action == "add_tags":
            detail = " ".join(f"+{t}" for t in self.tags)
        elif self.action == "remove_tags":
            detail = " ".join(f"-{t}" for t in self.tags)
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


@dataclass
class ProjectPlan:
    """The actions that make the deployment match the file, and the patterns that matched nothing."""

    actions: list[ProjectAction] = field(default_factory=list)
    unmatched_patterns: list[str] = field(default_factory=list)
    projects_total: int = 0
    projects_matched: int = 0

    def lines(self) -> list[str]:
        """The plan, one line per action, then one per skipped pattern."""
        out = [f"PLAN {a.describe()}" for a in self.actions]
        out += [f"SKIP pattern {p!r}: matches no project of the deployment" for p in self.unmatched_patterns]
        return out

    def summary(self) -> dict[str, int]:
        counts = {k: 0 for k in _ORDER}
        for a in self.actions:
            counts[a.action] += 1
        return {
            "projects": self.projects_total,
            "projects_matched": self.projects_matched,
            "projects_changed": len({a.project for a in self.actions}),
            "actions": len(self.actions),
            **counts,
            "unmatched_patterns": len(self.unmatched_patterns),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "actions": [a.as_dict() for a in self.actions],
            "unmatched_patterns": list(self.unmatched_patterns),
            "projects_total": self.projects_total,
            "projects_matched": self.projects_matched,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProjectPlan:
        return cls(
            actions=[ProjectAction.from_dict(a) for a in data.get("actions", [])],
            unmatched_patterns=list(data.get("unmatched_patterns", [])),
            projects_total=int(data.get("projects_total", 0)),
            projects_matched=int(data.get("projects_matched", 0)),
        )


def _enabled(project: Project, which: str) -> bool | None:
    config = project.managed_scan_config
    toggle = getattr(config, which, None) if config is not None else None
    return toggle.enabled if toggle is not None else None


def plan_project_settings(projects: Iterable[Project], spec: ProjectsFile) -> ProjectPlan:
    """Compare each project with the file and list the actions that close the difference."""
    by_name = {p.name: p for p in projects}
    plan = ProjectPlan(projects_total=len(by_name))
    managed = set(spec.managed_tags)
    for name in sorted(by_name):
        desired = spec.desired(name)
        if desired is None:
            continue
        plan.projects_matched += 1
        project = by_name[name]
        if desired.tags is not None:
            current = set(project.tags)
            wanted = set(desired.tags)
            add = sorted(wanted - current)
            remove = sorted((current & managed) - wanted)
            if add:
                plan.actions.append(ProjectAction(name, "add_tags", tags=tuple(add)))
            if remove:
                plan.actions.append(ProjectAction(name, "remove_tags", tags=tuple(remove)))
        toggles = {}
        for which in ("diff_scan", "full_scan"):
            want = getattr(desired, which)
            if want is not None and _enabled(project, which) is not want:
                toggles[which] = want
        if toggles:
            plan.actions.append(ProjectAction(name, "set_managed_scans", **toggles))
    plan.actions.sort(key=lambda a: (a.project, _ORDER[a.action]))
    plan.unmatched_patterns = spec.patterns_without_match(list(by_name))
    return plan


def apply_project_plan(client: FindingsClient, plan: ProjectPlan) -> dict[str, int]:
    """Apply each action in plan order; a project that vanished since the plan (404) is skipped.

    Every action sets a target state (add, remove, enable/disable), so a retried task repeats them safely.
    """
    counts = {"applied": 0, "skipped": 0}
    for action in plan.actions:
        try:
            if action.action == "add_tags":
                client.add_project_tags(action.project, list(action.tags))
            elif action.action == "remove_tags":
                client.remove_project_tags(action.project, list(action.tags))
            else:
                client.set_managed_scans(action.project, diff_scan=action.diff_scan, full_scan=action.full_scan)
        except NotFoundError as exc:
            if isinstance(exc, DeploymentNotFoundError):
                raise
            counts["skipped"] += 1
            log.warning("SKIPPED %s: project not found (%s)", action.describe(), exc)
            continue
        counts["applied"] += 1
        log.info("APPLIED %s", action.describe())
    return counts
