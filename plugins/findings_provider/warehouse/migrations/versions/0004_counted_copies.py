"""findings counted once across branches: ``findings.counted``, ``finding_snapshots.counted``, ``projects``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27

The service's web UI counts a finding found on several branches once (the copy on the project's primary branch,
else the latest); ``findings.counted`` marks that copy (``findings_provider.warehouse.branches``), the projects'
primary branches are kept in ``projects``, and each daily snapshot counts the counted copies beside all of them.
The two covering indexes of the counts gain ``counted`` so that the deduplicated counts still read the index.
The marks are computed here from the stored findings (no project known yet: the latest copy of each fingerprint);
the next extraction, which lists the projects, corrects them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: What ``schema.UtcDateTime`` renders to (as in revision 0001).
TIMESTAMP = sa.DateTime(timezone=True).with_variant(sa.String(32), "sqlite")


def upgrade() -> None:
    """Add the columns and the table, rebuild the two covering indexes, mark the counted copies."""
    from findings_provider.warehouse.branches import recount

    op.create_table(
        "projects",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("id", sa.BigInteger),
        sa.Column("primary_branch", sa.Text),
        sa.Column("default_branch", sa.Text),
        sa.Column("tags", sa.Text),
        sa.Column("url", sa.Text),
        sa.Column("latest_scan_at", TIMESTAMP),
        sa.Column("raw", sa.Text, nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
    )
    op.add_column("findings", sa.Column("counted", sa.Boolean))
    op.add_column("finding_snapshots", sa.Column("counted", sa.Integer))
    op.drop_index("ix_findings_counts", table_name="findings")
    op.create_index("ix_findings_counts", "findings",
                    ["issue_type", "status", "severity", "repository_name", "counted"])
    op.drop_index("ix_findings_programme", table_name="findings")
    op.create_index("ix_findings_programme", "findings",
                    ["status", "severity", "relevant_since", "triage_state", "external_ticket_id", "counted"])
    op.create_index("ix_findings_fingerprint", "findings",
                    ["issue_type", "repository_name", "match_based_id", "counted"])
    op.drop_index("ix_finding_snapshots_trend", table_name="finding_snapshots")
    op.create_index("ix_finding_snapshots_trend", "finding_snapshots",
                    ["day", "status", "severity", "repository_name", "count", "counted"])
    recount(op.get_bind(), everything=True)


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
