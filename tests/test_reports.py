"""Reports from data the service sent: CSV cells a spreadsheet reads as text, HTML that escapes, charts that draw.

A repository name is chosen by whoever created the repository. The summary report is written by the real
operator from a real SQLite warehouse and read back.
"""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from findings_provider.operators.findings import FindingsSummaryOperator
from findings_provider.reports import Chart, write_report
from findings_provider.warehouse import finding_row_from_dict
from fixtures import connect, make_warehouse

HYPERLINK = '=HYPERLINK("http://evil","x")'
SCRIPT = "<script>alert(1)</script>"
LONG = "-" + "x" * 5000
#: repository name -> open findings (high severity); names a spreadsheet would run as formulas, and HTML
REPOSITORIES = {
    HYPERLINK: 6, "@SUM(1)": 5, "+1+1": 4, "-2+3": 3, "\tcmd": 3, "\rcmd": 3, "ok\r=1+1": 2, SCRIPT: 1, LONG: 1
}


def open_finding(finding_id: int, repository: str, severity: str = "high") -> dict[str, Any]:
    """A code finding as the API sends it."""
    return {
        "id": finding_id,
        "rule_name": "py.sqli",
        "repository": {"name": repository, "url": "https://example.invalid/repo"},
        "ref": "refs/heads/main",
        "severity": severity,
        "status": "open",
        "relevant_since": "2024-05-01T10:00:00Z",
    }


@pytest.fixture
def summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The summary operator's result over open findings of ``REPOSITORIES`` (names as the service sent them)."""
    path = tmp_path / "wh.db"
    warehouse = make_warehouse(path)
    findings = [
        open_finding(1000 * n + i, name) for n, (name, count) in enumerate(REPOSITORIES.items()) for i in range(count)
    ]
    warehouse.upsert_findings([finding_row_from_dict("sast", f) for f in findings])
    warehouse.engine.dispose()
    connect(monkeypatch, warehouse=path)
    monkeypatch.setenv("FINDINGS_REPORT_DIR", str(tmp_path / "reports"))
    return FindingsSummaryOperator(task_id="summary", report_name="summary").execute({})


def test_summary_report_shows_hostile_repository_names_as_text(summary):
    with open(summary["report"]["csv"]["by_repository"], newline="") as fh:
        header, *rows = list(csv.reader(fh))

    assert header == ["repository", "high"]
    assert all(len(row) == 2 for row in rows)
    by_name = dict(rows)
    assert by_name == {
        "'" + HYPERLINK: "6",
        "'@SUM(1)": "5",
        "'+1+1": "4",
        "'-2+3": "3",
        "'\tcmd": "3",
        "'\rcmd": "3",
        "ok\r=1+1": "2",  # one cell: not a new row starting with a formula
        SCRIPT: "1",
        "'" + LONG[:999] + "…": "1",  # cut to 1000 characters, then marked as text
    }
    html = Path(summary["report"]["html"]).read_text()
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<img") == 2  # both charts were drawn


def test_csv_neutralises_labels_and_string_values_but_keeps_negative_numbers(tmp_path: Path):
    table = pd.DataFrame(
        {"delta": [-3, 4], "share": [-0.5, 0.25], "note": ["-3", "=1+1"], "@col": [1, 2]},
        index=pd.MultiIndex.from_tuples([("2101", "=rule"), ("2102", "ok")], names=["policy_id", "rule_path"]),
    )

    report = write_report("changes", "Changes", {"changes": table, "none": table.iloc[:0]}, out_dir=tmp_path)

    with open(report.csv["changes"], newline="") as fh:
        assert list(csv.reader(fh)) == [
            ["policy_id", "rule_path", "delta", "share", "note", "'@col"],
            ["2101", "'=rule", "-3", "-0.5", "'-3", "1"],
            ["2102", "ok", "4", "0.25", "'=1+1", "2"],
        ]
    with open(report.csv["none"], newline="") as fh:  # an empty table keeps its header
        assert list(csv.reader(fh)) == [["policy_id", "rule_path", "delta", "share", "note", "'@col"]]


def test_charts_draw_dollar_signs_and_long_names_as_plain_labels(tmp_path: Path):
    names = pd.Index([r"$\frac{$", "a$b$c", "\tcmd\r", "r" * 500], name="repository")
    table = pd.DataFrame({"high": [4, 3, 2, 1]}, index=names)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a label too long for the figure, or a character without a glyph
        report = write_report("repos", "Repositories", {"repos": table}, charts=[Chart("Repos", "repos")],
                              out_dir=tmp_path)

    assert Path(report.html).read_text().count("<img") == 1


def test_report_tables_read_as_people_read_them(tmp_path: Path) -> None:
    """Whole-number columns show as integers (a ticket id is 25, not 25.0; a missing one is blank), names are
    words, and a default 0, 1, 2 ... index is not shown as a column."""
    breaches = pd.DataFrame({"external_ticket_id": [25.0, None, 250000000.0], "overdue_days": [1.5, 2.0, 3.25],
                             "rule_name": ["a", "b", "c"]})
    report = write_report("t", "T", {"sla_breaches": breaches}, out_dir=tmp_path)
    page = Path(report.html).read_text()
    assert "<h2>Sla breaches</h2>" in page
    assert "<th>External ticket id</th>" in page
    assert "<td>25</td>" in page
    assert "<td>250000000</td>" in page
    rows = list(csv.reader(io.StringIO(Path(report.csv["sla_breaches"]).read_text())))
    assert [r[1:3] for r in rows[1:]] == [["25", "1.5"], ["", "2.0"], ["250000000", "3.25"]]  # as the HTML shows
    assert "25.0" not in page
    assert "e+" not in page
    assert "NaN" not in page
    assert "&lt;NA&gt;" not in page
    assert "<td>1.50</td>" in page  # fractions stay fractions, with the column's precision
    assert "<td>3.25</td>" in page
    assert page.count("<th></th>") == 0  # no index column
    by_name = pd.DataFrame({"open": [3, 1]}, index=pd.Index(["critical", "low"], name="severity"))
    named = Path(write_report("u", "U", {"by_severity": by_name}, out_dir=tmp_path).html).read_text()
    assert "<th>critical</th>" in named  # a meaningful index is kept
