"""Tests of ``governance/policy_tuning.py``: the statistics and proposals computed from a real warehouse, then the
text of what the policy tuning writes (plan, Markdown, CSV) from names the service sent.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from findings_provider.config import ModeRule, load_pipeline_config
from findings_provider.governance import policy_tuning as pt
from findings_provider.operators.policies import ProposePolicyChangesOperator
from findings_provider.warehouse import finding_row_from_dict, policy_rule_rows
from fixtures import connect
from markdown_it import MarkdownIt
from markdown_view import paragraph_text, table_rows
from task_context import FakeTaskInstance, run_operator

from .helpers import FindingWriter, code_finding

# --- policy statistics: Rule statistics and mode-change proposals from known findings in a real SQLite warehouse.

POLICY = "2101"


def store_rules(warehouse, modes: dict[str, str], policy_id: str = POLICY) -> None:
    rules = [
        {"id": str(610000 + i), "path": path, "policyMode": mode, "severity": "SEVERITY_HIGH"}
        for i, (path, mode) in enumerate(sorted(modes.items()))
    ]
    warehouse.upsert_policy_rules(policy_rule_rows(policy_id, rules))


def proposals_for(warehouse, thresholds, **kwargs) -> dict[tuple[str, str], str]:
    stats = pt.rule_statistics(
        pt.read_code_findings(warehouse), exclude_from_human=pt.pipeline_triaged_ids(warehouse), **kwargs
    )
    proposals = pt.propose_changes(pt.evaluate_rules(pt.read_rules(warehouse), stats), thresholds)
    return {(r["policy_id"], r["rule_path"]): r["proposed_mode"] for r in pt.proposal_records(proposals)}


def test_statistics_count_verdicts_and_human_triage_per_rule(warehouse):
    writer = FindingWriter(warehouse)
    writer.add("py.sqli", false_positive=3, true_positive=1, no_verdict=2)
    writer.add("py.sqli", status="ignored", triage_state="ignored", triage_reason="false_positive", no_verdict=2)
    writer.add("py.sqli", status="reviewing", triage_state="reviewing", no_verdict=1)
    # ignored as false positive by this pipeline's own bulk triage: not a person's verdict
    (auto_ignored,) = writer.add(
        "py.sqli", status="ignored", triage_state="ignored", triage_reason="false_positive", false_positive=1
    )
    warehouse.record_triage_action(
        run_id="r",
        dag_id="autotriage_triage",
        issue_type="sast",
        dry_run=False,
        issue_ids=[auto_ignored],
        request={},
        status="succeeded",
        response={"num_triaged": 1, "triaged_issues": [auto_ignored]},
    )
    writer.add("js.xss", true_positive=2)
    # a supply-chain finding that happens to carry the same rule name is not counted
    warehouse.upsert_findings([finding_row_from_dict("sca", code_finding(99, "py.sqli", verdict="false_positive"))])

    stats = pt.rule_statistics(pt.read_code_findings(warehouse), exclude_from_human=pt.pipeline_triaged_ids(warehouse))

    sqli = stats.loc["py.sqli"]
    assert sqli["findings"] == 10
    assert sqli["autotriaged"] == 5
    assert sqli["false_positive_share"] == pytest.approx(4 / 5)
    assert sqli["true_positive_share"] == pytest.approx(1 / 5)
    assert sqli["human_triaged"] == 3
    assert sqli["human_false_positive_share"] == pytest.approx(2 / 3)
    xss = stats.loc["js.xss"]
    assert isinstance(xss, pd.Series)  # one row per rule
    assert (xss["findings"], xss["true_positive_share"], xss["false_positive_share"]) == (2, 1.0, 0.0)
    assert math.isnan(xss["human_false_positive_share"])


def test_fingerprint_dedupe_counts_one_issue_on_several_branches_once(warehouse):
    writer = FindingWriter(warehouse)
    writer.add("py.sqli", false_positive=3, match_based_id="same-issue")
    writer.add("py.sqli", true_positive=1)
    findings = pt.read_code_findings(warehouse)

    assert pt.rule_statistics(findings).loc["py.sqli", "findings"] == 4
    deduped = pt.rule_statistics(findings, dedupe_fingerprints=True).loc["py.sqli"]
    assert (deduped["findings"], deduped["false_positive_share"]) == (2, 0.5)


def test_default_thresholds_propose_exactly_the_rules_that_cross_them(warehouse):
    thresholds = load_pipeline_config().policy_tuning.rules
    store_rules(
        warehouse,
        {
            "r.noisy-block": "MODE_BLOCK",  # 21/25 false positives = 84% -> monitor
            "r.noisy-comment": "MODE_COMMENT",  # 17/20 = 85% over exactly min_findings -> monitor
            "r.precise": "MODE_MONITOR",  # 19/20 true positives = 95% -> comment
            "r.fp-at-threshold": "MODE_BLOCK",  # 16/20 = 80%: not above 80%
            "r.too-few": "MODE_BLOCK",  # 19/19 false positives, below min_findings 20
            "r.tp-at-threshold": "MODE_MONITOR",  # 18/20 = 90%: not above 90%
            "r.precise-few": "MODE_MONITOR",  # 19/19 true positives, below min_findings
            "r.disabled": "MODE_DISABLED",  # not in any threshold's from_modes
            "r.noisy-monitor": "MODE_MONITOR",  # noisy, but already monitor
            "r.half-verdicts": "MODE_BLOCK",  # 20 false positives + 5 without verdict: 100% of 20 autotriaged
            "r.no-findings": "MODE_BLOCK",
        },
    )
    writer = FindingWriter(warehouse)
    writer.add("r.noisy-block", false_positive=21, true_positive=4)
    writer.add("r.noisy-comment", false_positive=17, true_positive=3)
    writer.add("r.precise", true_positive=19, false_positive=1)
    writer.add("r.fp-at-threshold", false_positive=16, true_positive=4)
    writer.add("r.too-few", false_positive=19)
    writer.add("r.tp-at-threshold", true_positive=18, false_positive=2)
    writer.add("r.precise-few", true_positive=19)
    writer.add("r.disabled", false_positive=25)
    writer.add("r.noisy-monitor", false_positive=25)
    writer.add("r.half-verdicts", false_positive=20, no_verdict=5)
    writer.add("r.not-in-any-policy", false_positive=30)

    assert proposals_for(warehouse, thresholds) == {
        (POLICY, "r.noisy-block"): "MODE_MONITOR",
        (POLICY, "r.noisy-comment"): "MODE_MONITOR",
        (POLICY, "r.precise"): "MODE_COMMENT",
        (POLICY, "r.half-verdicts"): "MODE_MONITOR",
    }


def test_proposal_rows_carry_the_evidence(warehouse):
    thresholds = load_pipeline_config().policy_tuning.rules
    store_rules(warehouse, {"r.noisy-block": "MODE_BLOCK"})
    FindingWriter(warehouse).add("r.noisy-block", false_positive=21, true_positive=4)
    stats = pt.rule_statistics(pt.read_code_findings(warehouse))
    (record,) = pt.proposal_records(pt.propose_changes(pt.evaluate_rules(pt.read_rules(warehouse), stats), thresholds))

    assert record == {
        "policy_id": POLICY,
        "rule_id": "610000",
        "rule_path": "r.noisy-block",
        "current_mode": "MODE_BLOCK",
        "proposed_mode": "MODE_MONITOR",
        "threshold": "noisy-blocking-rule",
        "metric": "false_positive_share",
        "value": 0.84,
        "sample": 25,
        "findings": 25,
    }
    assert "84% over 25 findings" in pt.describe(record)


def test_human_metric_and_first_matching_threshold_wins(warehouse):
    store_rules(warehouse, {"r.people-say-noisy": "MODE_BLOCK", "r.both": "MODE_BLOCK"})
    writer = FindingWriter(warehouse)
    writer.add(
        "r.people-say-noisy",
        status="ignored",
        triage_state="ignored",
        triage_reason="false_positive",
        no_verdict=4,
    )
    writer.add("r.people-say-noisy", status="fixing", triage_state="fixing", no_verdict=1)
    writer.add("r.both", status="ignored", triage_state="ignored", triage_reason="false_positive", false_positive=5)
    thresholds = [
        ModeRule(
            name="autotriage",
            from_modes=["MODE_BLOCK"],
            to_mode="MODE_COMMENT",
            metric="false_positive_share",
            above=0.5,
            min_findings=5,
        ),
        ModeRule(
            name="people",
            from_modes=["MODE_BLOCK"],
            to_mode="MODE_DISABLED",
            metric="human_false_positive_share",
            above=0.75,
            min_findings=5,
        ),
    ]

    assert proposals_for(warehouse, thresholds) == {
        (POLICY, "r.people-say-noisy"): "MODE_DISABLED",  # 4 of 5 human-triaged = 80% > 75%
        (POLICY, "r.both"): "MODE_COMMENT",  # matches both: the first threshold wins
    }


def test_the_same_rule_in_two_policies_is_judged_by_each_policy_mode(warehouse):
    thresholds = load_pipeline_config().policy_tuning.rules
    store_rules(warehouse, {"r.shared": "MODE_BLOCK"}, policy_id="2101")
    store_rules(warehouse, {"r.shared": "MODE_MONITOR"}, policy_id="2102")
    FindingWriter(warehouse).add("r.shared", false_positive=25)

    assert proposals_for(warehouse, thresholds) == {("2101", "r.shared"): "MODE_MONITOR"}


def test_no_proposal_gives_an_empty_frame_with_the_columns(warehouse):
    store_rules(warehouse, {"r.quiet": "MODE_BLOCK"})
    stats = pt.rule_statistics(pt.read_code_findings(warehouse))
    proposals = pt.propose_changes(pt.evaluate_rules(pt.read_rules(warehouse), stats), [])
    assert proposals.empty
    assert list(proposals.columns) == pt.PROPOSAL_COLUMNS


# --- policy tuning text: What a person reads of a policy tuning proposal: the approval request's Markdown and the
# report's CSV files. Rule paths come from the service. The proposal is made by the real operator from a real SQLite
# warehouse; the approval body is rendered with a GitHub-flavoured Markdown parser, the CSV files are read back.

TABLE_PATH = 'x | y | ![i](http://evil) <img src=x onerror=alert(1)> [link](http://evil) | z'
FORMULA_PATH = '=HYPERLINK("http://evil","x")'
LONG_PATH = "r." + "a" * 400
PATHS = [TABLE_PATH, FORMULA_PATH, "@SUM(1)", LONG_PATH, "py.plain"]
NOISY = ModeRule(
    name="noisy", from_modes=["MODE_BLOCK"], to_mode="MODE_MONITOR", metric="false_positive_share", above=0.5,
    min_findings=2,
)


@pytest.fixture
def proposal(warehouse, warehouse_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every rule of ``PATHS`` noisy in block mode: the real operator proposes monitor mode for each."""
    connect(monkeypatch, warehouse=warehouse_path)
    rules = [{"id": str(610000 + i), "path": path, "policyMode": "MODE_BLOCK"} for i, path in enumerate(PATHS)]
    warehouse.upsert_policy_rules(policy_rule_rows(POLICY, rules))
    writer = FindingWriter(warehouse)
    for path in PATHS:
        writer.add(path, false_positive=3, true_positive=1)
    operator = ProposePolicyChangesOperator(
        task_id="propose_policy_changes",
        thresholds=[NOISY],
        dry_run=False,
        report_dir=str(tmp_path / "*reports* [x](http://evil)"),  # a directory name is no Markdown either
    )
    result = run_operator(operator, FakeTaskInstance())
    assert result["proposed"] == len(PATHS)
    return result


def test_approval_body_shows_each_rule_path_as_one_inert_cell(proposal):
    body = proposal["approval_body"]
    rows = table_rows(body)

    assert len(rows) == len(PATHS)  # one table row per proposal, none added by a path
    assert all(len(row) == 7 for row in rows)
    assert sorted(row[1] for row in rows) == sorted([TABLE_PATH, FORMULA_PATH, "@SUM(1)", LONG_PATH[:199] + "…",
                                                     "py.plain"])
    assert all(row[0] == POLICY and row[2:5] == ["MODE_BLOCK", "MODE_MONITOR", "false_positive_share"]
               for row in rows)
    html = MarkdownIt("gfm-like").render(body)
    assert "<a " not in html
    assert "<img" not in html
    assert body.count("\n|") == 2 + len(PATHS)  # header, its rule, one line per proposal
    assert "](" not in body.replace("\\]\\(", "")  # no link or image syntax left unescaped


def test_report_path_in_the_approval_body_is_plain_text(proposal):
    (last,) = [line for line in proposal["approval_body"].splitlines() if line.startswith("Full report:")]
    assert paragraph_text(last) == f"Full report: {proposal['report']['html']}"


def test_report_csv_keeps_rule_paths_as_text_and_numbers_as_numbers(proposal):
    with open(proposal["report"]["csv"]["proposed changes"], newline="") as fh:
        rows = list(csv.DictReader(fh))

    assert sorted(r["rule_path"] for r in rows) == sorted(
        [TABLE_PATH, "'" + FORMULA_PATH, "'@SUM(1)", LONG_PATH, "py.plain"]
    )
    assert {r["policy_id"] for r in rows} == {POLICY}
    assert {r["value"] for r in rows} == {"0.75"}
    assert {r["sample"] for r in rows} == {"4"}
    with open(proposal["report"]["csv"]["rule statistics"], newline="") as fh:
        stats = {r["rule_path"]: r for r in csv.DictReader(fh)}
    assert set(stats) == {TABLE_PATH, "'" + FORMULA_PATH, "'@SUM(1)", LONG_PATH, "py.plain"}
    assert stats["'" + FORMULA_PATH]["findings"] == "4"
