"""findings' counted marks recounted once: marks left stale by updates that moved a copy, before this release.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

Until this release an upsert that changed a stored copy's branch, detection time or fingerprint (repository or
``match_based_id``) kept its ``counted`` mark, and the recount after a pull looked only at fingerprints with a copy
not marked yet, so such a copy (and the copies of the fingerprint it left) could keep a mark the rule no longer
gives; and copies without a repository were never recounted once stored unmarked. The upsert now unmarks them
(``warehouse.branches.mark_on_update``, ``left_behind``); this revision recounts every fingerprint once, writing
only the rows whose mark changes. No schema change.
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Recount every fingerprint."""
    from findings_provider.warehouse.branches import recount

    recount(op.get_bind(), everything=True)


def downgrade() -> None:
    """Not supported, like every warehouse revision."""
    raise NotImplementedError("the warehouse is never downgraded")
