"""findings' content digest: ``findings.digest``, what the upsert compares to skip an unchanged finding.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29

``findings.digest`` holds ``warehouse.rows.content_digest`` of each finding's ``raw`` (a 64-bit hash of the JSON
the page gave); the upsert looks up the stored digests of a page's keys and writes only the findings whose digest
differs (``warehouse.upsert``). A nullable column without a default: instant on both databases, nothing is
filled here. A finding stored before this revision has none, so the next read of it writes it once (keeping its
``synced_at`` when its ``raw`` is unchanged) and stores its digest.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the column."""
    op.add_column("findings", sa.Column("digest", sa.BigInteger))


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
