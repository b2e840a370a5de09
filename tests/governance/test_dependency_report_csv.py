"""The dependency inventory report's CSV files, from names the service sent: text stays text, numbers stay numbers.

Package, licence and repository names are chosen by whoever published the package or named the repository. The
report is written by the real operator from a real SQLite warehouse and read back.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from findings_provider.operators.dependencies import DependencyReportOperator
from findings_provider.warehouse import dependency_repository_rows, dependency_rows
from fixtures import connect
from task_context import FakeTaskInstance, run_operator

PACKAGE = "=cmd|' /C calc'!A0"
REPOSITORY = "@SUM(1)"


def read_csv(path: str) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_report_csv_marks_formula_like_names_as_text(
    warehouse, warehouse_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    connect(monkeypatch, warehouse=warehouse_path)
    warehouse.upsert_dependencies(
        dependency_rows(
            [
                {"id": "1", "name": PACKAGE, "version": "-1.0", "ecosystem": "npm", "licenses": ["+GPL"],
                 "repositoryId": "7"},
                {"id": "2", "name": PACKAGE, "version": "2.0", "ecosystem": "npm", "licenses": ["+GPL"],
                 "repositoryId": "8"},
            ]
        )
    )
    warehouse.upsert_dependency_repositories(
        dependency_repository_rows(
            [{"id": 7, "name": REPOSITORY, "numDependencies": 2, "hasDependencyPathScan": True}]
        )
    )

    result = run_operator(DependencyReportOperator(task_id="report", report_dir=str(tmp_path)), FakeTaskInstance())

    files = result["report"]["csv"]
    assert read_csv(files["dependencies per licence"]) == [
        ["licence", "dependencies", "repositories", "source"],
        ["'+GPL", "2", "2", "dependency inventory"],
    ]
    widespread = next(v for k, v in files.items() if k.startswith("most widespread"))
    assert read_csv(widespread) == [
        ["dependency", "repositories", "occurrences", "versions"],
        ["'" + PACKAGE + " (npm)", "2", "2", "'-1.0, 2.0"],  # a version is text, even one that looks negative
    ]
    largest = next(v for k, v in files.items() if k.startswith("repositories with the most"))
    assert read_csv(largest) == [
        ["name", "id", "num_dependencies", "has_dependency_path_scan"],
        ["'" + REPOSITORY, "7", "2", "True"],
    ]
