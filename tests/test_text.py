"""Service data made safe for people: Markdown shown in the Airflow UI (rendered as GitHub-flavoured Markdown) and
CSV cells opened in a spreadsheet."""

from __future__ import annotations

from typing import Any

import pytest
from findings_provider.text import MAX_CELL, csv_cell, md_escape, truncate
from markdown_view import paragraph_text, table_rows

HOSTILE = [
    "x | y | ![i](http://evil)",
    "<img src=x onerror=alert(1)> <script>alert(1)</script>",
    "[click](javascript:alert(1)) <http://evil>",
    "www.evil.com http://evil.com/a mailto:a@evil.com a@evil.com",
    "*bold* **b** _it_ ~~s~~ `code` ``x``",
    "&lt;b&gt; &#124; &amp;",
    "trailing backslash \\| escapes nothing \\",
    "# heading",
    "1. item",
    "- item",
    "> quote",
    "[^note] [ref]: http://evil",
    ":warning: {{ ti }} == ''",
]


def cell(value: object, **kwargs: Any) -> list[list[str]]:
    """The body rows of a one-column table whose only cell holds ``md_escape(value)``."""
    return table_rows(f"| value |\n|---|\n| {md_escape(value, **kwargs)} |\n")


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_shows_the_value_as_text_in_one_cell(value: str) -> None:
    assert cell(value) == [[value]]


@pytest.mark.parametrize(
    "value",
    ["# heading", "+ item", "- item", "* item", "1. item", "1) item", "> quote", "- - -", "***", "```fence",
     "~~~fence", "<div>x</div>", "[ref]: http://evil", "| a | b |"],
)
def test_markdown_starting_a_line_stays_a_plain_paragraph(value: str) -> None:
    assert paragraph_text(md_escape(value)) == value


def test_markdown_line_breaks_cannot_start_a_row() -> None:
    assert cell("a\nb\r\n| c | d |\u2028e") == [["a b | c | d | e"]]


def test_markdown_hides_nothing_behind_direction_or_invisible_characters() -> None:
    # U+202E would show "rule.exe" as "rule.gnp"-like reversed text; U+200B hides a difference between names
    ((text,),) = cell("rule\u202egnp.exe\u200b\x00")
    assert text == "rule\ufffdgnp.exe\ufffd\ufffd"


def test_markdown_cuts_long_values() -> None:
    ((text,),) = cell("a" * 1000)
    assert text == "a" * (MAX_CELL - 1) + "…"
    assert cell("b" * 50, limit=10) == [["b" * 9 + "…"]]


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_marks_formula_starts_as_text(start: str) -> None:
    assert csv_cell(start + "SUM(A1)") == "'" + start + "SUM(A1)"


@pytest.mark.parametrize("value", [-1, -0.5, 0, 3, None, True])
def test_csv_leaves_numbers_and_non_strings_alone(value: object) -> None:
    assert csv_cell(value) is value


def test_csv_leaves_plain_text_alone_and_cuts_long_text() -> None:
    assert csv_cell("acme/payments-api = 1") == "acme/payments-api = 1"
    assert csv_cell("x" * 2000) == "x" * 999 + "…"
    assert csv_cell("=" + "x" * 2000) == "'=" + "x" * 998 + "…"


def test_truncate_keeps_the_limit_exactly() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("abcd", 3) == "ab…"
