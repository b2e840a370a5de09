"""Reports a person can open: CSV tables plus one HTML page with the tables and charts.

Used by the extraction summary, policy tuning and the dependency inventory. Charts are drawn with matplotlib
(Agg backend, no display) and embedded in the HTML as PNG. Names in the tables come from the service (a repository
or a rule path): the HTML escapes them, the CSV files neutralise formulas (``csv_cell``), and the charts draw them
as plain text (never as matplotlib math).
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from findings_provider.client.vocabulary import Severity
from findings_provider.text import csv_cell, truncate

if TYPE_CHECKING:
    import pandas as pd

    from findings_provider.warehouse import Warehouse


#: The conventional severity colours (critical red, high orange, medium yellow, low blue-grey), for every chart
#: and page that shows severities; anything else is grey.
SEVERITY_COLOURS = {
    Severity.CRITICAL.value: "#c62828",
    Severity.HIGH.value: "#ef6c00",
    Severity.MEDIUM.value: "#f9a825",
    Severity.LOW.value: "#78909c",
}
OTHER_COLOUR = "#bdbdbd"

#: Longest axis or legend label of a chart (longer ones are cut; the tables show them in full).
CHART_LABEL = 60


@dataclass
class Chart:
    """A bar chart of one table column (``y``) against its index, or a stacked bar of every column."""

    title: str
    table: str
    kind: Literal["bar", "barh", "line", "area"] = "barh"
    stacked: bool = False
    top: int = 20


@dataclass
class Report:
    """Where a written report lives (small enough for XCom)."""

    html: str
    csv: dict[str, str] = field(default_factory=dict)
    #: Its id in the warehouse's ``reports`` table, when stored there (the dashboard's reports page shows it).
    stored_id: int | None = None

    def as_xcom(self) -> dict:
        return {"html": self.html, "csv": self.csv, "stored_id": self.stored_id}


def report_dir(subdir: str = "") -> Path:
    """``$FINDINGS_REPORT_DIR`` or ``$AIRFLOW_HOME/reports`` (``~/airflow/reports``), created if missing."""
    base = os.environ.get("FINDINGS_REPORT_DIR") or str(
        Path(os.environ.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "reports"
    )
    path = Path(base) / subdir
    path.mkdir(parents=True, exist_ok=True)
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "report"


def _chart_label(label: object) -> str:
    return truncate(" ".join(str(label).split()), CHART_LABEL)


def _chart_png(df: pd.DataFrame, chart: Chart) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = df.head(chart.top)
    # labels are names from the service: one line each (no glyph for a tab), and a long one would squeeze the
    # bars out of the figure
    data = data.set_axis([_chart_label(label) for label in data.index], axis=0)
    data = data.set_axis([_chart_label(label) for label in data.columns], axis=1)
    # a label with "$" would be parsed as math: a repository named "$\frac{$" would fail the whole report
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = plt.subplots(figsize=(8, max(2.5, 0.35 * len(data) + 1)))
        try:
            colours = None
            if any(str(c) in SEVERITY_COLOURS for c in data.columns):  # one colour per severity column
                colours = [SEVERITY_COLOURS.get(str(c), OTHER_COLOUR) for c in data.columns]
            # a line chart marks its points: with one day of history a line has nothing to join, and the chart
            # would be an empty frame
            style: dict[str, Any] = {"marker": "o"} if chart.kind == "line" else {}
            data.plot(kind=chart.kind, stacked=chart.stacked, ax=ax, legend=data.shape[1] > 1, color=colours,
                      **style)
            ax.set_title(chart.title)
            if chart.kind == "barh":
                ax.invert_yaxis()
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90)
        finally:
            plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _csv_labels(index: pd.Index) -> pd.Index:
    """Index or column labels (one level or several) and their names made safe for a spreadsheet."""
    import pandas as pd

    names = [csv_cell(name) for name in index.names]
    if len(index):  # mapping an empty MultiIndex would drop its levels (and the CSV header's names)
        if isinstance(index, pd.MultiIndex):
            index = index.map(lambda labels: tuple(csv_cell(label) for label in labels))
        else:
            index = index.map(csv_cell)
    return index.set_names(names)


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as written to a CSV file: whole-number columns as integers, as the HTML shows them (``25``, a missing
    one empty), every string value and label through ``csv_cell``; other numbers unchanged."""
    out = _whole_numbers(df).map(csv_cell)
    out.index = _csv_labels(df.index)
    out.columns = _csv_labels(df.columns)
    return out


def _label(name: object) -> str:
    """A column or table name as a person reads it: ``sla_breaches`` -> "Sla breaches"."""
    text = str(name).replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def _whole_numbers(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose float columns holding only whole numbers hold integers (missing: ``""``): a ticket
    id is ``25``, not ``25.0``, ``2.5e+01`` or ``NaN``, in the HTML and the CSV alike."""
    import pandas as pd

    out = df.copy()
    for column in out.columns:
        values = out[column]
        if pd.api.types.is_float_dtype(values) and values.dropna().apply(float.is_integer).all():
            out[column] = ["" if pd.isna(v) else int(v) for v in values]
    return out


def html_frame(df: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """``df`` as shown in a report's HTML: whole-number columns as integers (a ticket id is ``25``, not ``25.0``
    or ``2.5e+01``; missing is blank), readable column names; and whether its index means anything (a default
    0, 1, 2 ... index is not shown)."""
    import pandas as pd

    out = _whole_numbers(df)
    out.columns = [_label(c) for c in out.columns]
    meaningful = not (isinstance(df.index, pd.RangeIndex) and df.index.name is None)
    return out, meaningful


def write_report(
    name: str,
    title: str,
    tables: dict[str, pd.DataFrame],
    *,
    charts: list[Chart] | None = None,
    notes: list[str] | None = None,
    out_dir: Path | None = None,
    warehouse: Warehouse | None = None,
    kind: str | None = None,
) -> Report:
    """Write ``<name>.html`` and one ``<name>.<table>.csv`` per table; return their paths. With a ``warehouse``,
    the HTML is also stored there (``reports`` table, under ``kind``, default ``name``), where the dashboard on
    the API server reads it."""
    out = out_dir or report_dir()
    out.mkdir(parents=True, exist_ok=True)
    stem = _slug(name)
    report = Report(html=str(out / f"{stem}.html"))
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}"
        "td:first-child,th:first-child{text-align:left}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC.</p>",
    ]
    parts += [f"<p>{html.escape(n)}</p>" for n in notes or ()]
    for chart in charts or ():
        df = tables.get(chart.table)
        if df is not None and not df.empty and df.select_dtypes("number").shape[1]:
            png = _chart_png(df.select_dtypes("number"), chart)
            parts.append(
                f"<h2>{html.escape(chart.title)}</h2><img alt='{html.escape(chart.title)}' "
                f"src='data:image/png;base64,{png}'>"
            )
    for table_name, df in tables.items():
        csv_path = out / f"{stem}.{_slug(table_name)}.csv"
        # CRLF rows (RFC 4180): the writer then quotes a value holding a bare "\r" too, which a spreadsheet would
        # otherwise read as the start of a new row (whose first cell ``csv_cell`` never saw)
        csv_frame(df).to_csv(csv_path, lineterminator="\r\n")
        report.csv[table_name] = str(csv_path)
        parts.append(f"<h2>{html.escape(_label(table_name))}</h2>")
        shown, with_index = html_frame(df)
        parts.append(shown.to_html(border=0, escape=True, index=with_index, na_rep="")
                     if not df.empty else "<p>(empty)</p>")
    parts.append("</body></html>")
    page = "\n".join(parts)
    Path(report.html).write_text(page)
    if warehouse is not None:
        report.stored_id = warehouse.save_report(kind or stem, title, page)
    return report


def log_table(logger, title: str, df: pd.DataFrame, max_rows: int = 40) -> None:
    """Write a table to a task log, one line per row, compactly."""
    logger.info(
        "%s (%d rows)\n%s", title, len(df), df.head(max_rows).to_string() if not df.empty else "(empty)"
    )
