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
  before the day's snapshot. A copy stored unmarked by the re-reads around a write (``pipeline.freshness``) is
  counted until the next extraction's recount.
- A stored copy whose ``RANK_COLUMNS`` change (another branch, detection time or fingerprint) is unmarked by the
  upsert that changes it (:func:`mark_on_update`), and a copy that leaves a fingerprint while counted (or not marked
  yet) unmarks the copies it leaves behind (:data:`SQLITE_LEFT_BEHIND`, :func:`left_behind`): the next
  :func:`recount` then ranks both fingerprints' copies again.
- :func:`store_projects` is the one writer of ``projects``: a complete listing of the deployment's projects
  replaces the table (the extraction, the ``project_settings`` plan), and the projects the service answered a
  change with replace their own rows (the ``project_settings`` apply); either way in its own transaction,
  followed by :func:`recount`.

``findings_provider.programme`` counts only counted copies unless a page asks for every branch's copy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import (
    Select,
    case,
    delete,
    false,
    func,
    insert,
    literal_column,
    or_,
    select,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.engine import Connection

from .schema import findings, projects
from .timestamps import utc_datetime, utc_text

if TYPE_CHECKING:
    from findings_provider.client.models import Project

    from .store import Warehouse

log = logging.getLogger(__name__)

#: The key of the transaction-level advisory lock that every PostgreSQL write of findings' copies or marks takes
#: first (the ASCII of "findings"; :func:`lock_findings`).
FINDINGS_UPSERT_LOCK = 0x66696E64696E6773

#: The issue type whose findings are counted on every branch.
EVERY_BRANCH_TYPES = ("secrets",)


def lock_findings(conn: Connection) -> None:
    """Take the findings write lock for the rest of ``conn``'s transaction, before its first read: the lock of every
    findings upsert (``.upsert``), the listing of projects and the recount (``FINDINGS_UPSERT_LOCK`` on PostgreSQL,
    SQLite's write lock: ``BEGIN IMMEDIATE``, unless the driver began the transaction already). Stored copies, the
    projects and the marks are then written by one transaction at a time: two listings stored at once would
    otherwise both delete the old rows and insert the same new ones (the second fails on ``projects``' key), a
    recount could write marks computed before another one's commit, and an upsert could store a finding another
    one stored between its lookup and its write."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(FINDINGS_UPSERT_LOCK)))
        return
    driver = conn.connection.driver_connection
    if driver is None or not driver.in_transaction:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def is_counted() -> Any:
    """The condition over ``findings`` of a copy the service's web UI counts (NULL, before the first
    :func:`recount`, counts: the warehouse then holds no second copy it knows of)."""
    return or_(findings.c.counted.is_(None), findings.c.counted == true())


def _always_counted(issue_type: Any = findings.c.issue_type, match_based_id: Any = findings.c.match_based_id) -> Any:
    """:func:`always_counted` in SQL, over ``findings`` or the given column expressions."""
    return or_(issue_type.in_(EVERY_BRANCH_TYPES), match_based_id.is_(None), match_based_id == "")


#: The stored columns a copy's ``counted`` mark depends on, besides its issue type (which never changes): its
#: fingerprint's and its :func:`rank`'s.
RANK_COLUMNS = ("repository_name", "match_based_id", "ref", "relevant_since")


def mark_on_update(target: str, distinct: str) -> str:
    """The SQL of the ``counted`` mark an upsert's update of a stored copy sets (``target``: the findings table as
    quoted, the stored row; ``excluded``: the new one; ``distinct``: the dialect's ``IS DISTINCT FROM``): NULL, to be
    recounted, when one of ``RANK_COLUMNS`` changes, else the stored mark."""
    differs = " OR ".join(f"{target}.{column} {distinct} excluded.{column}" for column in RANK_COLUMNS)
    return f"CASE WHEN {differs} THEN NULL ELSE {target}.counted END"


#: SQLite: a copy that leaves its fingerprint (another repository or ``match_based_id``) while counted or not marked
#: yet unmarks the copies marked not counted that it leaves behind, for the next recount (a connection-local
#: trigger, created as the history one is, on first use by an upsert that updates findings).
SQLITE_LEFT_BEHIND = (
    "CREATE TEMP TRIGGER IF NOT EXISTS findings_left_behind AFTER UPDATE OF repository_name, match_based_id "
    "ON main.findings WHEN old.counted IS NOT 0 AND (old.repository_name IS NOT new.repository_name "
    "OR old.match_based_id IS NOT new.match_based_id) BEGIN UPDATE findings SET counted = NULL "
    "WHERE issue_type = old.issue_type AND repository_name IS old.repository_name "
    "AND match_based_id = old.match_based_id AND counted = 0; END"
)


def left_behind(cursor: Any, stage: str, target: str) -> None:
    """PostgreSQL: :data:`SQLITE_LEFT_BEHIND`'s rule for the rows staged to update ``target`` (both as quoted), run
    before the merge. One join of the stage with the stored rows by key finds the
    fingerprints left by a counted (or unmarked) copy, usually none; each is then one probe of
    ``ix_findings_fingerprint``."""
    cursor.execute(
        f"SELECT DISTINCT o.issue_type, o.repository_name, o.match_based_id FROM {stage} AS s JOIN {target} AS o "
        "ON o.issue_type = s.issue_type AND o.id = s.id WHERE o.counted IS NOT FALSE "
        "AND (o.repository_name IS DISTINCT FROM s.repository_name "
        "OR o.match_based_id IS DISTINCT FROM s.match_based_id)")
    for issue_type, repository, match_based_id in cursor.fetchall():
        cursor.execute(
            f"UPDATE {target} SET counted = NULL WHERE issue_type = %s AND match_based_id = %s AND counted IS FALSE "
            f"AND {'repository_name IS NULL' if repository is None else 'repository_name = %s'}",
            (issue_type, match_based_id) if repository is None else (issue_type, match_based_id, repository))


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

    def ranked_where(*where: Any) -> Select[Any]:
        return (
            select(findings.c.issue_type, findings.c.id, case((rank == 1, true()), else_=false()).label("first"))
            .select_from(findings.outerjoin(projects, projects.c.name == findings.c.repository_name))
            .where(~_always_counted(), *where)
        )

    if everything:
        ranked = ranked_where().subquery("ranked")
    else:
        unmarked = select(*_fingerprint()).where(findings.c.counted.is_(None)).distinct()
        # a NULL repository is in no IN list: those fingerprints are matched by issue type and match_based_id, in a
        # window of their own (an OR of the two conditions is planned as a scan of every finding on PostgreSQL)
        unnamed = (select(findings.c.issue_type, findings.c.match_based_id)
                   .where(findings.c.counted.is_(None), findings.c.repository_name.is_(None)).distinct())
        ranked = union_all(
            ranked_where(tuple_(*_fingerprint()).in_(unmarked)),
            ranked_where(findings.c.repository_name.is_(None),
                         tuple_(findings.c.issue_type, findings.c.match_based_id).in_(unnamed)),
        ).subquery("ranked")
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


#: A finding's fingerprint: (issue type, repository name, ``match_based_id``); NULL repositories are one.
Fingerprint = tuple[str, str | None, str | None]


def always_counted(issue_type: str, match_based_id: str | None) -> bool:
    """Whether every copy of such a finding is counted: a secret, or a finding without a fingerprint (NULL or
    empty); the same test as ``_always_counted`` (SQL) and :func:`counted_on_insert`'s."""
    return issue_type in EVERY_BRANCH_TYPES or not match_based_id


#: A copy's place in the ranking of its fingerprint's copies, compared as a tuple (the greater ranks before):
#: on the project's primary branch, then detected later (NULL oldest), then the higher id: the recount's order.
Rank = tuple[bool, bool, str, int]


def rank(ref: str | None, relevant_since: str | None, ident: int, primary: str | None) -> Rank:
    """A copy's :data:`Rank` (``relevant_since``: canonical UTC text; ``primary``: its project's primary branch)."""
    return (primary is not None and ref == primary, relevant_since is not None, relevant_since or "", ident)


#: What a new copy's mark depends on, per fingerprint (:func:`stored_copies`): whether a copy is stored, the
#: :data:`Rank` of the best-ranked stored copy marked counted (None when none is), the project's primary branch.
StoredCopies = tuple[bool, Rank | None, str | None]


def counted_on_insert(target: str, issue_type: str, repository: str, match_based_id: str, ref: str,
                      relevant_since: str, ident: str) -> str:
    """SQLite: the SQL of the ``counted`` mark a new finding row is inserted with (``.upsert``). SQLite inserts row
    by row, each seeing the ones inserted before it.

    The rule of :func:`marks_on_insert` (PostgreSQL's, in Python), in SQL: ``EVERY_BRANCH_TYPES`` and the
    ranking of :func:`rank`.

    ``issue_type`` … ``ident``: the SQL of the new row's values; ``target``: the findings table as quoted.
    """
    always = _always_counted(literal_column(issue_type), literal_column(match_based_id)).compile(
        dialect=sqlite_dialect(), compile_kwargs={"literal_binds": True})
    # IS: NULL repositories are one partition of the recount's window; SQLite indexes IS
    same = (f"f.issue_type = {issue_type} AND f.match_based_id = {match_based_id} "
            f"AND f.repository_name IS {repository}")
    primary = f"(SELECT p.primary_branch FROM {projects.name} AS p WHERE p.name = {repository})"
    new_rank, stored_rank = (f"CASE WHEN {branch} = {primary} THEN 0 ELSE 1 END" for branch in (ref, "f.ref"))
    ranks_before = (
        f"({stored_rank} < {new_rank} OR ({stored_rank} = {new_rank} AND (f.relevant_since > {relevant_since} "
        f"OR (f.relevant_since IS NOT NULL AND {relevant_since} IS NULL) OR ((f.relevant_since = {relevant_since} "
        f"OR (f.relevant_since IS NULL AND {relevant_since} IS NULL)) AND f.id > {ident}))))"
    )
    stored = f"EXISTS (SELECT 1 FROM {target} AS f WHERE {same})"
    outranked = f"EXISTS (SELECT 1 FROM {target} AS f WHERE {same} AND f.counted = 1 AND {ranks_before})"
    return f"CASE WHEN {always} THEN 1 WHEN NOT {stored} THEN 1 WHEN {outranked} THEN 0 ELSE NULL END"


#: The columns of a new row whose values its mark reads, in :func:`counted_on_insert`'s order of arguments.
MARK_COLUMNS = ("issue_type", "repository_name", "match_based_id", "ref", "relevant_since", "id")


def marked_insert(target: str, columns: Sequence[str], quote: Callable[[str], str] = str) -> str:
    """SQLite: the ``INSERT`` of new finding rows, one positional parameter per name of ``columns`` (quoted by
    ``quote``; ``MARK_COLUMNS`` among them), each row with its ``counted`` mark (:func:`counted_on_insert`, which
    reads the row's own parameters again by number: ``?N`` is the N-th column). ``target``: the findings table as
    quoted."""
    number = {column: at for at, column in enumerate(columns, start=1)}
    mark = counted_on_insert(target, *(f"?{number[c]}" for c in MARK_COLUMNS))
    return (f"INSERT INTO {target} ({', '.join(quote(c) for c in columns)}, counted) "
            f"VALUES ({', '.join('?' * len(columns))}, {mark})")


def marks_on_insert(new: Sequence[tuple[Fingerprint, str | None, str | None, int]],
                    stored: Callable[[set[Fingerprint]], Mapping[Fingerprint, StoredCopies]]) -> list[bool | None]:
    """The ``counted`` marks new finding rows are inserted with, in order of ``new`` (each row's fingerprint,
    ``ref``, ``relevant_since`` and id), each row seeing the ones before it as stored (as SQLite's row by row
    ``INSERT``, :func:`counted_on_insert`):

    - true when the copy is always counted (:func:`always_counted`) or no copy of its fingerprint is stored: what
      :func:`recount` would set;
    - false when the stored copy marked counted ranks before it (:func:`rank`): the recount would keep that one;
    - NULL (not marked yet) otherwise, so that the next :func:`recount` ranks the copies.

    The pages of a pull arrive newest first and the extraction stores the projects before its pulls, so most
    copies after the first of a fingerprint are stored false, and a first load leaves the recount only the few
    copies that take the count from a stored one, instead of rewriting every row (and three indexes) to mark it.
    ``stored``: of the fingerprints given, what is stored of each (:data:`StoredCopies`, read before the batch is
    written; PostgreSQL: :func:`stored_copies`).
    """
    always = [always_counted(fp[0], fp[2]) for fp, *_ in new]
    state = dict(stored({fp for (fp, *_), kept in zip(new, always, strict=True) if not kept}))
    marks: list[bool | None] = []
    for (fp, ref, since, ident), kept in zip(new, always, strict=True):
        if kept:
            marks.append(True)
            continue
        is_stored, best, primary = state[fp]
        mine = rank(ref, since, ident, primary)
        if not is_stored:
            marks.append(True)
            state[fp] = (True, mine, primary)
        else:
            marks.append(False if best is not None and best > mine else None)
    return marks


def _text_array(values: Iterable[str | None]) -> str:
    """A PostgreSQL ``text[]`` literal of ``values`` (none NULL: the callers pass only set values). Each element is
    quoted, a backslash or double quote in it escaped (most have none: no call)."""
    quoted = [v if "\\" not in v and '"' not in v else v.replace("\\", "\\\\").replace('"', '\\"')
              for v in map(str, values)]
    return '{"' + '","'.join(quoted) + '"}' if quoted else "{}"


def stored_copies(cursor: Any, target: str, fingerprints: set[Fingerprint]) -> dict[Fingerprint, StoredCopies]:
    """PostgreSQL: what :func:`marks_on_insert` needs of each of ``fingerprints`` in ``target`` (the findings table
    as quoted): whether a copy is stored, the best-ranked stored copy marked counted, the primary branch.

    One query per issue type; each fingerprint is one probe of ``ix_findings_fingerprint`` (a ``LATERAL`` subquery
    with ``LIMIT 1``: whatever the table's statistics, as during a first load, the plan stays a probe per
    fingerprint), which orders the fingerprint's copies counted first, then by :func:`rank`'s order. A NULL
    repository is probed by ``IS NULL`` (and has no project).
    """
    found: dict[Fingerprint, StoredCopies] = {}
    probe = ("LEFT JOIN LATERAL (SELECT f.ref, f.relevant_since, f.id, f.counted IS TRUE AS counted FROM {target} AS f "
             "WHERE f.issue_type = %(type)s AND f.repository_name {repository} AND f.match_based_id = p.m "
             "ORDER BY f.counted IS TRUE DESC, (f.ref = p.b) IS TRUE DESC, f.relevant_since DESC NULLS LAST, "
             "f.id DESC LIMIT 1) AS c ON true")
    sql = (f"SELECT p.r, p.m, p.b, c.id IS NOT NULL, c.counted, c.ref, c.relevant_since, c.id FROM "
           f"(SELECT q.r, q.m, (SELECT primary_branch FROM {projects.name} WHERE name = q.r) AS b FROM "
           f"unnest(CAST(%(repos)s AS text[]), CAST(%(ids)s AS text[])) AS q(r, m)) AS p "
           f"{probe.format(target=target, repository='= p.r')} "
           f"UNION ALL SELECT NULL, p.m, NULL, c.id IS NOT NULL, c.counted, c.ref, c.relevant_since, c.id FROM "
           f"(SELECT q.m, CAST(NULL AS text) AS b FROM unnest(CAST(%(unnamed)s AS text[])) AS q(m)) AS p "
           f"{probe.format(target=target, repository='IS NULL')}")
    by_type: dict[str, list[Fingerprint]] = {}
    for fp in fingerprints:
        by_type.setdefault(fp[0], []).append(fp)
    for issue_type, group in sorted(by_type.items()):
        named = [fp for fp in group if fp[1] is not None]
        cursor.execute(sql, {"type": issue_type, "repos": _text_array([fp[1] for fp in named]),
                             "ids": _text_array([fp[2] for fp in named]),
                             "unnamed": _text_array([fp[2] for fp in group if fp[1] is None])})
        for repository, match_based_id, primary, is_stored, counted, ref, since, ident in cursor.fetchall():
            best = rank(ref, utc_text(since), ident, primary) if counted else None
            found[(issue_type, repository, match_based_id)] = (is_stored, best, primary)
    return found


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
    change to them) and the others are kept. ``now`` (default: the current time) is their ``synced_at``. Under
    :func:`lock_findings`: listings stored at once are stored one after the other.
    """
    rows = project_rows(listed, now or datetime.now(timezone.utc))

    def write() -> dict[str, int]:
        with warehouse.engine.begin() as conn:
            lock_findings(conn)
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


def recount_copies(warehouse: Warehouse) -> int:
    """:func:`recount` of the fingerprints with an unmarked copy, in a transaction of its own under
    :func:`lock_findings` (on PostgreSQL again after a lost connection, as :func:`store_projects`); return the rows
    whose mark changed. The extraction runs it after its pulls, and instead of :func:`store_projects` when the
    projects listing failed."""

    def write() -> int:
        with warehouse.engine.begin() as conn:
            lock_findings(conn)
            return recount(conn)

    return warehouse._reconnecting("recounting the counted copies", write)


def primary_branches(conn: Connection) -> dict[str, str]:
    """Project name -> primary branch, for the projects that have one."""
    return {n: b for n, b in conn.execute(select(projects.c.name, projects.c.primary_branch)) if b}

