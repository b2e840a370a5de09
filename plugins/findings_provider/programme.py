"""The programme's numbers, defined once: what "open", "overdue", "triaged", "ticketed" and "fixed" mean, as
conditions over the warehouse's ``findings`` table.

Every page of the dashboard, the summary report, the alerts and the metrics count through these conditions, and
every number the dashboard shows links to the findings list with the same :class:`FindingFilter`, whose total is
the same count. So a number means the same everywhere and can be reproduced by the list it links to (and by SQL:
``docs/dashboard.md`` writes each definition out).

- **open**: status ``open``, ``reviewing`` or ``fixing`` (``OPEN_STATUSES``): not fixed and not ignored.
- **overdue**: open, with a fix-time target for its severity (``sla.fix_days``), detected (``relevant_since``)
  more than that many days ago.
- **triaged**: a person or a policy set its triage state (``triage_state`` other than empty or ``untriaged``).
- **ticketed**: it has an issue-tracker ticket (``external_ticket_id``).
- **fixed**: status ``fixed``.
- **failed scans**: scans that ended in error or never finished, started in the last 7 days.

Every number counts a finding found on several branches once, as the service's web UI does: the copy on the
project's primary branch, else the latest (``findings.counted``, :mod:`findings_provider.warehouse.branches`);
secrets on every branch. A page can ask for every branch's copy instead (``branches="all"``, ``BRANCH_VIEWS``);
the findings a run wrote to (``touched``) are listed with every copy the run wrote.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, false, func, literal, or_, select, true

from findings_provider.client.vocabulary import OPEN_STATUSES, FindingStatus, ScanStatus
from findings_provider.warehouse import schema
from findings_provider.warehouse.branches import is_counted
from findings_provider.warehouse.schema import findings, scans

#: The programme's numbers: name -> what a page says of it.
MEASURES: dict[str, str] = {
    FindingStatus.OPEN.value: "Open",  # open, reviewing or fixing: named after the first
    "overdue": "Past fix-time target",
    "triaged": "Triaged",
    "ticketed": "Ticketed",
    FindingStatus.FIXED.value: "Fixed",
}
#: Which copies of a finding found on several branches a number counts (``FindingFilter.branches``): name ->
#: what a page says of it.
BRANCH_VIEWS: dict[str, str] = {
    "": "Counted as the service counts them: a finding on several branches once (its copy on the project's "
        "primary branch, else the latest); secrets on every branch",
    "all": "Every branch's copy of each finding",
}
#: What the findings list can be sorted by: name -> label.
SORTS: dict[str, str] = {
    "severity": "Severity",
    "age": "Age",
    "due": "Due date",
    "repository": "Repository",
    "rule": "Rule",
    "id": "Type and id",
}
#: What a run can have written to a finding (``touched``): triaged it, or created its ticket.
TOUCHED = ("triage", "ticket")
_UNTRIAGED = ("", "untriaged")
#: The ``severity`` filter value of findings without a severity (NULL or empty; the word the pages show for them).
UNKNOWN_SEVERITY = "unknown"


def _allowed(field: str, value: str, allowed: Any) -> None:
    if value and value not in allowed:
        choices = ", ".join(sorted(a or "(empty)" for a in allowed))
        raise ValueError(f"{field} = {value!r}: expected one of {choices}")


@dataclass(frozen=True)
class FindingFilter:
    """A selection of findings: what a number counts and what the findings list shows.

    Every field is optional (empty matches everything, except ``branches``: empty counts one copy of a finding
    found on several branches, ``all`` every copy; see ``BRANCH_VIEWS``). ``repository_contains`` and
    ``rule_contains`` match part of the name, ignoring case; the others match the exact value. ``run_id`` with
    ``touched`` (``triage`` or ``ticket``) keeps the findings that run wrote to, every copy of them (the caller
    resolves them: :meth:`where` takes the ids).
    """

    measure: str = ""
    issue_type: str = ""
    severity: str = ""
    status: str = ""
    repository: str = ""
    repository_contains: str = ""
    rule: str = ""
    rule_contains: str = ""
    run_id: str = ""
    touched: str = ""
    branches: str = ""

    def __post_init__(self) -> None:
        _allowed("measure", self.measure, MEASURES)
        _allowed("branches", self.branches, BRANCH_VIEWS)
        _allowed("touched", self.touched, TOUCHED)
        if self.touched and not self.run_id:
            raise ValueError(f"touched = {self.touched!r} needs a run_id")

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> FindingFilter:
        """From URL query parameters (unknown ones are ignored; values are stripped)."""
        return cls(**{f.name: str(params.get(f.name) or "").strip() for f in fields(cls)})

    def query(self) -> dict[str, str]:
        """The URL query parameters that give this filter back (``from_query``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    def narrowed(self, **values: str) -> FindingFilter:
        """This filter with some fields replaced (a number's link: this view, one severity)."""
        return replace(self, **values)

    def where(self, targets: Mapping[str, int], now: datetime,
              touched_ids: Mapping[str, set[int]] | None = None) -> list[Any]:
        """The SQL conditions over ``findings``; ``touched_ids`` (issue type -> ids) when ``touched`` is set."""
        conditions: list[Any] = []
        if not self.branches and not self.touched:
            conditions.append(is_counted())
        if self.measure:
            conditions.append(measure_condition(self.measure, targets, now))
        for name, column in (("issue_type", findings.c.issue_type), ("severity", findings.c.severity),
                             ("status", findings.c.status), ("repository", findings.c.repository_name),
                             ("rule", findings.c.rule_name)):
            value = getattr(self, name)
            if name == "severity" and value == UNKNOWN_SEVERITY:
                conditions.append(or_(column.is_(None), column.in_(("", UNKNOWN_SEVERITY))))
            elif value:
                conditions.append(column == value)
        for name, column in (("repository_contains", findings.c.repository_name),
                             ("rule_contains", findings.c.rule_name)):
            value = getattr(self, name)
            if value:
                conditions.append(column.in_(names_containing(column, value)))
        if self.touched:
            ids = touched_ids or {}
            conditions.append(or_(false(), *(and_(findings.c.issue_type == t, findings.c.id.in_(sorted(v)))
                                             for t, v in ids.items() if v)))
        return conditions


def distinct_values(column: Any) -> Any:
    """The distinct values of ``column`` (indexed, leading an index), NULL excepted, as a SELECT of one column
    ``value``: the index is read from one value to the next (a loose index scan: a seek per distinct value, not a
    step per finding)."""
    def after(previous: Any) -> Any:
        return select(column).where(previous).order_by(column).limit(1).scalar_subquery()
    values = select(after(column.is_not(None)).label("value")).cte(f"{column.name}_values", recursive=True)
    values = values.union_all(select(after(column > values.c.value)).where(values.c.value.is_not(None)))
    return select(values.c.value).where(values.c.value.is_not(None))


def names_containing(column: Any, text: str) -> Any:
    """The distinct values of ``column`` (indexed) that contain ``text``, ignoring case, as a SELECT: only the
    few hundred names (``distinct_values``) are matched; a finding then matches when its name is one of them."""
    names = distinct_values(column).subquery()
    return select(names.c.value).where(func.lower(names.c.value).contains(text.lower(), autoescape=True))


def in_view(branches: str = "") -> Any:
    """The copies a number counts in the view ``branches`` (``BRANCH_VIEWS``): for the counts that do not go
    through a :class:`FindingFilter` (per repository, per issue type, the report's tables, the alerts)."""
    _allowed("branches", branches, BRANCH_VIEWS)
    return true() if branches else is_counted()


def is_open() -> Any:
    return findings.c.status.in_(OPEN_STATUSES)


def is_overdue(targets: Mapping[str, int], now: datetime) -> Any:
    """Open and detected longer ago than its severity's fix-time target (no target: never overdue)."""
    return and_(is_open(), or_(false(), *(past_target(severity, days, now) for severity, days in targets.items())))


def past_target(severity: str, days: int, now: datetime) -> Any:
    """Of severity ``severity`` and detected longer than its fix-time target (``days``) ago (open or not)."""
    return and_(findings.c.severity == severity, findings.c.relevant_since < now - timedelta(days=days))


def days_past_target(since: datetime | None, severity: str | None, targets: Mapping[str, int],
                     now: datetime) -> int | None:
    """How many days a finding detected at ``since`` is past its severity's fix-time target, in whole days rounded
    up (a finding past its target by an hour is 1 day late, as :func:`is_overdue` counts it overdue); None when
    its severity has no target or it is not past it. The one number the findings list, its CSV, the report's SLA
    table and the alerts show (whether the finding is still open is the caller's condition)."""
    target = targets.get(severity or "")
    if since is None or target is None:
        return None
    late = (now - since).total_seconds() / 86400 - target
    return math.ceil(late) if late > 0 else None


def measure_condition(measure: str, targets: Mapping[str, int], now: datetime) -> Any:
    """The condition of one of ``MEASURES``."""
    if measure == "open":
        return is_open()
    if measure == "overdue":
        return is_overdue(targets, now)
    if measure == "triaged":
        return and_(findings.c.triage_state.is_not(None), findings.c.triage_state.not_in(_UNTRIAGED))
    if measure == "ticketed":
        return findings.c.external_ticket_id.is_not(None)
    if measure == "fixed":
        return findings.c.status == FindingStatus.FIXED.value
    raise ValueError(f"measure = {measure!r}: expected one of {', '.join(MEASURES)}")


#: The column a number's index leads with, ordered by severity next (``ix_findings_programme``,
#: ``ix_findings_triaged``): grouped by it too, a count reads its index in order instead of sorting what it read.
_LEADING = {FindingStatus.OPEN.value: findings.c.status, "overdue": findings.c.status,
            FindingStatus.FIXED.value: findings.c.status, "triaged": findings.c.triage_state}


def counts_by_severity(conn: Any, measure: str, targets: Mapping[str, int], now: datetime,
                       base: FindingFilter | None = None) -> dict[str, int]:
    """Findings of ``measure`` (within ``base``) per severity (``""`` for none): one query, or one per severity
    with a target for the findings past it (each reads the range of its severity and detection times)."""
    return {severity: n for (_, severity), n in _counts(conn, measure, targets, now, base, by_type=False).items()}


def counts_by_type_and_severity(conn: Any, measure: str, targets: Mapping[str, int], now: datetime,
                                base: FindingFilter | None = None) -> dict[tuple[str, str], int]:
    """Findings of ``measure`` (within ``base``) per (issue type, severity) (``""`` for none): one query per
    issue type present (the types found by a loose index scan), each reading its own findings in index order."""
    return _counts(conn, measure, targets, now, base, by_type=True)


def _counts(conn: Any, measure: str, targets: Mapping[str, int], now: datetime, base: FindingFilter | None,
            by_type: bool) -> dict[tuple[str, str], int]:
    where = (base or FindingFilter()).narrowed(measure=measure).where(targets, now)
    parts: list[list[Any]] = [[]]
    if measure == "overdue":  # past the target: only severities with one, each its own range of the index
        parts = [[past_target(severity, days, now)] for severity, days in targets.items()]
    if by_type:
        parts = [[*part, findings.c.issue_type == issue_type] for part in parts
                 for issue_type in conn.execute(distinct_values(findings.c.issue_type)).scalars()]
    keys = [k for k in (_LEADING.get(measure), findings.c.severity) if k is not None]
    out: dict[tuple[str, str], int] = {}
    for part in parts:
        issue_type = str(part[-1].right.value) if by_type else ""
        for *_, severity, n in conn.execute(select(*keys, func.count()).where(*where, *part).group_by(*keys)):
            key = (issue_type, str(severity or ""))
            out[key] = out.get(key, 0) + int(n)
    return out


def count(conn: Any, selection: FindingFilter, targets: Mapping[str, int], now: datetime,
          touched_ids: Mapping[str, set[int]] | None = None) -> int:
    """How many findings ``selection`` holds: the total of its findings list."""
    return int(conn.execute(select(func.count()).select_from(findings).where(
        *selection.where(targets, now, touched_ids))).scalar_one())


def severity_rank() -> Any:
    """0 for the most severe known severity, larger for the others, unknown last (``schema.severity_rank``: the
    expression ``ix_findings_severity_order`` indexes)."""
    return schema.severity_rank(findings.c.severity)


def due_seconds(targets: Mapping[str, int], dialect: str) -> Any:
    """A finding's fix-time deadline as seconds since the epoch (NULL without a target), for sorting by due
    date on SQLite (text timestamps) and PostgreSQL."""
    since: Any
    if dialect == "sqlite":
        since = func.cast(func.strftime("%s", func.substr(findings.c.relevant_since, 1, 19)), findings.c.id.type)
    else:
        since = func.extract("epoch", findings.c.relevant_since)
    days = case({s: literal(d * 86400) for s, d in targets.items()}, value=findings.c.severity, else_=None)
    return since + days


def order_by(sort: str, descending: bool, targets: Mapping[str, int], dialect: str) -> list[Any]:
    """The ORDER BY of the findings list for ``sort`` (``SORTS``), with (issue type, id) to break ties."""
    _allowed("sort", sort, SORTS)
    keys: list[Any]
    if sort == "severity":
        keys = [severity_rank(), findings.c.relevant_since]  # most severe first, oldest first within
        keys = [k.desc() if descending else k for k in keys]
    elif sort == "age":  # oldest first: ascending age
        keys = [findings.c.relevant_since.desc() if descending else findings.c.relevant_since]
    elif sort == "due":  # soonest (or longest overdue) first; no target last
        due = due_seconds(targets, dialect)
        keys = [due.is_(None), due.desc() if descending else due]
    elif sort == "repository":
        keys = [findings.c.repository_name.desc() if descending else findings.c.repository_name, severity_rank()]
    elif sort == "rule":
        keys = [findings.c.rule_name.desc() if descending else findings.c.rule_name, severity_rank()]
    else:
        keys = []
    tie = [findings.c.issue_type, findings.c.id]
    return [*keys, *([k.desc() for k in tie] if descending and sort == "id" else tie)]


#: Scan statuses that count as failed scans: finished with an error, or never reported an end.
FAILED_SCAN_STATUSES = (ScanStatus.ERROR.value, ScanStatus.NEVER_FINISHED.value)
#: Failed scans are counted over this many days back from now.
FAILED_SCANS_DAYS = 7


def is_failed_scan(now: datetime) -> Any:
    """A scan of ``scans`` that failed (``FAILED_SCAN_STATUSES``) in the last ``FAILED_SCANS_DAYS`` days."""
    return and_(scans.c.status.in_(FAILED_SCAN_STATUSES), scans.c.started_at >= now - timedelta(days=FAILED_SCANS_DAYS))
