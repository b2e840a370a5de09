"""Data from the service made safe for where people read it: Markdown shown in the Airflow UI, and CSV cells.

Repository names, rule paths and notes come from the service (and from whoever named a repository). Shown as
they are, they could add table rows, links or images to an approval request, or run as a formula when a CSV
report is opened in a spreadsheet.
"""

from __future__ import annotations

import re
from typing import Any

#: Longest value shown in one Markdown cell or CSV cell before it is cut (with an ellipsis).
MAX_CELL = 200
#: Characters with a meaning in Markdown (GitHub flavour, as rendered by the Airflow UI) or HTML.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&\"'=:])")
_LINE_BREAKS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")
#: Other control characters, and the invisible ones that reorder or hide text (bidirectional overrides,
#: zero-width characters): a rule path shown to an approver must read as what it is.
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
#: Leading characters that make a spreadsheet read a cell as a formula (OWASP CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def truncate(text: str, limit: int = MAX_CELL) -> str:
    """``text`` cut to at most ``limit`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def md_escape(value: Any, limit: int = MAX_CELL) -> str:
    """``value`` as inert Markdown text on one line: no links, images, HTML, emphasis or table cells; truncated."""
    if value is None:
        return "-"
    text = _INVISIBLE.sub("\ufffd", _LINE_BREAKS.sub(" ", truncate(str(value), limit)))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def csv_cell(value: Any, limit: int = 1000) -> Any:
    """A CSV cell that a spreadsheet shows as text: formula-like strings get a leading ``'``; long ones are cut."""
    if not isinstance(value, str):
        return value
    text = truncate(value, limit)
    return "'" + text if text.startswith(_FORMULA_START) else text


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(template: str, values: dict[str, Any]) -> str:
    """``{name}`` replaced by ``values[name]`` where given (as text); every other character, braces included,
    kept as written (unlike ``str.format``, a stray brace or an unknown name is no error)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m[1]]) if values.get(m[1]) is not None else m[0], template)


def http_url(value: Any) -> str | None:
    """``value`` when it is an http(s) URL (the only kind a link may point to), else None."""
    return value if isinstance(value, str) and value.startswith(("http://", "https://")) else None
