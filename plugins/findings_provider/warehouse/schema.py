"""Tables of the findings warehouse, portable between SQLite and PostgreSQL.

Timestamps use :class:`UtcDateTime`: ``timestamptz`` on PostgreSQL, canonical UTC text on SQLite (see
:mod:`.timestamps`); both read back as aware UTC datetimes. JSON payloads other than ``raw`` use
:class:`JsonText` (JSON text in a text column). ``raw`` holds each object's JSON exactly as received.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    case,
    literal_column,
)
from sqlalchemy.sql.elements import ColumnElement, Grouping
from sqlalchemy.types import TypeEngine

from findings_provider.client.vocabulary import SEVERITY_ORDER

from .timestamps import utc_datetime, utc_now_text


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetime: ``timestamptz`` on PostgreSQL, fixed-width ISO 8601 UTC text on SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Use text on SQLite (which has no timestamp type), ``timestamptz`` elsewhere."""
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(32))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        """Accept an aware datetime or an ISO 8601 string; a naive one is taken as UTC."""
        if value is None:
            return None
        moment = utc_datetime(value)
        if moment is None:
            raise ValueError(f"not a timestamp: {value!r}")
        if dialect.name == "sqlite":
            return moment.isoformat(" ", "microseconds")
        return moment

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        return None if value is None else utc_datetime(value)


class JsonText(TypeDecorator[Any]):
    """Any JSON-serialisable value, stored as JSON text (orjson)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        """Encode the value as JSON text; None is SQL NULL."""
        return None if value is None else orjson.dumps(value).decode()

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        """Decode the JSON text."""
        return None if value is None else orjson.loads(value)


def _created_at() -> Column[datetime]:
    return Column("created_at", UtcDateTime, nullable=False, default=utc_now_text)


def _synced_at() -> Column[datetime]:
    return Column("synced_at", UtcDateTime, nullable=False)


metadata = MetaData()

findings = Table(
    "findings",
    metadata,
    Column("issue_type", Text, nullable=False),
    Column("id", BigInteger, nullable=False, autoincrement=False),
    Column("repository_name", Text),
    Column("ref", Text),
    Column("rule_name", Text),
    Column("severity", Text),
    Column("confidence", Text),
    Column("status", Text),
    Column("triage_state", Text),
    Column("triage_reason", Text),
    Column("autotriage_verdict", Text),
    Column("reachability", Text),
    Column("match_based_id", Text),
    Column("relevant_since", UtcDateTime),
    Column("external_ticket_id", BigInteger),
    Column("first_seen_scan_id", BigInteger),
    Column("validation_state", Text),  # secrets: whether the secret was checked live (added in schema 2)
    Column("path", Text),  # the file the finding is in (added in schema 2)
    Column("triaged_at", UtcDateTime),  # when a person or a policy last triaged it (added in schema 3)
    Column("state_updated_at", UtcDateTime),  # when its status last changed in the service (added in schema 3)
    # the copy the service's web UI counts of a finding found on several branches (revision 0004; see
    # findings_provider.warehouse.branches): one per fingerprint, every secret
    Column("counted", Boolean),
    Column("raw", Text, nullable=False),
    # rows.content_digest of raw (revision 0006): what the upsert compares to skip an unchanged finding; NULL for a
    # finding stored before that revision, until it is next read (then written once, with its digest)
    Column("digest", BigInteger),
    _synced_at(),
    PrimaryKeyConstraint("issue_type", "id", name="pk_findings"),
    # covers the daily snapshot's counts and the dashboard's (issue type, status, severity, repository): read
    # from the index, not from the 2-3 KB rows (revision 0002)
    Index("ix_findings_counts", "issue_type", "status", "severity", "repository_name", "counted"),
    Index("ix_findings_type_verdict", "issue_type", "autotriage_verdict"),
    # the ticketed number per severity, read from the index (widened in revision 0007)
    Index("ix_findings_external_ticket", "external_ticket_id", "severity", "counted"),
    # the dashboard's findings table filters by repository and by rule (added in schema 3)
    Index("ix_findings_repository", "repository_name"),
    Index("ix_findings_rule", "rule_name"),
    # the copies of one finding on several branches, and those not marked yet (revision 0004; warehouse.branches)
    Index("ix_findings_fingerprint", "issue_type", "repository_name", "match_based_id", "counted"),
    # the programme's numbers (open, past the fix-time target, triaged, ticketed, fixed) by severity, read from
    # the index (revision 0003); with the key, the findings list of a number finds and sorts its page's keys in
    # the index too (revision 0007)
    Index("ix_findings_programme", "status", "severity", "relevant_since", "triage_state", "external_ticket_id",
          "counted", "issue_type", "id"),
    # the triaged number per severity reads the triaged findings only (revision 0007)
    Index("ix_findings_triaged", "triage_state", "severity", "counted"),
    # the repositories page: open and past-target findings per status, repository and severity, read in the
    # index's order (revision 0007)
    Index("ix_findings_status_repository", "status", "repository_name", "severity", "relevant_since", "counted"),
)


def severity_rank_of(name: str | None) -> int:
    """The rank :func:`severity_rank` gives the severity ``name``."""
    return SEVERITY_ORDER.index(name) if name in SEVERITY_ORDER else len(SEVERITY_ORDER)


def severity_rank(severity: ColumnElement[Any]) -> ColumnElement[int]:
    """0 for the most severe known severity (``SEVERITY_ORDER``), larger for the others, unknown last. Written
    with literal values, not bound parameters: a query's ORDER BY uses ``ix_findings_severity_order`` only when
    its expression is the index's, word for word (SQLite and PostgreSQL alike). The simple form (``CASE severity
    WHEN 'critical' THEN 0 ...``) is the one PostgreSQL gives back when the index is read, so the upgraded schema
    compares equal to this declaration."""
    return case({literal_column(f"'{name}'"): literal_column(str(severity_rank_of(name))) for name in SEVERITY_ORDER},
                value=severity, else_=literal_column(str(severity_rank_of(None))))


# the findings list's default order (most severe first, oldest first within, then the key), read from the index
# with the columns its filters test most, so that a page at any offset steps through index entries only
# (revision 0007)
Index("ix_findings_severity_order", Grouping(severity_rank(findings.c.severity)), findings.c.relevant_since,
      findings.c.issue_type, findings.c.id, findings.c.counted, findings.c.status, findings.c.severity)

scans = Table(
    "scans",
    metadata,
    Column("id", Text, primary_key=True),
    Column("repository_id", Text),
    Column("branch", Text),
    Column("commit", Text),
    Column("status", Text),
    Column("exit_code", Integer),
    Column("started_at", UtcDateTime),
    Column("completed_at", UtcDateTime),
    Column("is_full_scan", Boolean),
    Column("raw", Text, nullable=False),
    _synced_at(),
    Index("ix_scans_status", "status"),
)

triage_actions = Table(
    "triage_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Text),
    Column("dag_id", Text),
    Column("issue_type", Text, nullable=False),
    Column("dry_run", Boolean, nullable=False),
    Column("issue_ids", JsonText),
    Column("request", JsonText),
    Column("response", JsonText),
    Column("num_triaged", Integer),
    Column("status", Text, nullable=False),
    Column("error", Text),
    _created_at(),
)

ticket_actions = Table(
    "ticket_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Text),
    Column("issue_type", Text, nullable=False),
    Column("finding_id", BigInteger, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("ticket_id", BigInteger),
    Column("ticket_url", Text),
    Column("external_slug", Text),
    Column("message", Text),
    _created_at(),
    Index("ix_ticket_actions_finding", "issue_type", "finding_id"),
)

pipeline_state = Table(
    "pipeline_state",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", JsonText),
    Column("updated_at", UtcDateTime, nullable=False),
)

policy_rules = Table(
    "policy_rules",
    metadata,
    Column("policy_id", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("path", Text),
    Column("policy_mode", Text),
    Column("severity", Text),
    Column("category", Text),
    Column("confidence", Text),
    Column("source", Text),
    Column("raw", Text, nullable=False),
    _synced_at(),
    PrimaryKeyConstraint("policy_id", "id", name="pk_policy_rules"),
)

policy_changes = Table(
    "policy_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Text),
    Column("policy_id", Text, nullable=False),
    Column("rule_path", Text, nullable=False),
    Column("previous_mode", Text),
    Column("new_mode", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("response", JsonText),
    _created_at(),
)

dependencies = Table(
    "dependencies",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text),
    Column("version", Text),
    Column("ecosystem", Text),
    Column("license", Text),
    Column("lockfile_path", Text),
    Column("repository_id", Text),
    Column("raw", Text, nullable=False),
    _synced_at(),
)

dependency_repositories = Table(
    "dependency_repositories",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("name", Text),
    Column("num_dependencies", Integer),
    Column("has_dependency_path_scan", Boolean),
    Column("raw", Text, nullable=False),
    _synced_at(),
)

#: What a policy wrote, per finding: triaged it (``kind`` triage, ``scope`` the policy) or ticketed it (``kind``
#: ticket, ``scope`` "any": one ticket per finding whatever the policy), with the finding's ``relevant_since``
#: then. A person who undoes the write (reopens the finding, closes the ticket) is not overridden by the same
#: policy until a scan reintroduces the finding (its ``relevant_since`` moves).
write_ledger = Table(
    "write_ledger",
    metadata,
    Column("kind", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("issue_type", Text, nullable=False),
    Column("finding_id", BigInteger, nullable=False, autoincrement=False),
    Column("relevant_since", UtcDateTime),
    Column("run_id", Text),
    _created_at(),
    PrimaryKeyConstraint("kind", "scope", "issue_type", "finding_id", name="pk_write_ledger"),
)

#: Findings a write left out after the fresh re-read right before it, with the reason (one row per finding
#: and run): changed in the service by a person, no longer matching, or reopened after this policy's write.
dropped_findings = Table(
    "dropped_findings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Text),
    Column("kind", Text, nullable=False),
    Column("policy", Text, nullable=False),
    Column("issue_type", Text, nullable=False),
    Column("finding_id", BigInteger, nullable=False),
    Column("reason", Text, nullable=False),
    _created_at(),
)

#: Every observed change of a finding's tracked fields (``HISTORY_FIELDS``), one row per field and change: the
#: value the warehouse held and the value a read of the service returned, when that read was stored and by which
#: run. Written in the transaction of the upsert that stores the change, so a rerun or a full refresh that reads
#: the same state records nothing twice. A finding's first observation is not an event: its row (with
#: ``relevant_since``, ``triaged_at`` and ``state_updated_at``) is the starting state.
finding_events = Table(
    "finding_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("issue_type", Text, nullable=False),
    Column("finding_id", BigInteger, nullable=False),
    Column("field", Text, nullable=False),
    Column("old_value", Text),
    Column("new_value", Text),
    Column("observed_at", UtcDateTime, nullable=False),
    Column("run_id", Text),
    Index("ix_finding_events_finding", "issue_type", "finding_id"),
    Index("ix_finding_events_observed", "observed_at"),
)

#: Counts of findings per UTC day, issue type, repository, severity and status, as stored at the day's last
#: snapshot (each extraction replaces its day's rows). ``""`` stands for an absent repository, severity or status
#: (key columns cannot be NULL on PostgreSQL).
finding_snapshots = Table(
    "finding_snapshots",
    metadata,
    Column("day", Text, nullable=False),
    Column("issue_type", Text, nullable=False),
    Column("repository_name", Text, nullable=False),
    Column("severity", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("count", Integer, nullable=False),
    # of them, the copies the service's web UI counts (``findings.counted``; NULL in snapshots taken before
    # revision 0004, when only every branch's copies were counted)
    Column("counted", Integer),
    _created_at(),
    PrimaryKeyConstraint("day", "issue_type", "repository_name", "severity", "status", name="pk_finding_snapshots"),
    # the dashboard's trend: open findings per day and severity read from the index (revision 0003)
    Index("ix_finding_snapshots_trend", "day", "status", "severity", "repository_name", "count", "counted"),
)

#: Reports as people open them (HTML with its charts), kept in the warehouse so that the dashboard on the API
#: server shows what any worker wrote. The newest ``REPORTS_KEPT`` of each name are kept.
reports = Table(
    "reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("run_id", Text),
    Column("html", Text, nullable=False),
    _created_at(),
    Index("ix_reports_name", "name", "id"),
)

#: The deployment's projects as the service lists them (revision 0004): their primary branch decides which copy
#: of a finding found on several branches is counted (``findings.counted``). Replaced by every complete listing.
projects = Table(
    "projects",
    metadata,
    Column("name", Text, primary_key=True),
    Column("id", BigInteger),
    Column("primary_branch", Text),
    Column("default_branch", Text),
    Column("tags", JsonText),
    Column("url", Text),
    Column("latest_scan_at", UtcDateTime),
    Column("raw", Text, nullable=False),
    _synced_at(),
)

#: SBOM exports (revision 0005): one row per repository export a run asked for, completed or not: the service's
#: task token (None when the export could not be started), ``status`` (``completed``, ``failed``, ``timeout``),
#: the error, the CycloneDX ``specVersion``, the number of components and the document itself (completed only).
#: The newest ``SBOMS_KEPT`` rows of each repository are kept (``findings_provider.governance.sbom``).
sboms = Table(
    "sboms",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("repository_id", BigInteger, nullable=False),
    Column("task_token", Text),
    Column("status", Text, nullable=False),
    Column("error", Text),
    Column("spec_version", Text),
    Column("component_count", Integer),
    Column("document", JsonText),
    Column("run_id", Text),
    Column("exported_at", UtcDateTime, nullable=False),
    Index("ix_sboms_repository", "repository_id", "id"),
)

#: The components of each repository's newest completed SBOM (revision 0005), replaced by every completed export
#: of the repository: name, version, package URL and licences (``, ``-joined like ``dependencies.license``).
sbom_components = Table(
    "sbom_components",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("repository_id", BigInteger, nullable=False),
    Column("sbom_id", Integer, nullable=False),
    Column("name", Text),
    Column("version", Text),
    Column("purl", Text),
    Column("licences", Text),
    Index("ix_sbom_components_repository", "repository_id"),
)
