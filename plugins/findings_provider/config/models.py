"""The schemas of ``include/pipeline.yaml`` and ``include/projects.yaml``: one pydantic model per section, each
field with its default (what an operator's argument left out takes)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from findings_provider.client.canonical import canonical_enum
from findings_provider.client.limits import (
    DEPENDENCIES_PAGE_SIZE,
    DEPENDENCY_REPOSITORIES_PAGE_SIZE,
    FINDINGS_PAGE_SIZE,
    TICKETS_LIMIT,
    TRIAGE_LIMIT,
)
from findings_provider.client.vocabulary import (
    AutotriageVerdict,
    FindingStatus,
    IssueType,
    PolicyMode,
    Reachability,
    Severity,
    TriageReason,
    TriageState,
    ValidationState,
)


class ConfigError(ValueError):
    """A configuration file is invalid: the message names file, line, field and reason."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=True)


# --- selections from the warehouse ------------------------------------------------------------------------------


#: Selector fields whose values are enums, with their kind in ``client.canonical.VOCABULARIES``.
_SELECTOR_ENUMS = {
    "status": "status", "autotriage_verdict": "verdict", "severity": "severity", "reachability": "reachability",
    "validation_state": "validation_state",
}


class FindingSelector(_Strict):
    """Which warehouse findings a policy selects: every listed value set is matched with OR, fields with AND.

    Enum values take either dialect's spelling and are normalised to the canonical one the warehouse stores
    (``always reachable`` -> ``always_reachable``, ``SEVERITY_HIGH`` -> ``high``, ``FINDING_STATUS_OPEN`` -> ``open``).
    """

    status: list[FindingStatus] | None = None
    autotriage_verdict: list[AutotriageVerdict] | None = None
    severity: list[Severity] | None = None
    reachability: list[Reachability] | None = None
    validation_state: list[ValidationState] | None = None  # secrets: confirmed_valid, confirmed_invalid, ...
    repository_name: list[str] | None = None
    rule_name: list[str] | None = None
    ref: list[str] | None = None

    @field_validator(*_SELECTOR_ENUMS, mode="before")
    @classmethod
    def _canonical_spelling(cls, value: Any, info: ValidationInfo) -> Any:
        kind = _SELECTOR_ENUMS[info.field_name or ""]
        if isinstance(value, str):
            value = [value]
        return [canonical_enum(kind, v) for v in value] if isinstance(value, list) else value

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a dump holds the conditions only, so that validating it again is the same selector (an unset key
        # dumped as null would read as a key left empty)
        return {k: v for k, v in handler(self).items() if v is not None}

    def columns(self) -> dict[str, list[str]]:
        """Column name -> allowed values, for the fields that are set."""
        return {k: list(v) for k, v in self.model_dump(exclude_none=True).items()}

    def problems(self) -> list[str]:
        """Why this selector would not narrow a selection: keys given but left empty, or no condition at all."""
        empty = [
            name for name in sorted(self.model_fields_set)
            if not [v for v in (getattr(self, name) or ()) if str(v).strip()]
        ]
        if empty:
            return [f"select key(s) {', '.join(empty)} left empty (give at least one value, or remove the key)"]
        if not self.columns():
            return ["select names no condition, so it would select every finding of its issue type"]
        return []


#: Most findings one triage policy may triage in one run without a person's approval.
DEFAULT_MAX_TRIAGED = 5000
#: Most tickets one ticket policy may create in one run without a person's approval.
DEFAULT_MAX_TICKETS = 100


_M = TypeVar("_M", bound=BaseModel)


def model_list(model: type[_M], given: Sequence[Any], argument: str) -> list[_M]:
    """An operator's ``argument``: a list of ``model`` given as models or their dicts (as in pipeline.yaml),
    each dict validated here; anything else is refused with a message naming the argument."""
    if given is None or isinstance(given, (str, bytes, dict)):
        raise ConfigError(f"{argument} = {given!r}: give a list of {model.__name__} (models or their dicts, as in "
                          "pipeline.yaml); an empty list does nothing")
    return [item if isinstance(item, model) else model.model_validate(item) for item in given]


class _Policy(_Strict):
    """What every write policy has: a name, an issue type and a selector that must narrow the selection."""

    name: str = Field(min_length=1)
    issue_type: IssueType
    enabled: bool = True
    select: FindingSelector | None  # required; null is reported with the policy's name below

    @model_validator(mode="after")
    def _narrow_selection(self) -> _Policy:
        # reported at the policy's ``select`` (policies.<i>.select), so the error names that line of the file
        problems = ["select is missing or empty"] if self.select is None else self.select.problems()
        if problems:
            message = f"policy {self.name!r}: {problems[0]}"
            raise ValidationError.from_exception_data(type(self).__name__, [InitErrorDetails(
                type=PydanticCustomError("unnarrowed_selection", message), loc=("select",), input=None)])
        return self

    @property
    def selector(self) -> FindingSelector:
        """The validated selector (never None once the policy is valid)."""
        assert self.select is not None
        return self.select

    @classmethod
    def coerce_all(cls, given: Sequence[Any]) -> list[Self]:
        """The ``given`` policies (models, or dicts validated here): an operator's ``policies``."""
        return model_list(cls, given, "policies")


class TriageSet(_Strict):
    triage_state: TriageState
    triage_reason: TriageReason | None = None

    @field_validator("triage_state", "triage_reason", mode="before")
    @classmethod
    def _canonical_spelling(cls, value: Any, info: ValidationInfo) -> Any:
        return canonical_enum(info.field_name or "", value)


class TriagePolicy(_Policy):
    set: TriageSet
    note: str | None = Field(default=None, max_length=2000)
    #: Above this many findings in one run, a person approves first (or the run stops).
    max_findings: int = Field(default=DEFAULT_MAX_TRIAGED, ge=1)


class TicketPolicy(_Policy):
    #: Above this many tickets in one run, a person approves first (or the run stops).
    max_tickets: int = Field(default=DEFAULT_MAX_TICKETS, ge=1)
    #: Ticket again a finding whose ticket of ours the service no longer links (unlinked, its link deleted, or
    #: replaced by a ticket since removed). False: such a finding is recorded and left alone.
    reticket_unlinked: bool = False

    @field_validator("issue_type")
    @classmethod
    def _ticketable(cls, value: Any) -> Any:
        if str(value) == IssueType.AI_SAST.value:
            raise ValueError("ticket creation takes issue_type sast, sca or secrets (no ai_sast tickets)")
        return value


# --- one section per DAG --------------------------------------------------------------------------------------


class Connections(_Strict):
    api_conn_id: str = "findings_api_default"
    warehouse_conn_id: str = "findings_warehouse_default"


class PoolConfig(_Strict):
    name: str = "findings_api"
    slots: int = Field(default=4, ge=1)


class ScanMonitoringConfig(_Strict):
    schedule: str | None = "*/15 * * * *"
    lookback_days: int = Field(default=30, ge=1, le=365)
    overlap_minutes: int = Field(default=15, ge=0)
    sensor_poke_interval: float = Field(default=30, gt=0)
    sensor_timeout: float = Field(default=7200, gt=0)


class ExtractionConfig(_Strict):
    schedule: str | None = "@daily"
    issue_types: list[IssueType] = Field(
        default_factory=lambda: [IssueType.SAST, IssueType.SCA], min_length=1
    )
    page_size: int = FINDINGS_PAGE_SIZE.field(FINDINGS_PAGE_SIZE.maximum)
    overlap_minutes: int = Field(default=60, ge=0)
    #: A full pull is due on this weekday (0 Monday .. 6 Sunday) if the last is 6 days old; None: never.
    full_refresh_weekday: int | None = Field(default=6, ge=0, le=6)
    #: One full pull in every period of this many hours, periods aligned on 00:00 UTC; None: never. Either
    #: trigger suffices. 24 makes the first run of each UTC day a full pull (status and triage changes are
    #: invisible to an incremental one), so they reach the warehouse within a day.
    full_refresh_max_age_hours: float | None = Field(default=24, gt=0)


class TriageConfig(_Strict):
    #: Besides the findings Asset, also run on this schedule (a cron or preset); None: on the Asset only.
    schedule: str | None = None
    dry_run: bool = False
    approval_threshold: int | None = Field(default=None, ge=0)
    chunk_size: int = TRIAGE_LIMIT.field()
    policies: list[TriagePolicy] = Field(default_factory=list)


class TicketConfig(_Strict):
    #: Besides the triage Asset, also run on this schedule (a cron or preset); None: on the Asset only.
    schedule: str | None = None
    dry_run: bool = False
    tracker_project_id: str | None = Field(default=None, pattern=r"^[0-9]+$")
    tickets_per_call: int = TICKETS_LIMIT.field()
    group_issues: bool = True
    policies: list[TicketPolicy] = Field(default_factory=list)

    @field_validator("tracker_project_id", mode="before")
    @classmethod
    def _digits(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class ModeRule(_Strict):
    name: str
    from_modes: list[PolicyMode] = Field(min_length=1)
    to_mode: PolicyMode
    metric: Literal["false_positive_share", "true_positive_share", "human_false_positive_share"]
    above: float = Field(ge=0, le=1)
    min_findings: int = Field(default=20, ge=1)


class PolicyTuningConfig(_Strict):
    schedule: str | None = "@weekly"
    dry_run: bool = True
    policies: list[str] = Field(default_factory=list)
    rules: list[ModeRule] = Field(default_factory=list)


#: Most projects one project_settings run may change (one PATCH each) unless pipeline.yaml says otherwise.
DEFAULT_MAX_PROJECTS_CHANGED = 50


class ProjectSettingsConfig(_Strict):
    schedule: str | None = "@daily"
    dry_run: bool = False
    file: str = "projects.yaml"
    #: A plan that changes more projects than this is not applied (the run fails before any write, saying so).
    max_projects_changed: int = Field(default=DEFAULT_MAX_PROJECTS_CHANGED, ge=1)


class PackageSelector(_Strict):
    name: str
    exact_name_match: bool = True
    exact_version: str | None = None
    version_lower_bound: str | None = None
    version_upper_bound: str | None = None


class DependencyFilters(_Strict):
    licenses: list[str] = Field(default_factory=list)
    packages: list[PackageSelector] = Field(default_factory=list)


class SbomConfig(_Strict):
    """``dependency_inventory.sbom``: the SBOM export after the inventory pull (``SbomExportOperator``)."""

    enabled: bool = True
    cyclonedx_version: Literal["1.4", "1.5", "1.6", "1.7"] = "1.6"
    poll_interval: float = Field(default=5.0, gt=0)
    max_poll_interval: float = Field(default=60.0, gt=0)
    timeout: float = Field(default=3600.0, gt=0)


class DependencyInventoryConfig(_Strict):
    schedule: str | None = "@daily"
    page_size: int = DEPENDENCIES_PAGE_SIZE.field(DEPENDENCIES_PAGE_SIZE.maximum)
    repositories_page_size: int = DEPENDENCY_REPOSITORIES_PAGE_SIZE.field(
        DEPENDENCY_REPOSITORIES_PAGE_SIZE.maximum)
    filters: DependencyFilters = Field(default_factory=DependencyFilters)
    sbom: SbomConfig = Field(default_factory=SbomConfig)


#: What an alert is about (``findings_provider.alerts``); a channel takes every kind unless ``events`` says.
AlertKind = Literal["scan_failed", "pipeline_failed", "approval_waiting", "new_critical", "sla_breach",
                    "deadline_missed", "policy_api_retired"]
ALERT_KINDS: tuple[AlertKind, ...] = get_args(AlertKind)


_Minutes = Annotated[float | None, Field(default=None, gt=0)]


class Deadlines(_Strict):
    """Airflow Deadline alerts (3.2+): per pipeline DAG, minutes after a run was queued by which it should have
    finished; a run still going then sends ``deadline_missed`` (from the triggerer). Null: no deadline (the
    default for every DAG: Airflow 3.3.2's ``dag.test()`` fails on a DAG with a deadline). A DAG id that is not one
    of the pipeline's is refused (a typo must not silently mean "no deadline"). ``include/pipeline.yaml`` lists the
    recommended values."""

    scan_monitoring: _Minutes = None
    findings_extraction: _Minutes = None
    autotriage_triage: _Minutes = None
    ticket_creation: _Minutes = None
    policy_tuning: _Minutes = None
    project_settings: _Minutes = None
    dependency_inventory: _Minutes = None

    def minutes(self, dag_id: str) -> float | None:
        """The deadline of ``dag_id`` in minutes, or None."""
        value = getattr(self, dag_id, None)
        return None if value is None else float(value)


class _Channel(_Strict):
    #: Alert kinds this channel receives (default: every kind).
    events: list[AlertKind] = Field(default_factory=lambda: list(ALERT_KINDS), min_length=1)


class SmtpChannel(_Channel):
    """Mail through an Airflow SMTP connection (the SMTP provider's hook): ``to`` one or more addresses."""

    type: Literal["smtp"]
    conn_id: str = "smtp_default"
    to: list[str] = Field(min_length=1)
    from_email: str | None = None  # None: the connection's ``from_email``


class NotifierChannel(_Channel):
    """Any Airflow notifier class (``airflow.providers.slack.notifications.slack_webhook.SlackWebhookNotifier``,
    ...), built with ``kwargs``; ``{subject}``, ``{body}`` and ``{link}`` in a string value are the alert's."""

    type: Literal["notifier"]
    class_: str = Field(alias="class", min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class AlertsConfig(_Strict):
    """Where alerts go. None configured: every alert is logged as a warning saying so (never dropped silently)."""

    #: True: a failed or never-finished scan also fails the scan_monitoring run (red), besides the alert.
    fail_on_alert: bool = False
    channels: list[Annotated[SmtpChannel | NotifierChannel, Field(discriminator="type")]] = Field(
        default_factory=list)
    deadlines: Deadlines = Field(default_factory=Deadlines)


_Days = Annotated[int | None, Field(default=None, ge=1)]


class FixDays(_Strict):
    """Days from a finding's ``relevant_since`` by which it should be fixed, per severity; null or not named: no
    target."""

    critical: _Days = None
    high: _Days = None
    medium: _Days = None
    low: _Days = None

    def targets(self) -> dict[str, int]:
        """The severities that have a target, most severe first, with their days."""
        return {name: days for name, days in self.model_dump().items() if days is not None}


class SlaConfig(_Strict):
    """Fix-time targets (``fix_days``). Open findings past their target are SLA breaches (dashboard, report,
    ``sla_breach`` alerts). Without an ``sla`` section: critical 7, high 30, medium 90 days."""

    fix_days: FixDays = Field(default_factory=lambda: FixDays(critical=7, high=30, medium=90))


class DashboardConfig(_Strict):
    """The findings dashboard in the Airflow UI (``findings_provider.dashboard``)."""

    #: Link of a finding in the service's own UI; ``{id}``, ``{issue_type}``, ``{repository}`` are the finding's.
    #: None: the finding's ``line_of_code_url`` (the code it points at), when the service gave one.
    finding_url: str | None = None
    #: Findings per page of the findings table.
    page_size: int = Field(default=100, ge=10, le=1000)


class PipelineConfig(_Strict):
    """The whole of ``include/pipeline.yaml``."""

    connections: Connections = Field(default_factory=Connections)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    scan_monitoring: ScanMonitoringConfig = Field(default_factory=ScanMonitoringConfig)
    findings_extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    autotriage_triage: TriageConfig = Field(default_factory=TriageConfig)
    ticket_creation: TicketConfig = Field(default_factory=TicketConfig)
    policy_tuning: PolicyTuningConfig = Field(default_factory=PolicyTuningConfig)
    project_settings: ProjectSettingsConfig = Field(default_factory=ProjectSettingsConfig)
    dependency_inventory: DependencyInventoryConfig = Field(default_factory=DependencyInventoryConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    sla: SlaConfig = Field(default_factory=SlaConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    #: The file this was loaded from (to resolve relative paths such as ``project_settings.file``).
    source: Path | None = Field(default=None, exclude=True)


# --- project settings as code -----------------------------------------------------------------------------------


#: Characters git refuses in a branch name (``git check-ref-format``), besides whitespace and control characters.
_REF_FORBIDDEN = frozenset("~^:?*[\\")
#: Longest branch name accepted (the service's own limit is not documented; git's practical one).
BRANCH_NAME_MAX = 255
BRANCH_NAME_RULE = (
    "a branch name as git allows it (e.g. main, release/2024): 1 to 255 characters, no whitespace, none of "
    "~ ^ : ? * [ \\, no '..', '//' or '@{', not starting with '-' or '/', no part starting with '.', not ending "
    "with '/', '.' or '.lock'"
)


def branch_name_problem(name: str) -> str | None:
    """Why ``name`` is not a branch name git would create (``git check-ref-format --branch``), or None."""
    if not name or len(name) > BRANCH_NAME_MAX:
        return f"it has {len(name)} characters"
    bad = sorted({c for c in name if c in _REF_FORBIDDEN or c.isspace() or ord(c) < 32 or ord(c) == 127})
    if bad:
        return f"it contains {' '.join(repr(c) for c in bad)}"
    for part in ("..", "//", "@{"):
        if part in name:
            return f"it contains {part!r}"
    if name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")) or name == "@":
        return "of how it starts or ends"
    if any(piece.startswith(".") for piece in name.split("/")):
        return "a part of it starts with '.'"
    return None


class ProjectRule(_Strict):
    match: str = Field(min_length=1)
    tags: list[str] | None = None
    diff_scan: bool | None = None
    full_scan: bool | None = None
    #: The branch the service treats as the project's primary one (its findings count; the UI's dedup).
    primary_branch: str | None = None

    @field_validator("primary_branch")
    @classmethod
    def _branch_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        problem = branch_name_problem(value)
        if problem is not None:
            raise ValueError(f"primary_branch {value!r} is not a branch name ({problem}); give {BRANCH_NAME_RULE}")
        return value

    @property
    def is_catch_all(self) -> bool:
        """The pattern names no part of a project's name (``*``, ``*/*``, ``**``): it matches every project, so it
        does not count as mentioning one (see ``ProjectsFile.mentions``)."""
        return set(self.match) <= {"*", "?", "/"}


class ProjectsFile(_Strict):
    """``include/projects.yaml``: desired tags and managed scans per project name or glob."""

    managed_tags: list[str] = Field(default_factory=list)
    projects: list[ProjectRule] = Field(default_factory=list)

    @field_validator("projects")
    @classmethod
    def _tags_are_managed(cls, projects: list[ProjectRule], info: ValidationInfo) -> list[ProjectRule]:
        # Reported at the entry's ``tags`` (projects.<i>.tags), so the error names that line of the file.
        managed = set(info.data.get("managed_tags") or ())
        errors = []
        for i, rule in enumerate(projects):
            unknown = sorted(set(rule.tags or ()) - managed)
            if unknown:
                message = (
                    f"projects[{i}] ({rule.match!r}) sets tags {unknown} that are not in managed_tags; "
                    "add them to managed_tags so the file can also remove them"
                )
                errors.append(
                    InitErrorDetails(
                        type=PydanticCustomError("unmanaged_tags", message), loc=(i, "tags"), input=rule.tags
                    )
                )
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return projects

    def desired(self, project_name: str) -> ProjectRule | None:
        """The merged desired settings of a project (later matching entries win), or None if none match."""
        merged: dict[str, Any] = {}
        for rule in self.projects:
            if fnmatch.fnmatchcase(project_name, rule.match):
                merged.update(rule.model_dump(exclude_none=True, exclude={"match"}))
        return ProjectRule(match=project_name, **merged) if merged else None

    def mentions(self, project_name: str) -> bool:
        """Whether an entry other than a catch-all (``*``, ``*/*``: patterns of wildcards only) matches the project:
        a project no other entry matches is reported as not mentioned by the file (drift)."""
        return any(not r.is_catch_all and fnmatch.fnmatchcase(project_name, r.match) for r in self.projects)

    def patterns_without_match(self, project_names: list[str]) -> list[str]:
        """Patterns (or exact names) that match no project the deployment has."""
        return [r.match for r in self.projects if not fnmatch.filter(project_names, r.match)]
