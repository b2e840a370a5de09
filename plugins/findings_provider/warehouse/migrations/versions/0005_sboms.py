"""SBOM exports: ``sboms`` (one row per export, with its CycloneDX document) and ``sbom_components``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28

The ``dependency_inventory`` DAG's ``export_sboms`` task stores every repository's export (completed, failed or
timed out) in ``sboms``, and the components of the newest completed one in ``sbom_components`` for the licence
report. Two new tables: nothing to fill.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: What ``schema.UtcDateTime`` renders to (as in revision 0001).
TIMESTAMP = sa.DateTime(timezone=True).with_variant(sa.String(32), "sqlite")


def upgrade() -> None:
    """Create the two tables and their indexes."""
    op.create_table(
        "sboms",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("repository_id", sa.BigInteger, nullable=False),
        sa.Column("task_token", sa.Text),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("spec_version", sa.Text),
        sa.Column("component_count", sa.Integer),
        sa.Column("document", sa.Text),
        sa.Column("run_id", sa.Text),
        sa.Column("exported_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_sboms_repository", "sboms", ["repository_id", "id"])
    op.create_table(
        "sbom_components",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("repository_id", sa.BigInteger, nullable=False),
        sa.Column("sbom_id", sa.Integer, nullable=False),
        sa.Column("name", sa.Text),
        sa.Column("version", sa.Text),
        sa.Column("purl", sa.Text),
        sa.Column("licences", sa.Text),
    )
    op.create_index("ix_sbom_components_repository", "sbom_components", ["repository_id"])


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
