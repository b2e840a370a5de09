"""Summary of open findings from the warehouse (pandas): by severity x issue type, and by repository."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import func, select

from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import findings

if TYPE_CHECKING:
    import pandas as pd

SEVERITY_ORDER = ("critical", "high", "medium", "low")


def open_findings_summary(warehouse: Warehouse) -> dict[str, pd.DataFrame]:
    """Two tables of open-finding counts: ``by_severity`` (rows severity, columns issue type) and
    ``by_repository`` (rows repository, columns severity, most findings first)."""
    import pandas as pd

    stmt = (
        select(
            findings.c.issue_type,
            func.coalesce(findings.c.severity, "unknown").label("severity"),
            func.coalesce(findings.c.repository_name, "unknown").label("repository"),
            func.count().label("findings"),
        )
        .where(findings.c.status == "open")
        .group_by(findings.c.issue_type, "severity", "repository")
    )
    with warehouse.engine.connect() as conn:
        result = conn.execute(stmt)
        frame = pd.DataFrame(result.fetchall(), columns=list(result.keys()))
    if frame.empty:
        empty = pd.DataFrame(dtype="int64")
        return {"by_severity": empty, "by_repository": empty.copy()}
    by_severity = frame.pivot_table(
        index="severity", columns="issue_type", values="findings", aggfunc="sum", fill_value=0
    )
    order = [s for s in SEVERITY_ORDER if s in by_severity.index] + sorted(
        s for s in by_severity.index if s not in SEVERITY_ORDER
    )
    by_severity = by_severity.loc[order]
    by_severity.columns.name = None
    by_repository = frame.pivot_table(
        index="repository", columns="severity", values="findings", aggfunc="sum", fill_value=0
    )
    by_repository = by_repository[[s for s in SEVERITY_ORDER if s in by_repository.columns]
                                  + sorted(c for c in by_repository.columns if c not in SEVERITY_ORDER)]
    by_repository.columns.name = None
    by_repository = by_repository.loc[by_repository.sum(axis=1).sort_values(ascending=False, kind="stable").index]
    return {"by_severity": by_severity.astype("int64"), "by_repository": by_repository.astype("int64")}
