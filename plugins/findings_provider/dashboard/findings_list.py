"""The findings list: one page of findings for a :class:`~findings_provider.programme.FindingFilter`, sorted, with
its total and the values a filter can take; and the same selection as a streamed CSV file.

Plain data in, JSON-safe dicts out (no Airflow, no request objects): the app serves them, tests call them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import and_, func, or_, select, union_all

from findings_provider import programme
from findings_provider.client.vocabulary import OPEN_STATUSES, SEVERITY_ORDER
from findings_provider.dashboard.memo import Memo
from findings_provider.pipeline.ticket_outcomes import ticket_in_data
from findings_provider.programme import FindingFilter
from findings_provider.text import csv_cell, http_url
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import findings, severity_rank_of, ticket_actions, triage_actions
from findings_provider.warehouse.store import TICKETED_OUTCOMES

#: Rows of the CSV export read from the database at a time (memory stays flat whatever the total).
CSV_BATCH = 2000
#: Most distinct repositories or rules offered as filter suggestions.
SUGGESTIONS = 500
#: Columns of the list and of the CSV export, in order.
COLUMNS = ("issue_type", "id", "repository", "branch", "rule", "severity", "status", "triage_state", "ticket_id",
           "detected", "age_days", "due", "overdue_days", "url", "ticket_url")
_DAY = 86400.0


@dataclass(frozen=True)
class ListSettings:
    """What the dashboard's configuration says about lists: the fix-time targets (``sla.fix_days``), the link of
    a finding in the service (``dashboard.finding_url``), the page size (``dashboard.page_size``)."""

    targets: Mapping[str, int]
    finding_url: str | None = None
    page_size: int = 100


def touched_by(warehouse: Warehouse, run_id: str, touched: str) -> dict[str, set[int]]:
    """The findings (by issue type) that ``run_id`` triaged or planned to (``touched`` triage: a dry run plans),
    or created a ticket for, or maybe did (``touched`` ticket)."""
    out: dict[str, set[int]] = {}
    with warehouse.engine.connect() as conn:
        if touched == "triage":
            for issue_type, ids in conn.execute(select(triage_actions.c.issue_type, triage_actions.c.issue_ids).where(
                    triage_actions.c.run_id == run_id, triage_actions.c.status.in_(("succeeded", "planned")))):
                out.setdefault(issue_type, set()).update(int(i) for i in ids or ())
        elif touched == "ticket":
            for issue_type, finding_id in conn.execute(select(ticket_actions.c.issue_type, ticket_actions.c.finding_id)
                                                       .where(ticket_actions.c.run_id == run_id,
                                                              ticket_actions.c.outcome.in_(TICKETED_OUTCOMES))):
                out.setdefault(issue_type, set()).add(int(finding_id))
    return out


def _links(raw: str | None, settings: ListSettings, issue_type: str, finding_id: int,
           repository: str | None) -> tuple[str | None, str | None]:
    """The finding in the service (``finding_url``, else the code it points at) and its ticket in the tracker."""
    try:
        data = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        data = {}
    data = data if isinstance(data, dict) else {}
    if settings.finding_url:
        url = http_url(settings.finding_url.format(id=finding_id, issue_type=issue_type, repository=repository or ""))
    else:
        url = http_url(data.get("line_of_code_url") or data.get("findingPathUrl"))
    ticket = ticket_in_data(data)
    return url, None if ticket is None else http_url(ticket.get("url"))


def _row(r: Any, settings: ListSettings, now: datetime) -> dict[str, Any]:
    url, ticket_url = _links(r.raw, settings, r.issue_type, r.id, r.repository_name)
    since = r.relevant_since
    age = (now - since).total_seconds() / _DAY if since else None
    target = settings.targets.get(r.severity or "")
    due = since.timestamp() + target * _DAY if since and target is not None else None
    overdue = programme.days_past_target(since, r.severity, settings.targets, now) if r.status in OPEN_STATUSES \
        else None
    return {
        "issue_type": r.issue_type, "id": int(r.id), "repository": r.repository_name, "branch": r.ref,
        "rule": r.rule_name,
        "severity": r.severity, "status": r.status, "triage_state": r.triage_state,
        "ticket_id": None if r.external_ticket_id is None else int(r.external_ticket_id),
        "detected": since.date().isoformat() if since else None,
        "age_days": None if age is None else int(age),
        "due": None if due is None else datetime.fromtimestamp(due, now.tzinfo).date().isoformat(),
        "overdue_days": overdue,
        "url": url, "ticket_url": ticket_url,
    }


_SELECTED = (findings.c.issue_type, findings.c.id, findings.c.repository_name, findings.c.ref, findings.c.rule_name,
             findings.c.severity, findings.c.status, findings.c.triage_state, findings.c.external_ticket_id,
             findings.c.relevant_since, findings.c.raw)


def _where_and_order(warehouse: Warehouse, selection: FindingFilter, settings: ListSettings, now: datetime,
                     sort: str, descending: bool) -> tuple[list[Any], list[Any]]:
    """The selection's conditions (a run's ``touched`` findings read first) and the ORDER BY of ``sort``."""
    touched = touched_by(warehouse, selection.run_id, selection.touched) if selection.touched else None
    where = selection.where(settings.targets, now, touched)
    return where, programme.order_by(sort, descending, settings.targets, warehouse.engine.dialect.name)


#: Seconds the filters' choice lists are reused for (reading them scans three indexes of ``findings``).
OPTIONS_TTL = 60.0
_options: Memo[dict[str, list[str]]] = Memo(16, ttl=OPTIONS_TTL)


def options(warehouse: Warehouse) -> dict[str, list[str]]:
    """The values present, for the filters' choice lists: issue types, severities (most severe first) and
    statuses; and up to ``SUGGESTIONS`` repository and rule names (suggestions for the part-of-a-name filters).
    Read at most once per ``OPTIONS_TTL`` seconds per warehouse."""
    return _options.get(warehouse, (), lambda: _read_options(warehouse))


def _first_names(column: Any) -> Any:
    """The first ``SUGGESTIONS`` distinct values of ``column`` in order (``programme.distinct_values``)."""
    names = programme.distinct_values(column).subquery()
    return select(names.c.value).order_by(names.c.value).limit(SUGGESTIONS)


def _read_options(warehouse: Warehouse) -> dict[str, list[str]]:
    with warehouse.engine.connect() as conn:
        combos = conn.execute(select(findings.c.issue_type, findings.c.status, findings.c.severity).distinct()).all()
        repositories, rules = ([*conn.execute(_first_names(column)).scalars()]
                               for column in (findings.c.repository_name, findings.c.rule_name))
    severities = {s for _, _, s in combos if s}
    return {
        "issue_type": sorted({t for t, _, _ in combos if t}),
        "severity": [s for s in SEVERITY_ORDER if s in severities] + sorted(
            severities - set(SEVERITY_ORDER)),
        "status": sorted({s for _, s, _ in combos if s}),
        "repository": repositories,
        "rule": rules,
    }


def _due_candidates(conn: Any, where: list[Any], targets: Mapping[str, int], first: int,
                    descending: bool) -> Any:
    """Keys of the selection that hold its ``first`` findings in due-date order (a few more at most), as a
    subquery.

    A finding's due date is its detection time plus its severity's target (``programme.due_seconds``, in whole
    seconds on SQLite), so within one severity the due order is the detection order: per severity, the
    ``first``-th finding in detection order (read in ``ix_findings_severity_order``) bounds the candidates, and
    every finding of that severity due in the same second or earlier (later, ``descending``) is one of them.
    Findings without a due date come last (by key): the first ``first`` of them are candidates too, unless the
    dated ones fill the page already. The caller sorts the candidates by the full order, so the page is the one
    the whole selection gives."""
    parts = []
    short = False
    for severity in targets:
        in_severity = [*where, findings.c.severity == severity, findings.c.relevant_since.is_not(None),
                       programme.severity_rank() == severity_rank_of(severity)]
        since = findings.c.relevant_since.desc() if descending else findings.c.relevant_since
        bound = conn.execute(select(findings.c.relevant_since).where(*in_severity).order_by(since)
                             .offset(first - 1).limit(1)).scalar()
        if bound is None:  # fewer than ``first``: all of them
            short = True
        elif descending:
            in_severity.append(findings.c.relevant_since >= bound.replace(microsecond=0))
        else:
            in_severity.append(findings.c.relevant_since <= bound.replace(microsecond=999999))
        parts.append(select(findings.c.issue_type, findings.c.id).where(*in_severity))
    if short or not parts:
        undated = or_(findings.c.severity.is_(None), findings.c.severity.not_in(list(targets)),
                      findings.c.relevant_since.is_(None))
        parts.append(select(findings.c.issue_type, findings.c.id).where(*where, undated)
                     .order_by(findings.c.issue_type, findings.c.id).limit(first).subquery().select())
    return union_all(*parts).subquery("candidates")


def findings_page(warehouse: Warehouse, selection: FindingFilter, settings: ListSettings, now: datetime, *,
                  sort: str = "severity", descending: bool = False, offset: int = 0,
                  limit: int | None = None) -> dict[str, Any]:
    """One page of the list: ``total`` (every finding the selection holds), ``rows`` from ``offset``, the
    selection's query (``filter``) and the choice lists (``options``)."""
    if offset < 0:
        raise ValueError(f"offset = {offset}: expected 0 or more")
    size = settings.page_size if limit is None else limit
    if not 1 <= size <= 1000:
        raise ValueError(f"limit = {size}: expected 1 to 1000")
    where, order = _where_and_order(warehouse, selection, settings, now, sort, descending)
    with warehouse.engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(findings).where(*where)).scalar_one())
        # the page's keys first, sorted on the key and sort columns alone; then its rows (with their 2-3 KB
        # ``raw``) for those keys only: the sort never carries ``raw``
        keys = select(findings.c.issue_type, findings.c.id)
        if sort == "due":  # the candidates are read in index order: no sort of the whole selection
            candidates = _due_candidates(conn, where, settings.targets, offset + size, descending)
            keys = keys.join(candidates, and_(candidates.c.issue_type == findings.c.issue_type,
                                              candidates.c.id == findings.c.id))
        else:
            keys = keys.where(*where)
        keys_page = keys.order_by(*order).offset(offset).limit(size).subquery()
        rows = conn.execute(select(*_SELECTED).join(keys_page, and_(
            keys_page.c.issue_type == findings.c.issue_type, keys_page.c.id == findings.c.id)).order_by(*order)).all()
    return {
        "total": total, "offset": offset, "limit": size, "sort": sort, "descending": descending,
        "filter": selection.query(), "rows": [_row(r, settings, now) for r in rows], "options": options(warehouse),
    }


def findings_csv(warehouse: Warehouse, selection: FindingFilter, settings: ListSettings, now: datetime, *,
                 sort: str = "severity", descending: bool = False) -> Iterator[str]:
    """The whole selection as CSV text chunks (a header, then ``CSV_BATCH`` rows a chunk), read through a
    server-side cursor: memory does not grow with the number of findings. Cells a spreadsheet would run as a
    formula are made inert (``text.csv_cell``). A bad ``sort`` raises ValueError here, before the first chunk."""
    where, order = _where_and_order(warehouse, selection, settings, now, sort, descending)
    return _csv_chunks(warehouse, select(*_SELECTED).where(*where).order_by(*order), settings, now)


def _csv_chunks(warehouse: Warehouse, stmt: Any, settings: ListSettings, now: datetime) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    yield buffer.getvalue()
    with warehouse.engine.connect().execution_options(stream_results=True, yield_per=CSV_BATCH) as conn:
        for batch in conn.execute(stmt).partitions(CSV_BATCH):
            buffer.seek(0)
            buffer.truncate()
            for r in batch:
                row = _row(r, settings, now)
                writer.writerow([csv_cell(row[c]) for c in COLUMNS])
            yield buffer.getvalue()
