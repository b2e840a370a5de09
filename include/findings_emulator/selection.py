"""Finding filters shared by the findings list (4.8) and the bulk selections of triage and tickets (4.11).

A :class:`FindingFilters` is hashable, so a findings listing can be cached by its filters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

from sqlalchemy import ColumnElement, Select, and_, exists, func, or_, select
from sqlalchemy.sql.util import ClauseAdapter

from . import schema
from .errors import invalid

IssueType = Literal["sast", "sca", "secrets"]
ListedIssueType = Literal["sast", "sca", "ai_sast"]
Severity = Literal["low", "medium", "high", "critical"]
Status = Literal["open", "fixed", "ignored", "reviewing", "fixing", "provisionally_ignored"]
TriageReason = Literal["acceptable_risk", "false_positive", "no_time", "no_triage_reason", "duplicate"]
Confidence = Literal["low", "medium", "high"]
Verdict = Literal["true_positive", "false_positive"]
Exposure = Literal["reachable", "always_reachable", "conditionally_reachable", "unreachable", "unknown"]
Transitivity = Literal["direct", "transitive", "unknown"]
PrState = Literal["open", "merged"]
PolicyBoard = Literal["rule-board-audit", "rule-board-pr-comments", "rule-board-block"]
PolicyModeName = Literal["monitor", "comment", "block", "disabled"]
EpssBand = Literal["high", "medium", "low", "minimal", "none"]
Visibility = Literal["public", "private", "unknown"]
# The reference's values, then the real service's (see dialect.VALIDATION_FILTER).
ValidationState = Literal["valid", "invalid", "confirmed_valid", "confirmed_invalid", "validation_error",
                          "no_validator"]

#: The ``ref`` value that means each project's default branch (``default_branch``), as production clients send it.
DEFAULT_REF = "_default"
BOARD_MODES = {"rule-board-audit": "MODE_MONITOR", "rule-board-pr-comments": "MODE_COMMENT",
               "rule-board-block": "MODE_BLOCK"}
EPSS_BANDS = {"high": (0.1, 2.0), "medium": (0.01, 0.1), "low": (0.001, 0.01), "minimal": (0.0, 0.001),
              "none": (0.0, 0.001)}

# Which issue types a filter applies to, as documented for the findings list (4.8)...
LISTING_ONLY_FOR = {
    "policies": "sast", "rules": "sast", "categories": "sast", "confidence": "sast",
    "autotriage_verdict": "sast", "exposures": "sca", "transitivities": "sca", "is_malicious": "sca",
}
# ...and for the selections of triage and tickets (4.11).
SELECTION_ONLY_FOR = {
    "dependencies": "sca", "epss_probability": "sca", "exposures": "sca", "transitivities": "sca",
    "pro_only": "sast", "include_historical": "secrets", "repository_visibility": "secrets",
    "secret_types": "secrets", "validation_state": "secrets",
}


T = TypeVar("T")


def as_tuple(values: Sequence[T] | None) -> tuple[T, ...]:
    """A filter's values as a (hashable) tuple; ``None`` and ``[]`` both mean "not filtered"."""
    return tuple(values) if values else ()


@dataclass(frozen=True)
class FindingFilters:
    """Every filter a findings query can carry; empty tuples and ``None`` mean "not filtered"."""

    issue_type: str
    ids: tuple[int, ...] = ()
    since: float | None = None
    repos: tuple[str, ...] = ()
    repository_ids: tuple[int, ...] = ()
    status: str | None = None
    triage_reasons: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()
    ref: str | None = None
    policies: tuple[str, ...] = ()
    policy_mode: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    ruleset: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    confidence: str | None = None
    autotriage_verdict: str | None = None
    component_tags: tuple[str, ...] = ()
    exposures: tuple[str, ...] = ()
    transitivities: tuple[str, ...] = ()
    is_malicious: bool | None = None
    click_to_fix_pr_state: tuple[str, ...] = ()
    dependencies: tuple[str, ...] = ()
    epss_probability: tuple[str, ...] = ()
    pro_only: bool | None = None
    project_tags: tuple[str, ...] = ()
    include_historical: bool | None = None
    repository_visibility: tuple[str, ...] = ()
    secret_types: tuple[str, ...] = ()
    validation_state: tuple[str, ...] = ()
    dedup: bool = False

    def given(self) -> list[str]:
        """Names of the filters that are set (``issue_type``, ``ids`` and ``dedup`` are not filters)."""
        return [
            f.name for f in dataclasses.fields(self)
            if f.name not in ("issue_type", "ids", "dedup") and getattr(self, f.name) not in (None, ())
        ]

    def check_applicable(self, only_for: dict[str, str]) -> None:
        """Reject a filter documented for another issue type (a 400 naming it)."""
        for name in self.given():
            allowed = only_for.get(name)
            # AI findings carry the code findings' fields, so they take the code filters
            if allowed is not None and allowed != self.issue_type.removeprefix("ai_"):
                raise invalid(name, f"applies only to issue_type {allowed}, not {self.issue_type}")


def epss_band(value: str) -> str:
    """Normalise an ``epss_probability`` value (``high`` or ``EPSS_PROBABILITY_HIGH``)."""
    band = value.lower().removeprefix("epss_probability_")
    if band not in EPSS_BANDS:
        raise invalid("epss_probability", f"{value!r} is not one of {', '.join(get_args(EpssBand))}")
    return band


def _any_multi(col: ColumnElement[str], values: tuple[str, ...]) -> ColumnElement[bool]:
    return or_(*(col.contains(f"|{value}|", autoescape=True) for value in values))


def _rule_paths_in_modes(modes: set[str]) -> Select[tuple[str]]:
    default_policy = select(schema.policies.c.id).where(schema.policies.c.is_default.is_(True))
    return select(schema.rules.c.path).where(
        schema.rules.c.policy_id.in_(default_policy.scalar_subquery()), schema.rules.c.mode.in_(modes))


def _repos_with_tags(tags: tuple[str, ...]) -> Select[tuple[int]]:
    repo = schema.repositories
    tag = func.json_each(repo.c.tags).table_valued("value")
    return select(repo.c.id).where(exists(select(1).select_from(tag).where(tag.c.value.in_(tags))))


def _default_branch_of(repo_id: ColumnElement[int]) -> ColumnElement[str]:
    """The default branch of the project ``repo_id`` (a correlated lookup by primary key)."""
    repo = schema.repositories.c
    return select(repo.default_branch).where(repo.id == repo_id).scalar_subquery()


def conditions(f: FindingFilters) -> list[ColumnElement[bool]]:
    """SQL conditions on ``schema.findings`` for the filters (all combined with AND)."""
    t = schema.findings.c
    where: list[ColumnElement[bool]] = [t.issue_type == f.issue_type]
    simple = ((f.repos, t.repo_name), (f.repository_ids, t.repo_id), (f.severities, t.severity),
              (f.rules, t.rule_name), (f.component_tags, t.component_tag), (f.exposures, t.reachability),
              (f.transitivities, t.transitivity), (f.click_to_fix_pr_state, t.ctf_state),
              (f.dependencies, t.dependency), (f.repository_visibility, t.visibility),
              (f.secret_types, t.secret_type), (f.validation_state, t.validation_state), (f.ids, t.id))
    where.extend(col.in_(values) for values, col in simple if values)
    equal = ((f.status, t.status), (f.confidence, t.confidence), (f.autotriage_verdict, t.autotriage_verdict))
    where.extend(col == value for value, col in equal if value is not None)
    if f.ref == DEFAULT_REF:
        where.append(t.ref == _default_branch_of(t.repo_id))
    elif f.ref is not None:
        where.append(t.ref == f.ref)
    if f.since is not None:
        where.append(t.relevant_since >= f.since)
    if f.triage_reasons:
        where.append(t.triage_reason.in_(f.triage_reasons))
    if f.categories:
        where.append(_any_multi(t.categories, f.categories))
    if f.ruleset:
        where.append(_any_multi(t.rulesets, f.ruleset))
    modes = {BOARD_MODES[p] for p in f.policies} | {f"MODE_{m.upper()}" for m in f.policy_mode}
    if modes:
        where.append(t.rule_name.in_(_rule_paths_in_modes(modes)))
    if f.is_malicious is not None:
        where.append(t.is_malicious == int(f.is_malicious))
    if f.pro_only:
        where.append(t.pro_rule == 1)
    if f.include_historical is False:
        where.append(t.historical == 0)
    if f.project_tags:
        where.append(t.repo_id.in_(_repos_with_tags(f.project_tags)))
    if f.epss_probability:
        where.append(or_(*(and_(t.epss >= EPSS_BANDS[b][0], t.epss < EPSS_BANDS[b][1])
                           for b in map(epss_band, f.epss_probability))))
    return where


def dedup_condition(f: FindingFilters) -> ColumnElement[bool]:
    """Keep one finding per fingerprint (same repository and ``match_based_id``) among those matching ``f``:
    the one on the project's primary branch, else the latest by ``relevant_since``, ties to the highest id.
    Findings whose fingerprint is on a single ref pass without a lookup."""
    mate = schema.findings.alias("mate")
    t = schema.findings.c
    m = mate.c
    better = or_(
        m.is_primary > t.is_primary,
        and_(m.is_primary == t.is_primary, or_(
            m.relevant_since > t.relevant_since,
            and_(m.relevant_since == t.relevant_since, m.id > t.id))),
    )
    adapter = ClauseAdapter(mate)
    matching_mate = [adapter.traverse(cond) for cond in conditions(f)]
    return or_(t.has_mates == 0, ~exists(select(1).select_from(mate).where(
        m.issue_type == t.issue_type, m.match_based_id == t.match_based_id, m.repo_id == t.repo_id,
        m.id != t.id, better,
        *matching_mate)))

