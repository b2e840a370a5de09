"""SQLAlchemy Core tables of the emulator's state.

Findings keep their JSON serialised once in ``finding_bodies``; ``findings`` holds only the narrow columns
that filters and ordering need, so scans over it stay cheap. Indexes are created after the bulk load.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

from .rows import FindingRow

metadata = MetaData()

_FINDING_TYPES = {
    "id": Integer, "relevant_since": Float, "repo_id": Integer, "is_primary": Integer, "is_malicious": Integer,
    "epss": Float, "has_mates": Integer, "ticket_id": Integer, "pro_rule": Integer, "historical": Integer,
}

findings = Table(
    "findings",
    metadata,
    *(Column(name, _FINDING_TYPES.get(name, String), primary_key=name == "id", autoincrement=False)
      for name in FindingRow._fields),
)

finding_bodies = Table(
    "finding_bodies",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", LargeBinary, nullable=False),
)

# Indexes are created after loading (see Database.create_indexes). The order index serves listings, selections
# and the secrets cursor; the fingerprint index finds a finding's twins on other branches; the status index
# serves the most common filter.
Index("ix_findings_order", findings.c.issue_type, findings.c.relevant_since.desc(), findings.c.id)
Index("ix_findings_fingerprint", findings.c.issue_type, findings.c.match_based_id)
Index("ix_findings_status", findings.c.issue_type, findings.c.status)

repositories = Table(
    "repositories",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String, nullable=False, unique=True),
    Column("url", String, nullable=False),
    Column("primary_branch", String, nullable=False),
    Column("default_branch", String, nullable=False),
    Column("visibility", String, nullable=False),
    Column("tags", Text, nullable=False),
    Column("diff_scan", Boolean, nullable=False),
    Column("full_scan", Boolean, nullable=False),
    Column("has_dependency_path_scan", Boolean, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("latest_scan_at", Float),
)

scans = Table(
    "scans",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("repository_id", Integer, nullable=False),
    Column("branch", String, nullable=False),
    Column("commit", String, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("completed_at", Float),
    Column("status", String, nullable=False),
    Column("exit_code", Integer),
    Column("is_full_scan", Boolean, nullable=False),
    Column("products", String, nullable=False),
    Column("code_count", Integer, nullable=False),
    Column("sca_count", Integer, nullable=False),
    Column("secrets_count", Integer, nullable=False),
    Column("total_time", Float),
    Column("has_logs", Boolean, nullable=False),
    Column("finish_after", Float),
    Column("reads_left", Integer),
    Column("final_status", String, nullable=False),
    Column("final_exit_code", Integer, nullable=False),
    Column("meta", Text, nullable=False),
    Index("ix_scans_order", "started_at", "id"),
)

policies = Table(
    "policies",
    metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False),
    Column("slug", String, nullable=False),
    Column("is_default", Boolean, nullable=False),
    Column("product_type", String, nullable=False),
)

rules = Table(
    "rules",
    metadata,
    Column("policy_id", String, primary_key=True),
    Column("id", String, primary_key=True),
    Column("path", String, nullable=False),
    Column("mode", String, nullable=False),
    Column("last_change_at", String, nullable=False),
    Column("last_change_by", String),
    Column("body", Text, nullable=False),
    Index("ix_rules_path", "policy_id", "path"),
)

dependencies = Table(
    "dependencies",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String, nullable=False),
    Column("version", String, nullable=False),
    Column("ecosystem", String, nullable=False),
    Column("lockfile_path", String, nullable=False),
    Column("licenses", String, nullable=False),
    Column("repository_id", Integer, nullable=False),
    Column("transitivity", String, nullable=False),
)

tickets = Table(
    "tickets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("external_slug", String, nullable=False),
    Column("url", String, nullable=False),
    Column("issue_type", String, nullable=False),
    Column("repository", String, nullable=False),
    Column("rule_name", String, nullable=False),
    Column("issue_ids", Text, nullable=False),
    Column("tracker_project_id", String),
    Column("created_at", String, nullable=False),
)
