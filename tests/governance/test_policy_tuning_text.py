"""What a person reads of a policy tuning proposal: the approval request's Markdown and the report's CSV files.

Rule paths come from the service. The proposal is made by the real operator from a real SQLite warehouse; the
approval body is rendered with a GitHub-flavoured Markdown parser, the CSV files are read back.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from findings_provider.config import ModeRule
from findings_provider.operators.policies import ProposePolicyChangesOperator
from findings_provider.warehouse import policy_rule_rows
from fixtures import connect
from markdown_it import MarkdownIt
from markdown_view import paragraph_text, table_rows
from task_context import FakeTaskInstance, run_operator

from .helpers import FindingWriter

POLICY = "2101"
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
