"""One count per finding across branches: which stored copy of a finding the service's web UI counts.

The service finds the same issue on every branch it scans, as one finding per branch with the same fingerprint
(``match_based_id``). Its web UI counts such a finding once, and so does its API with ``dedup=true``: the copy on
the project's primary branch, else the latest one (``api-notes.md``, "SBOM export and liveness"). Secrets are
counted on every branch, in both. The warehouse keeps every copy (each is a finding of its own, triaged and
ticketed on its own) and marks the counted one:

- ``findings.counted`` is true for the copy counted, false for the other copies; a secret, and a finding without
  a fingerprint, is always counted. Among the copies of one fingerprint (same issue type, repository and
  ``match_based_id``) the counted one is the copy on the project's ``primary_branch`` (``projects``), else the one
  detected last (``relevant_since``, NULL oldest), ties by the highest id.
- :func:`recount` sets it, writing only the rows whose mark changes; the extraction runs it after its pulls and
  before the day's snapshot, and the read-back after a write runs it too (it may store copies the warehouse did not
  have).
- :func:`store_projects` is the one writer of ``projects``: a complete listing of the deployment's projects
  replaces the table (the extraction, the ``project_settings`` plan), and the projects the service answered a
  change with replace their own rows (the ``project_settings`` apply); either way in its own transaction,
  followed by :func:`recount`.

``findings_provider.programme`` counts only counted copies unless a page asks for every branch's copy.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import case, delete, false, func, insert, or_, select, true, tuple_, update
from sqlalchemy.engine import Connection

from .schema import findings, projects
from .timestamps import utc_datetime

if TYPE_CHECKING:
    from findings_provider.client.models import Project

    from .store import Warehouse

log = logging.getLogger(__name__)

#: The issue type whose findings are counted on every branch.
EVERY_BRANCH_TYPES = ("secrets",)


def is_counted() -> Any:
    """The condition over ``findings`` of a copy the service's web UI counts (NULL, before the first
    :func:`recount`, counts: the warehouse then holds no second copy it knows of)."""
    return or_(findings.c.counted.is_(None), findings.c.counted == true())


def _always_counted() -> Any:
    return or_(findings.c.issue_type.in_(EVERY_BRANCH_TYPES), findings.c.match_based_id.is_(None),
               findings.c.match_based_id == "")


def _fingerprint() -> tuple[Any, Any, Any]:
    return findings.c.issue_type, findings.c.repository_name, findings.c.match_based_id


def recount(conn: Connection, *, everything: bool = False) -> int:
    """Mark the counted copy of each finding (see the module's docstring); return the rows whose mark changed.

    By default only the fingerprints with a copy not marked yet (``counted`` NULL: stored since the last
    recount) are looked at, found in ``ix_findings_fingerprint``; ``everything`` looks at every fingerprint (the
    primary branches changed). One ``UPDATE ... FROM`` a window over the fingerprints looked at.
    """
    on_primary = case((findings.c.ref == projects.c.primary_branch, 0), else_=1)
    rank = func.row_number().over(
        partition_by=_fingerprint(),
        order_by=(on_primary, findings.c.relevant_since.desc().nulls_last(), findings.c.id.desc()),
    )
    where = [~_always_counted()]
    if not everything:
        unmarked = select(*_fingerprint()).where(findings.c.counted.is_(None)).distinct()
        where.append(tuple_(*_fingerprint()).in_(unmarked))
    ranked = (
        select(findings.c.issue_type, findings.c.id, case((rank == 1, true()), else_=false()).label("first"))
        .select_from(findings.outerjoin(projects, projects.c.name == findings.c.repository_name))
        .where(*where)
        .subquery("ranked")
    )
    changed = conn.execute(
        update(findings)
        .values(counted=ranked.c.first)
        .where(findings.c.issue_type == ranked.c.issue_type, findings.c.id == ranked.c.id,
               or_(findings.c.counted.is_(None), findings.c.counted != ranked.c.first))
    ).rowcount
    changed += conn.execute(
        update(findings).values(counted=true())
        .where(_always_counted(), or_(findings.c.counted.is_(None), findings.c.counted == false()))
    ).rowcount
    return int(changed)


def counted_on_insert(dialect: str, target: str, issue_type: str, repository: str, match_based_id: str, ref: str,
                      relevant_since: str, ident: str, *, copies_in_batch: str | None = None) -> str:
    """SQL of the ``counted`` mark a new finding row is inserted with (the upserts' statements, ``.upsert``).

    The mark :func:`recount` would set, where one stored copy decides it; NULL (not marked yet) otherwise, so that
    the next :func:`recount` ranks the copies:

    - true when the copy is always counted, or when no other copy of its fingerprint is stored (the one copy is
      the counted one);
    - false when the stored copy marked counted ranks before it (primary branch, then detected later, then the
      higher id: the recount's order). The pages of a pull arrive newest first, so most copies after the first
      of a fingerprint are stored false, and a first load leaves the recount the few copies that take the count
      from a stored one (one on the primary branch after one elsewhere, or a copy detected later);
    - NULL otherwise (another copy is stored and none marked counted ranks before it).

    The recount then rewrites only those rows instead of every copy (2-3 KB each, and the indexes that hold
    ``counted``).

    ``issue_type`` … ``ident``: the SQL of the new row's values; ``target``: the findings table as quoted.
    ``copies_in_batch`` (PostgreSQL, whose one ``INSERT ... SELECT`` does not see the rows it inserts itself): the
    SQL of how many rows of the batch share the fingerprint (more than one: NULL). SQLite inserts row by row, each
    seeing the ones before it.
    """
    every_branch = ", ".join(f"'{kind}'" for kind in EVERY_BRANCH_TYPES)
    always = f"{issue_type} IN ({every_branch}) OR {match_based_id} IS NULL OR {match_based_id} = ''"
    same = f"f.issue_type = {issue_type} AND f.match_based_id = {match_based_id}"
    marked, unmarked = ("1", "0") if dialect == "sqlite" else ("TRUE", "FALSE")
    primary = f"(SELECT p.primary_branch FROM {projects.name} AS p WHERE p.name = {repository})"
    new_rank, stored_rank = (f"CASE WHEN {branch} = {primary} THEN 0 ELSE 1 END" for branch in (ref, "f.ref"))
    ranks_before = (
        f"({stored_rank} < {new_rank} OR ({stored_rank} = {new_rank} AND (f.relevant_since > {relevant_since} "
        f"OR (f.relevant_since IS NOT NULL AND {relevant_since} IS NULL) OR ((f.relevant_since = {relevant_since} "
        f"OR (f.relevant_since IS NULL AND {relevant_since} IS NULL)) AND f.id > {ident}))))"
    )

    def copies(condition: str) -> str:
        if dialect == "sqlite":  # IS: NULL repositories are one partition of the recount's window; SQLite indexes IS
            return f"EXISTS (SELECT 1 FROM {target} AS f WHERE {same} AND f.repository_name IS {repository}{condition})"
        # two indexable lookups: IS NOT DISTINCT FROM is not one
        return (f"EXISTS (SELECT 1 FROM {target} AS f WHERE {same} AND f.repository_name = {repository}{condition}) "
                f"OR ({repository} IS NULL AND EXISTS (SELECT 1 FROM {target} AS f WHERE {same} "
                f"AND f.repository_name IS NULL{condition}))")

    batch = "" if copies_in_batch is None else f"WHEN {copies_in_batch} > 1 THEN NULL "
    return (f"CASE WHEN {always} THEN {marked} {batch}WHEN NOT ({copies('')}) THEN {marked} "
            f"WHEN {copies(f' AND f.counted = {marked} AND {ranks_before}')} THEN {unmarked} ELSE NULL END")


def project_rows(listed: Iterable[Project], now: datetime) -> list[dict[str, Any]]:
    """Rows of ``projects`` from the client's projects (a name listed twice: the last listing)."""
    rows: dict[str, dict[str, Any]] = {}
    for p in listed:
        rows[p.name] = {
            "name": p.name, "id": p.id, "primary_branch": p.primary_branch or None,
            "default_branch": p.default_branch or None, "tags": list(p.tags), "url": p.url,
            "latest_scan_at": utc_datetime(p.latest_scan_at),
            "raw": orjson.dumps(p.model_dump(mode="json", exclude_none=True)).decode(), "synced_at": now,
        }
    return list(rows.values())


def store_projects(warehouse: Warehouse, listed: Iterable[Project], *, complete: bool = True,
                   now: datetime | None = None) -> dict[str, int]:
    """Store projects as the service answered them, in one transaction of its own, then :func:`recount`; return
    the projects stored and the findings whose mark changed.

    ``complete``: ``listed`` is the whole listing of the deployment, and replaces ``projects`` (projects no
    longer listed are removed). Otherwise only the rows of the projects given are replaced (the answer of a
    change to them) and the others are kept. ``now`` (default: the current time) is their ``synced_at``.
    """
    rows = project_rows(listed, now or datetime.now(timezone.utc))

    def write() -> dict[str, int]:
        with warehouse.engine.begin() as conn:
            before = primary_branches(conn)
            conn.execute(delete(projects) if complete else
                         delete(projects).where(projects.c.name.in_([r["name"] for r in rows])))
            if rows:
                conn.execute(insert(projects), rows)
            return {"projects": len(rows), "recounted": recount(conn, everything=primary_branches(conn) != before)}

    stored = warehouse._reconnecting(f"storing {len(rows)} projects", write)
    log.info("projects: %d stored%s (primary branches of the counted copies); %d findings recounted",
             stored["projects"], "" if complete else " of those changed", stored["recounted"])
    return stored


def primary_branches(conn: Connection) -> dict[str, str]:
    """Project name -> primary branch, for the projects that have one."""
    return {n: b for n, b in conn.execute(select(projects.c.name, projects.c.primary_branch)) if b}

