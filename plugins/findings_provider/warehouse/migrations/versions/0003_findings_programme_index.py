"""findings and finding_snapshots: covering indexes for the programme's numbers and the trend.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27

``ix_findings_programme (status, severity, relevant_since, triage_state, external_ticket_id)``: the dashboard's
counts of open, past-target, triaged, ticketed and fixed findings per severity (``findings_provider.programme``)
read the index instead of the 2-3 KB rows; ``ix_finding_snapshots_trend (day, status, severity, repository_name,
count)``: the trend (open findings per day and severity, of every repository or one) reads the index.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``ix_findings_programme`` and ``ix_finding_snapshots_trend``."""
    op.create_index("ix_findings_programme", "findings",
                    ["status", "severity", "relevant_since", "triage_state", "external_ticket_id"])
    op.create_index("ix_finding_snapshots_trend", "finding_snapshots",
                    ["day", "status", "severity", "repository_name", "count"])


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
