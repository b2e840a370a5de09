"""Project settings as code: the difference between ``projects.yaml`` and the deployment, and applying it.

For every project a pattern of the file matches (later entries override earlier ones):

- ``tags`` given: add the missing ones; remove the project's tags that are in ``managed_tags`` but not wanted.
  Tags outside ``managed_tags`` are never removed. An entry without ``tags`` leaves the project's tags alone.
- ``diff_scan`` / ``full_scan`` given: toggle the managed scan when it differs.
- ``primary_branch`` given: set it when the service's differs (or the service names none).

The plan is deterministic (projects by name; per project: add tags, remove tags, managed scans, primary branch)
and prints one line per action. Patterns or names that match no project of the deployment are reported and
skipped. Drift is reported and never changed (see :class:`ProjectDrift`).

Applying uses the reference's endpoints wherever they suffice, so a server that serves only those (no
``GET``/``PATCH .../projects/{name}``) applies a file that manages tags and managed scans: tags through the delta
endpoints (``PUT``/``DELETE .../tags``: only the tags to add or remove; a tag a person adds meanwhile is never
overwritten), managed scans through ``PATCH .../managed-scan``. Only a primary branch needs the project PATCH of the
real service (api-notes "Projects"); a project whose primary branch changes gets its managed scans in that same
PATCH. Right before the first write the projects are listed once more: each project's writes carry only what still
differs from that listing (nothing: no request). The service's answers are stored in the warehouse's ``projects``
table (the counted copy of a finding follows the primary branch at once).

The real service's listing leaves ``managed_scan_config`` out (api-notes "Projects"). The managed scans of a listed
project without it are read with ``GET .../projects/{name}`` (:class:`ManagedScanReader`), for the projects whose
entry sets ``diff_scan`` or ``full_scan`` only (when planning) and for the projects whose plan sets them (when
applying), so a second run plans nothing. A server that does not serve that GET (405, 501, or 404 for two listed
projects before it ever answered one: a 404 alone cannot tell a route it lacks from a project deleted since the
listing) is not asked again in the task: the managed scans of the projects left unread are planned and sent as
they are wanted (the write sets a state, so sending it again changes nothing), marked ``current state unknown`` in
the plan, and said once in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from findings_provider.client.errors import DeploymentNotFoundError, FindingsApiError, NotFoundError
from findings_provider.client.limits import PROJECTS_PAGE_SIZE
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
#: Statuses that say the server does not serve ``GET .../projects/{name}`` at all (Method Not Allowed, Not
#: Implemented): no project's managed scans are read there.
GET_PROJECT_NOT_SERVED = frozenset({405, 501})
#: 404s for listed projects, before any answer, after which ``GET .../projects/{name}`` counts as not served.
GET_PROJECT_404S_NOT_SERVED = 2


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
    #: ``set_managed_scans`` only: the service did not say the project's managed scans (the listing leaves them out
    #: and the project could not be read), so they are set as wanted whatever they are.
    state_unknown: bool = False

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
            if self.state_unknown:
                detail += " (current state unknown: set as wanted)"
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
        """The projects the plan changes, in plan order."""
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
            "managed_scans_unknown": sum(a.state_unknown for a in self.actions),
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
            unknown = any(_enabled(project, which) is None for which in toggles)
            plan.actions.append(ProjectAction(name, "set_managed_scans", **toggles, state_unknown=unknown))
        if desired.primary_branch is not None and project.primary_branch != desired.primary_branch:
            plan.actions.append(ProjectAction(name, "set_primary_branch", primary_branch=desired.primary_branch,
                                              previous=project.primary_branch or None))
    plan.actions.sort(key=lambda a: (a.project, _ORDER[a.action]))
    plan.unmatched_patterns = spec.patterns_without_match(list(by_name))
    return plan


def sets_managed_scans(spec: ProjectsFile, name: str) -> bool:
    """Whether the file's entry for project ``name`` sets ``diff_scan`` or ``full_scan``."""
    desired = spec.desired(name)
    return desired is not None and (desired.diff_scan is not None or desired.full_scan is not None)


class ManagedScanReader:
    """Reads the managed scans a listing leaves out (the real service's) with ``get_project``, one project at a
    time, and stops asking once the server shows it does not serve that route (see the module's docstring)."""

    def __init__(self, client: FindingsClient) -> None:
        self._client = client
        #: None until ``GET .../projects/{name}`` answered (True) or showed it is not served (False).
        self.served: bool | None = None
        self._misses = 0
        self._why = ""
        #: Projects whose managed scans stayed unknown.
        self.unread: list[str] = []

    def complete(self, projects: Iterable[Project], names: Iterable[str]) -> list[Project]:
        """``projects``, those named in ``names`` that lack ``managed_scan_config`` with the one the service
        answers for them (other fields as listed). Logs once when some stayed unknown."""
        wanted = set(names)
        out: list[Project] = []
        asked = 0
        for project in projects:
            if project.name in wanted and project.managed_scan_config is None:
                asked += 1
                project = self._read(project)
            out.append(project)
        if asked:
            log.info("read the managed scans of %d listed projects one by one (the listing leaves them out): %d "
                     "unknown", asked, len(self.unread))
        if self.unread:
            log.warning(
                "managed scans of %d projects could not be read (%s): their wanted managed-scan settings are sent "
                "as they are each run (the write sets a state, so it changes nothing when they are set already); "
                "first: %s", len(self.unread), self._why or "no managed_scan_config in the answer",
                ", ".join(self.unread[:5]))
        return out

    def _unknown(self, project: Project) -> Project:
        self.unread.append(project.name)
        return project

    def _read(self, project: Project) -> Project:
        if self.served is False:
            return self._unknown(project)
        try:
            answered = self._client.get_project(project.name)
        except DeploymentNotFoundError:
            raise
        except NotFoundError as exc:
            if not self.served:  # never answered: the route may be missing (or the project gone since listed)
                self._misses += 1
                if self._misses >= GET_PROJECT_404S_NOT_SERVED:
                    self.served = False
                    self._why = (f"GET of a project answered 404 for {self._misses} listed projects and never "
                                 f"answered one: taken as not served ({exc.endpoint}, HTTP {exc.status_code})")
            log.info("managed scans of %s unknown: %s", project.name, exc)
            return self._unknown(project)
        except FindingsApiError as exc:
            if exc.status_code not in GET_PROJECT_NOT_SERVED:
                raise
            self.served = False
            self._why = f"the server does not serve GET of a project: HTTP {exc.status_code}"
            return self._unknown(project)
        self.served = True
        if answered.managed_scan_config is None:
            return self._unknown(project)
        return project.model_copy(update={"managed_scan_config": answered.managed_scan_config})


def read_managed_scans(client: FindingsClient, projects: Iterable[Project], spec: ProjectsFile) -> list[Project]:
    """The listed ``projects``, with the managed scans the listing leaves out read for those whose entry sets
    ``diff_scan`` or ``full_scan`` (the others are not asked about)."""
    listed = list(projects)
    return ManagedScanReader(client).complete(listed, [p.name for p in listed if sets_managed_scans(spec, p.name)])


@dataclass(frozen=True)
class ProjectWrites:
    """What one project still needs, against its fresh state: tags to add and to remove (sent as deltas), managed
    scans and a primary branch. Empty: the project is in shape."""

    add_tags: tuple[str, ...] = ()
    remove_tags: tuple[str, ...] = ()
    scans: dict[str, bool] = field(default_factory=dict)
    primary_branch: str | None = None

    def __bool__(self) -> bool:
        return bool(self.add_tags or self.remove_tags or self.scans or self.primary_branch)

    def describe(self) -> str:
        """The requests, e.g. ``PUT tags +pci, PATCH managed-scan full_scan=on``."""
        parts = []
        if self.add_tags:
            parts.append("PUT tags " + " ".join(f"+{t}" for t in self.add_tags))
        if self.remove_tags:
            parts.append("DELETE tags " + " ".join(f"-{t}" for t in self.remove_tags))
        scans = " ".join(f"{k}={'on' if v else 'off'}" for k, v in self.scans.items())
        if self.primary_branch:
            parts.append(f"PATCH project primary_branch={self.primary_branch}" + (f" {scans}" if scans else ""))
        elif scans:
            parts.append(f"PATCH managed-scan {scans}")
        return ", ".join(parts)


def remaining_writes(project: Project, actions: Iterable[ProjectAction]) -> ProjectWrites:
    """What is left of ``actions`` for ``project`` as the service has it now: the planned tags to add that it
    lacks, the planned tags to remove that it carries, the managed scans that differ (or that it does not state:
    the listing leaves them out and they could not be read) and the primary branch when it differs."""
    add: list[str] = []
    remove: list[str] = []
    scans: dict[str, bool] = {}
    branch: str | None = None
    current = set(project.tags)
    for action in actions:
        if action.action == "add_tags":
            add += [t for t in action.tags if t not in current and t not in add]
        elif action.action == "remove_tags":
            remove += [t for t in action.tags if t in current and t not in remove]
        elif action.action == "set_managed_scans":
            for which in ("diff_scan", "full_scan"):
                want = getattr(action, which)
                if want is not None and _enabled(project, which) is not want:
                    scans[which] = want
        elif action.primary_branch and project.primary_branch != action.primary_branch:
            branch = action.primary_branch
    return ProjectWrites(tuple(add), tuple(remove), scans, branch)


def _write(client: FindingsClient, name: str, writes: ProjectWrites, answered: dict[str, Project]) -> None:
    """Send ``writes`` for project ``name``, keeping each answer of the service in ``answered`` as it arrives (the
    last is the project after all of them)."""
    if writes.add_tags:
        answered[name] = client.add_project_tags(name, list(writes.add_tags))
    if writes.remove_tags:
        answered[name] = client.remove_project_tags(name, list(writes.remove_tags))
    diff_scan, full_scan = writes.scans.get("diff_scan"), writes.scans.get("full_scan")  # None: left alone
    if writes.primary_branch:  # the one write the reference lacks; the managed scans ride along in it
        answered[name] = client.update_project(name, primary_branch=writes.primary_branch, diff_scan=diff_scan,
                                               full_scan=full_scan)
    elif writes.scans:
        answered[name] = client.set_managed_scans(name, diff_scan=diff_scan, full_scan=full_scan)


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
                       max_projects_changed: int | None = None,
                       page_size: int = PROJECTS_PAGE_SIZE.default) -> dict[str, int]:
    """Apply the plan with the fewest endpoints a server must serve (see the module's docstring).

    Right before the first write the projects are listed once (``page_size`` a page), and the managed scans the
    listing leaves out are read (``get_project``) for the projects whose plan sets them; per project of the plan
    the writes carry what still differs from that state: tags as deltas (``add_project_tags``,
    ``remove_project_tags``), the primary branch with the managed scans in one ``update_project``, or the managed
    scans alone through ``set_managed_scans``. A project no longer listed, or answered 404 (gone since), is
    skipped. The projects the service answered are stored in ``warehouse`` (when given), also when a later project
    fails. Every write sets a target state, so a retried task repeats it safely.

    Returns counts of projects: ``changed`` (written to), ``unchanged`` (in shape in the listing), ``skipped``
    (gone).
    """
    from findings_provider.warehouse.branches import store_projects

    check_cap(plan, max_projects_changed)
    by_project: dict[str, list[ProjectAction]] = {}
    for action in plan.actions:
        by_project.setdefault(action.project, []).append(action)
    counts = {"changed": 0, "unchanged": 0, "skipped": 0}
    if not by_project:
        return counts
    listed = list(client.items(client.list_projects, page_size=page_size))
    log.info("listed %d projects right before applying the plan's %d", len(listed), len(by_project))
    scans = [name for name, actions in by_project.items() if any(a.action == "set_managed_scans" for a in actions)]
    fresh = {p.name: p for p in ManagedScanReader(client).complete(listed, scans)}
    answered: dict[str, Project] = {}
    try:
        for name, actions in by_project.items():
            project = fresh.get(name)
            if project is None:
                counts["skipped"] += 1
                log.warning("SKIPPED %s: no longer listed", name)
                continue
            writes = remaining_writes(project, actions)
            if not writes:
                counts["unchanged"] += 1
                log.info("UNCHANGED %s: in shape when listed", name)
                continue
            try:
                _write(client, name, writes, answered)
            except NotFoundError as exc:
                if isinstance(exc, DeploymentNotFoundError):
                    raise
                counts["skipped"] += 1
                log.warning("SKIPPED %s: project not found (%s)", name, exc)
                continue
            counts["changed"] += 1
            log.info("APPLIED %s: %s", name, writes.describe())
    finally:
        if answered and warehouse is not None:
            store_projects(warehouse, list(answered.values()), complete=False)
    return counts
