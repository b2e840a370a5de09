"""Test-only revision after the shipped head: what a next release's revision looks like (never shipped).

Revision ID: next_fixture
Revises: the head of the shipped revisions, whichever it is
Create Date: 2026-11-26

Adds a nullable finding column filled from each stored finding's ``raw`` (with ``fill_finding_columns``) and a new
table. Added to the shipped revisions through Alembic's ``version_locations`` by the tests; it follows whatever
revision is the shipped head, so shipping a real revision needs no change here.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from findings_provider.warehouse.migrate import fill_finding_columns
from findings_provider.warehouse.versioning import head_revisions

revision = "next_fixture"
(down_revision,) = head_revisions()
branch_labels = None
depends_on = None


def _raw_status(issue_type: str, item: Any) -> dict[str, Any]:
    """The finding's status exactly as the service sent it (the column the revision adds)."""
    status = item.get("status") if isinstance(item, dict) else None
    return {"fixture_raw_status": None if status is None else str(status)}


def upgrade() -> None:
    """Add ``findings.fixture_raw_status`` (filled from raw) and the table ``fixture_notes``."""
    op.add_column("findings", sa.Column("fixture_raw_status", sa.Text()))
    op.create_table(
        "fixture_notes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("note", sa.Text(), nullable=False),
    )
    fill_finding_columns(op.get_bind(), ["fixture_raw_status"], derive=_raw_status)


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
