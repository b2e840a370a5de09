"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Write the change out explicitly (op.add_column, op.create_table, op.create_index ...), never from schema.py, and
make schema.py agree with it (tests/warehouse/test_versioning.py compares the upgraded database with
schema.metadata). A new finding column can be filled from the stored raw JSON with
findings_provider.warehouse.migrate.fill_finding_columns(op.get_bind(), ["column"]).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    """${message}"""
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    """Not supported: a warehouse is never downgraded (restore a backup instead)."""
    raise NotImplementedError("the warehouse is never downgraded; restore a backup instead")
