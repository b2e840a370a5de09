"""The programme's numbers (``findings_provider.programme``) on their own: what each measure counts, the
fix-time boundary, and the findings filter that every number's link carries."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from findings_provider import programme
from findings_provider.programme import MEASURES, SORTS, FindingFilter
from findings_provider.warehouse import Warehouse, finding_row_from_dict
from findings_provider.warehouse.schema import findings
from sqlalchemy import select, update

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)
TARGETS = {"critical": 7, "high": 30, "medium": 90}


def since(days: float) -> str:
    """``relevant_since`` ``days`` before NOW."""
    return (NOW - timedelta(days=days)).isoformat()


def row(finding_id: int, issue_type: str = "sast", **fields: Any) -> tuple:
    return finding_row_from_dict(issue_type, {"id": finding_id, "status": "open", "severity": "high",
                                              "relevant_since": since(1), **fields})


def selected(warehouse: Warehouse, conditions: list[Any]) -> set[tuple[str, int]]:
    with warehouse.engine.connect() as conn:
        return {(t, int(i)) for t, i in conn.execute(select(findings.c.issue_type, findings.c.id).where(*conditions))}


def measure(warehouse: Warehouse, name: str, targets: dict[str, int] = TARGETS) -> set[tuple[str, int]]:
    return selected(warehouse, [programme.measure_condition(name, targets, NOW)])


# --- FindingFilter -------------------------------------------------------------------------------------------------

FULL = FindingFilter(measure="overdue", issue_type="sca", severity="critical", status="reviewing",
                     repository="acme/api", repository_contains="Api", rule="r1", rule_contains="sql",
                     run_id="manual__2026-03-01", touched="ticket")


@pytest.mark.parametrize("selection", [FindingFilter(), FULL, FindingFilter(repository_contains="x"),
                                       FindingFilter(run_id="r", touched="triage")])
def test_a_filter_comes_back_from_its_query(selection: FindingFilter) -> None:
    query = selection.query()
    assert FindingFilter.from_query(query) == selection
    assert all(query.values())  # empty fields are left out of the URL


def test_from_query_strips_values_and_ignores_unknown_parameters() -> None:
    assert FindingFilter.from_query({"severity": " high ", "page": "3", "sort": "age", "measure": ""}) == (
        FindingFilter(severity="high"))


def test_narrowed_replaces_only_the_fields_named() -> None:
    narrowed = FULL.narrowed(severity="low", measure="open")
    assert narrowed.severity == "low"
    assert narrowed.measure == "open"
    assert narrowed.narrowed(severity="critical", measure="overdue") == FULL


@pytest.mark.parametrize(("params", "words"), [
    ({"measure": "late"}, ["measure", "'late'", "overdue"]),
    ({"touched": "merge", "run_id": "r"}, ["touched", "'merge'", "triage"]),
    ({"touched": "triage"}, ["touched", "'triage'", "run_id"]),
])
def test_a_bad_value_is_refused_naming_the_field_and_the_value(params: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ValueError) as error:
        FindingFilter.from_query(params)
    for word in words:
        assert word in str(error.value)


def test_a_bad_sort_or_measure_is_refused_where_it_is_used() -> None:
    with pytest.raises(ValueError, match="sort = 'newest'"):
        programme.order_by("newest", False, TARGETS, "sqlite")
    with pytest.raises(ValueError, match="measure = 'late'"):
        programme.measure_condition("late", TARGETS, NOW)
    for sort in SORTS:
        assert programme.order_by(sort, False, TARGETS, "sqlite")


# --- the measures --------------------------------------------------------------------------------------------------

def test_each_measure_selects_exactly_the_findings_its_definition_names(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        row(1),                                                            # open, recent
        row(2, status="reviewing", triage_state="reviewing"),             # open, triaged
        row(3, status="fixing", triage_state="fixing", external_ticket={"id": 91}),  # open, triaged, ticketed
        row(4, status="fixed", external_ticket={"id": 92}),               # fixed, ticketed
        row(5, status="ignored", triage_state="ignored"),                 # triaged, not open
        row(6, status="provisionally_ignored", triage_state="provisionally_ignored"),
        row(7, triage_state="untriaged"),                                 # open, not triaged
        row(8, status="removed"),                                         # neither open nor fixed
        row(1, "sca", status="fixed"),                                    # same id, other type
        row(2, "secrets", severity=None, relevant_since=since(1000)),     # open, no severity: never overdue
    ])
    with warehouse.engine.begin() as conn:  # an empty triage state, as some reads store it, is untriaged
        conn.execute(update(findings).where(findings.c.id == 1, findings.c.issue_type == "sast")
                     .values(triage_state=""))
    assert measure(warehouse, "open") == {("sast", 1), ("sast", 2), ("sast", 3), ("sast", 7), ("secrets", 2)}
    assert measure(warehouse, "triaged") == {("sast", 2), ("sast", 3), ("sast", 5), ("sast", 6)}
    assert measure(warehouse, "ticketed") == {("sast", 3), ("sast", 4)}
    assert measure(warehouse, "fixed") == {("sast", 4), ("sca", 1)}
    assert measure(warehouse, "overdue") == set()  # everything with a target is a day old


def test_overdue_is_open_and_strictly_past_the_severitys_target(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        row(1, severity="critical", relevant_since=since(7)),                           # exactly at the target
        row(2, severity="critical", relevant_since=since(7 + 1 / 86400)),               # one second past it
        row(3, severity="critical", relevant_since=since(7 - 1 / 86400)),               # one second before
        row(4, severity="high", relevant_since=since(30)),
        row(5, severity="high", relevant_since=since(31)),
        row(6, severity="medium", relevant_since=since(91), status="fixed"),            # late but fixed
        row(7, severity="medium", relevant_since=since(91), status="ignored"),          # late but ignored
        row(8, severity="medium", relevant_since=since(91), status="fixing"),           # late, being fixed
        row(9, severity="low", relevant_since=since(5000)),                             # no target for low
        row(10, severity="informational", relevant_since=since(5000)),                  # unknown severity
        row(11, severity="critical", relevant_since=None),                              # no detection time
    ])
    late = {("sast", 2), ("sast", 5), ("sast", 8)}
    assert measure(warehouse, "overdue") == late
    # a target for low makes the old low finding late; no targets at all make nothing late
    assert measure(warehouse, "overdue", {**TARGETS, "low": 365}) == late | {("sast", 9)}
    assert measure(warehouse, "overdue", {}) == set()


# --- filters, counts and touched findings --------------------------------------------------------------------------

def test_filter_fields_match_exactly_or_by_part_ignoring_case(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        row(1, repository={"name": "acme/repo-1"}, rule_name="sql_injection"),
        row(2, repository={"name": "acme/repo-10"}, rule_name="SQL-Injection"),
        row(3, repository={"name": "acme/repo_1x"}, rule_name="xss"),
        row(4, "sca", repository={"name": "Other/REPO-1"}, severity="critical", rule_name="100%_sure"),
    ])

    def ids(**fields: str) -> set[int]:
        return {i for _, i in selected(warehouse, FindingFilter(**fields).where(TARGETS, NOW))}

    assert ids(repository="acme/repo-1") == {1}
    assert ids(repository="ACME/REPO-1") == set()  # exact: case counts
    assert ids(repository_contains="REPO-1") == {1, 2, 4}
    assert ids(repository_contains="repo_1") == {3}  # "_" is a character, not a LIKE wildcard
    assert ids(rule_contains="sql") == {1, 2}
    assert ids(rule_contains="0%_") == {4}
    assert ids(rule_contains="%") == {4}
    assert ids(rule="xss") == {3}
    assert ids(issue_type="sca", severity="critical") == {4}
    assert ids(issue_type="sca", severity="high") == set()


def test_severity_unknown_selects_the_findings_without_a_severity(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([row(1, severity=None), row(2, severity="unknown"), row(3, severity="low"), row(4)])
    with warehouse.engine.begin() as conn:
        conn.execute(update(findings).where(findings.c.id == 4).values(severity=""))
    unknown = FindingFilter(severity=programme.UNKNOWN_SEVERITY)
    assert selected(warehouse, unknown.where(TARGETS, NOW)) == {("sast", 1), ("sast", 2), ("sast", 4)}
    with warehouse.engine.connect() as conn:  # what the overview counts as "" is what its link selects
        per = programme.counts_by_severity(conn, "open", TARGETS, NOW)
        assert per.get("", 0) + per.get("unknown", 0) == programme.count(conn, unknown, TARGETS, NOW) == 3


def test_touched_keeps_only_the_ids_given_per_issue_type(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([row(1), row(2), row(1, "sca"), row(2, "sca")])
    selection = FindingFilter(run_id="r", touched="triage")
    assert selected(warehouse, selection.where(TARGETS, NOW, {"sast": {2}, "sca": {1}})) == {("sast", 2), ("sca", 1)}
    assert selected(warehouse, selection.where(TARGETS, NOW, {"sast": set()})) == set()
    assert selected(warehouse, selection.where(TARGETS, NOW, None)) == set()  # a run that touched nothing


def test_count_and_counts_by_severity_agree_with_the_selected_rows(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        row(1, severity="critical", relevant_since=since(10)), row(2, severity="critical"),
        row(3, severity="high", relevant_since=since(40), repository={"name": "a"}),
        row(4, severity="medium", status="fixed"), row(5, severity=None), row(6, severity="informational"),
    ])
    with warehouse.engine.connect() as conn:
        for name in MEASURES:
            chosen = measure(warehouse, name)
            assert programme.count(conn, FindingFilter(measure=name), TARGETS, NOW) == len(chosen), name
            per = programme.counts_by_severity(conn, name, TARGETS, NOW)
            assert sum(per.values()) == len(chosen), name
        assert programme.counts_by_severity(conn, "open", TARGETS, NOW) == {
            "critical": 2, "high": 1, "": 1, "informational": 1}
        assert programme.counts_by_severity(conn, "overdue", TARGETS, NOW) == {"critical": 1, "high": 1}
        assert programme.counts_by_severity(conn, "open", TARGETS, NOW, FindingFilter(repository="a")) == {"high": 1}
        touched = FindingFilter(run_id="r", touched="ticket")
        assert programme.count(conn, touched, TARGETS, NOW, {"sast": {1, 4, 99}}) == 2


def test_severity_rank_puts_the_most_severe_first_and_unknown_last(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([row(1, severity="low"), row(2, severity="informational"), row(3, severity="critical"),
                               row(4, severity="medium"), row(5, severity="high"), row(6, severity=None)])
    with warehouse.engine.connect() as conn:
        ranked = conn.execute(select(findings.c.id).order_by(programme.severity_rank(), findings.c.id)).scalars()
        assert list(ranked) == [3, 5, 4, 1, 2, 6]
