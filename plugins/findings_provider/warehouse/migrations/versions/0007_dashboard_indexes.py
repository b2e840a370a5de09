"""findings: indexes that let every dashboard page read index entries only, at any size.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

- ``ix_findings_severity_order``: the findings list's default order (severity rank, detected, issue type, id) as
  an index on the rank expression (``schema.severity_rank``, written here as it renders), with ``counted``,
  ``status`` and ``severity``: a page at offset N steps through N index entries instead of sorting the table.
- ``ix_findings_programme`` gains the key (``issue_type``, ``id``): the list of a number (open critical, past
  target) finds and sorts its page's keys in the index, and the open findings by type are counted there.
- ``ix_findings_triaged (triage_state, severity, counted)``: the triaged number reads only the triaged findings.
- ``ix_findings_external_ticket`` gains ``severity`` and ``counted``: the ticketed number reads the ticketed
  findings only, from the index.
- ``ix_findings_status_repository (status, repository_name, severity, relevant_since, counted)``: the
  repositories page (open and past-target findings per repository and severity) reads the index in its order.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: ``schema.severity_rank(findings.c.severity)`` as this revision indexes it.
SEVERITY_RANK = ("(CASE severity WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'medium' THEN 2 "
                 "WHEN 'low' THEN 3 ELSE 4 END)")


def upgrade() -> None:
    """Add three indexes, widen two."""
    op.create_index("ix_findings_severity_order", "findings",
                    [sa.text(SEVERITY_RANK), "relevant_since", "issue_type", "id", "counted", "status", "severity"])
    op.drop_index("ix_findings_programme", table_name="findings")
    op.create_index("ix_findings_programme", "findings", ["status", "severity", "relevant_since", "triage_state",
                                                          "external_ticket_id", "counted", "issue_type", "id"])
    op.create_index("ix_findings_triaged", "findings", ["triage_state", "severity", "counted"])
    op.drop_index("ix_findings_external_ticket", table_name="findings")
    op.create_index("ix_findings_external_ticket", "findings", ["external_ticket_id", "severity", "counted"])
    op.create_index("ix_findings_status_repository", "findings",
                    ["status", "repository_name", "severity", "relevant_since", "counted"])


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
