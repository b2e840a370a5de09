"""The findings warehouse: tables, fast row building, idempotent upserts (SQLAlchemy Core, no Airflow)."""

from .rows import (
    DEPENDENCY_COLUMNS,
    DEPENDENCY_REPOSITORY_COLUMNS,
    FINDING_COLUMNS,
    POLICY_RULE_COLUMNS,
    SCAN_COLUMNS,
    Rejection,
    dependency_repository_rows,
    dependency_rows,
    finding_row_from_dict,
    finding_rows,
    policy_rule_rows,
    scan_rows,
)
from .store import TicketAction, Warehouse
from .url import make_engine, url_from_connection

__all__ = [
    "DEPENDENCY_COLUMNS",
    "DEPENDENCY_REPOSITORY_COLUMNS",
    "FINDING_COLUMNS",
    "POLICY_RULE_COLUMNS",
    "SCAN_COLUMNS",
    "Rejection",
    "TicketAction",
    "Warehouse",
    "dependency_repository_rows",
    "dependency_rows",
    "finding_row_from_dict",
    "finding_rows",
    "make_engine",
    "policy_rule_rows",
    "scan_rows",
    "url_from_connection",
]
