"""The warehouse of the first versioned release: every table and index, written out.

Revision ID: 0001
Revises:
Create Date: 2026-11-26

Frozen: later changes of ``schema.py`` go into new revisions, never here. The types are the plain ones the
custom types of ``schema.py`` render to, so that a later change of those type decorators cannot change what this
revision creates: ``UtcDateTime`` is ``timestamptz`` on PostgreSQL and ``VARCHAR(32)`` (canonical UTC text) on
SQLite (``TIMESTAMP`` below); ``JsonText`` is ``TEXT``.

The tables are created through ``create_schema(ops)``, called with Alembic's ``op``: a warehouse made before
versioning is brought to this revision by the same function with a recorder instead of ``op`` (see
``findings_provider.warehouse.versioning.baseline_metadata``), so both paths agree by construction.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

#: What ``schema.UtcDateTime`` renders to in this release.
TIMESTAMP = sa.DateTime(timezone=True).with_variant(sa.String(32), "sqlite")


def upgrade() -> None:
    """Create the tables and indexes of the first versioned release."""
    create_schema(op)


def downgrade() -> None:
    """Not supported: a warehouse is never downgraded (restore a backup instead)."""
    raise NotImplementedError("the warehouse cannot be downgraded below revision 0001; restore a backup instead")


def create_schema(ops: Any) -> None:
    """Create every table and index of this revision through ``ops`` (Alembic's ``op``, or a recorder)."""
    _findings(ops)
    _scans(ops)
    _actions(ops)
    _policies(ops)
    _dependencies(ops)
    _ledger(ops)
    _history(ops)
    _reports(ops)


def _findings(ops: Any) -> None:
    ops.create_table(
        "findings",
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("id", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("repository_name", sa.Text()),
        sa.Column("ref", sa.Text()),
        sa.Column("rule_name", sa.Text()),
        sa.Column("severity", sa.Text()),
        sa.Column("confidence", sa.Text()),
        sa.Column("status", sa.Text()),
        sa.Column("triage_state", sa.Text()),
        sa.Column("triage_reason", sa.Text()),
        sa.Column("autotriage_verdict", sa.Text()),
        sa.Column("reachability", sa.Text()),
        sa.Column("match_based_id", sa.Text()),
        sa.Column("relevant_since", TIMESTAMP),
        sa.Column("external_ticket_id", sa.BigInteger()),
        sa.Column("first_seen_scan_id", sa.BigInteger()),
        sa.Column("validation_state", sa.Text()),
        sa.Column("path", sa.Text()),
        sa.Column("triaged_at", TIMESTAMP),
        sa.Column("state_updated_at", TIMESTAMP),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("issue_type", "id", name="pk_findings"),
    )
    ops.create_index("ix_findings_type_status", "findings", ["issue_type", "status"])
    ops.create_index("ix_findings_type_verdict", "findings", ["issue_type", "autotriage_verdict"])
    ops.create_index("ix_findings_external_ticket", "findings", ["external_ticket_id"])
    ops.create_index("ix_findings_repository", "findings", ["repository_name"])
    ops.create_index("ix_findings_rule", "findings", ["rule_name"])


def _scans(ops: Any) -> None:
    ops.create_table(
        "scans",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("repository_id", sa.Text()),
        sa.Column("branch", sa.Text()),
        sa.Column("commit", sa.Text()),
        sa.Column("status", sa.Text()),
        sa.Column("exit_code", sa.Integer()),
        sa.Column("started_at", TIMESTAMP),
        sa.Column("completed_at", TIMESTAMP),
        sa.Column("is_full_scan", sa.Boolean()),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
    )
    ops.create_index("ix_scans_status", "scans", ["status"])


def _actions(ops: Any) -> None:
    ops.create_table(
        "triage_actions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text()),
        sa.Column("dag_id", sa.Text()),
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("issue_ids", sa.Text()),
        sa.Column("request", sa.Text()),
        sa.Column("response", sa.Text()),
        sa.Column("num_triaged", sa.Integer()),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )
    ops.create_table(
        "ticket_actions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text()),
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("finding_id", sa.BigInteger(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("ticket_id", sa.BigInteger()),
        sa.Column("ticket_url", sa.Text()),
        sa.Column("external_slug", sa.Text()),
        sa.Column("message", sa.Text()),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )
    ops.create_index("ix_ticket_actions_finding", "ticket_actions", ["issue_type", "finding_id"])
    ops.create_table(
        "pipeline_state",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("value", sa.Text()),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
    )


def _policies(ops: Any) -> None:
    ops.create_table(
        "policy_rules",
        sa.Column("policy_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("path", sa.Text()),
        sa.Column("policy_mode", sa.Text()),
        sa.Column("severity", sa.Text()),
        sa.Column("category", sa.Text()),
        sa.Column("confidence", sa.Text()),
        sa.Column("source", sa.Text()),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("policy_id", "id", name="pk_policy_rules"),
    )
    ops.create_table(
        "policy_changes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text()),
        sa.Column("policy_id", sa.Text(), nullable=False),
        sa.Column("rule_path", sa.Text(), nullable=False),
        sa.Column("previous_mode", sa.Text()),
        sa.Column("new_mode", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("response", sa.Text()),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )


def _dependencies(ops: Any) -> None:
    ops.create_table(
        "dependencies",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("name", sa.Text()),
        sa.Column("version", sa.Text()),
        sa.Column("ecosystem", sa.Text()),
        sa.Column("license", sa.Text()),
        sa.Column("lockfile_path", sa.Text()),
        sa.Column("repository_id", sa.Text()),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
    )
    ops.create_table(
        "dependency_repositories",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("name", sa.Text()),
        sa.Column("num_dependencies", sa.Integer()),
        sa.Column("has_dependency_path_scan", sa.Boolean()),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("synced_at", TIMESTAMP, nullable=False),
    )


def _ledger(ops: Any) -> None:
    ops.create_table(
        "write_ledger",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("finding_id", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("relevant_since", TIMESTAMP),
        sa.Column("run_id", sa.Text()),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("kind", "scope", "issue_type", "finding_id", name="pk_write_ledger"),
    )
    ops.create_table(
        "dropped_findings",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text()),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("policy", sa.Text(), nullable=False),
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("finding_id", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )


def _history(ops: Any) -> None:
    ops.create_table(
        "finding_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("finding_id", sa.BigInteger(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column("old_value", sa.Text()),
        sa.Column("new_value", sa.Text()),
        sa.Column("observed_at", TIMESTAMP, nullable=False),
        sa.Column("run_id", sa.Text()),
    )
    ops.create_index("ix_finding_events_finding", "finding_events", ["issue_type", "finding_id"])
    ops.create_index("ix_finding_events_observed", "finding_events", ["observed_at"])
    ops.create_table(
        "finding_snapshots",
        sa.Column("day", sa.Text(), nullable=False),
        sa.Column("issue_type", sa.Text(), nullable=False),
        sa.Column("repository_name", sa.Text(), nullable=False),
        sa.Column("severity", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("day", "issue_type", "repository_name", "severity", "status",
                                name="pk_finding_snapshots"),
    )


def _reports(ops: Any) -> None:
    ops.create_table(
        "reports",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text()),
        sa.Column("html", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    )
    ops.create_index("ix_reports_name", "reports", ["name", "id"])
