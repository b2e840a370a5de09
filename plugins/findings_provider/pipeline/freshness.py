"""Fresh state right before a write: re-read a policy's candidates from the service, keep only the unchanged.

The warehouse's copy of a finding can be a day old, and a person may have acted in the service since: moved it to
``reviewing``, ignored it, reopened it, given it a ticket. Right before each triage or ticket request, the findings
it names are read again in one filtered findings pull (the policy's selector mapped to the API's filters, narrowed
to the request's repositories, rules and branch (:func:`request_filters`), starting at the oldest one's
``relevant_since``), at most ``ceil(findings / 3000) + 1`` pages.
After the write, ``settle`` reads the findings it named once more and stores the service's rows: the warehouse
equals the service for everything the run wrote, in the same run.
A candidate is kept only when the service still lists it, its status, triage state and ticket are what the
warehouse had, it still matches the selector, and no earlier write of the same policy was undone by a person
(see ``ledger``). Every other candidate is dropped with its reason (table ``dropped_findings``). The fresh rows
are written to the warehouse, so what a person changed is there too.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert

from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.client.models import Finding
from findings_provider.client.vocabulary import IssueType
from findings_provider.config import FindingSelector
from findings_provider.pipeline import ledger
from findings_provider.pipeline.selection import SelectedFinding, select_by_ids
from findings_provider.warehouse import FINDING_COLUMNS, Warehouse, finding_rows
from findings_provider.warehouse.schema import dropped_findings

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)

#: Secrets have no server-side filters: their whole (short) list is read, at most this many per page.
SECRETS_PAGE_SIZE = 1000
#: At most this many repositories (or rules) narrow a request's re-read; beyond it that filter is left to the
#: policy's own (a query string stays short, and so many values narrow little).
NARROWING_MAX_VALUES = 50
#: The columns whose change in the service means a person (or another tool) acted on the finding.
WATCHED = ("status", "triage_state", "triage_reason", "external_ticket_id")
_COL = {name: i for i, name in enumerate(FINDING_COLUMNS)}


@dataclass
class Freshness:
    """The outcome of one policy's re-read: the ids to act on, and the others with their reasons."""

    kept: list[int] = field(default_factory=list)
    dropped: dict[int, str] = field(default_factory=dict)
    #: Candidates an earlier write of ours with an unknown outcome did after all: id -> the fresh row.
    ours: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    requests: int = 0
    #: When the service answered the re-read's last request (``time.monotonic()``): the race window starts there.
    read_at: float = 0.0

    def summary(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for reason in self.dropped.values():
            key = reason.split(":", 1)[0]
            reasons[key] = reasons.get(key, 0) + 1
        return {"kept": len(self.kept), "dropped": len(self.dropped), "requests": self.requests,
                "drop_reasons": reasons}


def api_filters(issue_type: str, selector: FindingSelector, since: datetime | None, *,
                stateless: bool = False) -> dict[str, Any]:
    """The findings-query filters that narrow the pull to what ``selector`` can match (a superset of it).

    ``stateless``: leave out the filters a person changes (status), to find candidates that left the selection.
    """
    cols = selector.columns()
    filters: dict[str, Any] = {}
    if since is not None:
        filters["since"] = since
    if len(cols.get("status", ())) == 1 and not stateless:
        filters["status"] = cols["status"][0]
    if cols.get("severity"):
        filters["severities"] = cols["severity"]
    if cols.get("repository_name"):
        filters["repos"] = cols["repository_name"]
    if len(cols.get("ref", ())) == 1:
        filters["ref"] = cols["ref"][0]
    if issue_type in (IssueType.SAST, IssueType.AI_SAST):  # AI findings carry the code findings' fields
        if cols.get("rule_name"):
            filters["rules"] = cols["rule_name"]
        if len(cols.get("autotriage_verdict", ())) == 1:
            filters["autotriage_verdict"] = cols["autotriage_verdict"][0]
    if issue_type == "sca" and cols.get("reachability"):
        filters["exposures"] = cols["reachability"]  # canonical reachability uses the filter's words
    return filters


def request_filters(issue_type: str, selector: FindingSelector,
                    candidates: Sequence[SelectedFinding]) -> dict[str, Any]:
    """The narrowest findings query that lists ``candidates`` (the findings of one request): the policy's filters
    (:func:`api_filters`, from the oldest candidate's ``relevant_since``), narrowed to the candidates' repositories,
    rules (code findings) and branch. Only ever narrower than the policy's filters: a value the policy's filter does
    not hold is not added, a dimension in which a candidate has no value is not narrowed, and neither is one with
    more than ``NARROWING_MAX_VALUES`` values."""
    filters = api_filters(issue_type, selector, _since(candidates))

    def narrow(key: str, values: Iterable[str | None]) -> None:
        distinct = set(values)
        if None in distinct or not distinct or len(distinct) > NARROWING_MAX_VALUES:
            return
        allowed = filters.get(key)
        narrower = sorted(v for v in distinct if v is not None and (allowed is None or v in allowed))
        if narrower:  # an empty list would be no filter at all
            filters[key] = narrower

    narrow("repos", (c.repository_name for c in candidates))
    if issue_type in (IssueType.SAST, IssueType.AI_SAST):
        narrow("rules", (c.rule_name for c in candidates))
    refs = {c.ref for c in candidates}
    if "ref" not in filters and len(refs) == 1 and None not in refs:
        filters["ref"] = refs.pop()
    return filters


def _since(candidates: Iterable[SelectedFinding]) -> datetime | None:
    oldest = min((c.relevant_since for c in candidates if c.relevant_since is not None), default=None)
    return None if oldest is None else oldest - timedelta(seconds=1)


def _pages(client: FindingsClient, issue_type: str, filters: dict[str, Any]) -> Iterator[Any]:
    if issue_type == "secrets":
        return client.raw_pages(client.list_secrets, limit=SECRETS_PAGE_SIZE)
    return client.raw_pages(client.list_findings, issue_type, page_size=FINDINGS_PAGE_SIZE.maximum, **filters)


def _pull(client: FindingsClient, warehouse: Warehouse, issue_type: str, filters: dict[str, Any], wanted: set[int],
          fresh: dict[int, tuple[Any, ...]], max_pages: int | None, answered: list[float] | None = None
          ) -> tuple[int, bool]:
    """Page until every wanted id was seen, the list ends or ``max_pages``; store every row read; return the
    requests made and whether the list ended. ``answered``: gets the time each answer arrived."""
    requests = 0
    pages = _pages(client, issue_type, filters)
    while max_pages is None or requests < max_pages:
        page = next(pages, None)
        if answered is not None:
            answered.append(time.monotonic())
        if page is None:
            return requests, True
        requests += 1
        rows = finding_rows(issue_type, page.items)
        warehouse.upsert_findings(rows)  # the service's current state, whatever the write decides
        fresh.update((row[_COL["id"]], row) for row in rows if row[_COL["id"]] in wanted)
        if wanted <= fresh.keys():
            return requests, False
        if issue_type != "secrets" and len(page.items) < FINDINGS_PAGE_SIZE.maximum:
            return requests, True
    return requests, False


def _pull_twice(client: FindingsClient, warehouse: Warehouse, issue_type: str, selector: FindingSelector,
                known: Sequence[SelectedFinding], narrow: dict[str, Any], fresh: dict[int, tuple[Any, ...]],
                budget: int | None, *, wanted: set[int] | None = None, twins: bool = False,
                answered: list[float] | None = None) -> tuple[int, bool]:
    """Pull with the ``narrow`` filters until every wanted id (default: those of ``known``) was met; then, within
    what is left of ``budget``, look for the ``known`` ones not met without the filters a person changes (status),
    from the oldest of them, in their repositories (``twins``: without ``ref`` too, as a finding's twins on other
    branches are wanted). Returns the requests made and whether the last pull reached the end of its list."""
    requests, complete = _pull(client, warehouse, issue_type, narrow,
                               wanted if wanted is not None else {c.id for c in known}, fresh, budget, answered)
    missing = [c for c in known if c.id not in fresh]
    if missing and budget is not None and requests < budget:
        wider = api_filters(issue_type, selector, _since(missing), stateless=True)
        wider.setdefault("repos", sorted({c.repository_name for c in missing if c.repository_name}))
        if twins:
            wider.pop("ref", None)
        used, complete = _pull(client, warehouse, issue_type, wider, {c.id for c in missing}, fresh,
                               budget - requests, answered)
        requests += used
    return requests, complete


def matches(row: Sequence[Any], selector: FindingSelector) -> list[str]:
    """The selector fields a warehouse row no longer matches (empty: it matches)."""
    return [
        f"{column} is {row[_COL[column]]!r}"
        for column, values in selector.columns().items()
        if row[_COL[column]] is None or str(row[_COL[column]]) not in values
    ]


def changes(before: SelectedFinding, now: Sequence[Any] | Finding, watched: Sequence[str] = WATCHED) -> list[str]:
    """What a person (or another tool) changed in the service since the warehouse read ``before``, of the
    ``watched`` fields: ``status open -> reviewing``, ... ``now``: the service's finding as a warehouse row
    (``FINDING_COLUMNS``) or as the client's typed finding; both hold the canonical values
    (``canonical.FINDING_FIELDS``). The one answer to "did a person act since we read it", before a write
    (:func:`reread`) and before a same-run resend of a ticket request (``ticket_send``)."""

    def value(name: str) -> Any:
        return getattr(now, name) if isinstance(now, Finding) else now[_COL[name]]

    return [
        f"{name} {getattr(before, name)!r} -> {value(name)!r}"
        for name in watched
        if getattr(before, name) != value(name)
    ]


def reread(
    client: FindingsClient,
    warehouse: Warehouse,
    *,
    kind: str,
    policy: str,
    issue_type: str,
    selector: FindingSelector,
    candidates: Sequence[SelectedFinding],
    target: dict[str, Any] | None = None,
    ours: Iterable[int] = (),
    redo: Iterable[int] = (),
    run_id: str | None = None,
    label: str = "",
    budget_for: int | None = None,
) -> Freshness:
    """Re-read ``candidates`` (the findings of one request) from the service, right before the request; keep those
    unchanged since the warehouse read them.

    The read is :func:`request_filters`: the policy's filters narrowed to the candidates' repositories, rules and
    branch; it stops once every candidate was met, after at most ``ceil(budget_for / 3000) + 1`` requests
    (``budget_for``: the policy's whole selection, whose listing holds the narrowed one; default the candidates). A
    candidate not met is dropped (``not listed`` or ``not confirmed``), never sent unread. ``label``: which request,
    for the log.

    ``target``: the column values the write would set (triage): a candidate already in that state (an earlier
    attempt of the same run, or a person, did it) is dropped as such rather than as a conflict. ``ours``:
    candidates a ticket request of ours may have ticketed unseen (its outcome unknown); one that has a ticket now
    is returned in ``ours``, not dropped as a person's change. ``redo``: candidates whose undone write of ours the
    policy may do again (a ticket policy's ``reticket_unlinked``): not dropped for that reason.
    """
    out = Freshness()
    if not candidates:
        return out
    wanted = {c.id: c for c in candidates}
    size = max(len(candidates), budget_for or 0)
    budget = None if issue_type == "secrets" else math.ceil(size / FINDINGS_PAGE_SIZE.maximum) + 1
    fresh: dict[int, tuple[Any, ...]] = {}
    filters = {} if issue_type == "secrets" else request_filters(issue_type, selector, candidates)
    # candidates that left the policy's filters (a person changed their status) are looked for without them, so
    # their new state reaches the warehouse
    answered: list[float] = []
    out.requests, complete = _pull_twice(client, warehouse, issue_type, selector, candidates, filters, fresh,
                                         budget, answered=answered)
    out.read_at = answered[-1] if answered else time.monotonic()
    undone = ledger.undone_writes(
        warehouse, kind, policy, issue_type,
        ((i, row[_COL["relevant_since"]], row[_COL["triage_state"]]) for i, row in fresh.items()),
    )
    suspects, again = set(ours), set(redo)
    for finding_id, before in sorted(wanted.items()):
        row = fresh.get(finding_id)
        if row is not None and finding_id in suspects and row[_COL["external_ticket_id"]] is not None:
            out.ours[finding_id] = row
        elif row is None:
            out.dropped[finding_id] = (
                "not listed: the service no longer lists it under the policy's filters (changed, fixed or "
                "removed since the last extraction)" if complete else
                f"not confirmed: not reached within {out.requests} pages of the re-read (the request budget)"
            )
        elif target and all(row[_COL[k]] == v for k, v in target.items()):
            out.dropped[finding_id] = "already done: the service has it in the state the policy sets"
        elif changed := changes(before, row):
            out.dropped[finding_id] = "changed in the service since the last extraction: " + ", ".join(changed)
        elif mismatch := matches(row, selector):
            out.dropped[finding_id] = "no longer matches the policy: " + ", ".join(mismatch)
        elif finding_id in undone and finding_id not in again:
            out.dropped[finding_id] = undone[finding_id]
        else:
            out.kept.append(finding_id)
    record_drops(warehouse, out.dropped, kind=kind, policy=policy, issue_type=issue_type, run_id=run_id)
    log.info("%s policy %s%s: re-read %d %s candidates in %d request(s): %d kept, %d dropped %s", kind, policy,
             f" {label}" if label else "", len(candidates), issue_type, out.requests, len(out.kept),
             len(out.dropped), out.summary()["drop_reasons"] or "")
    return out


@dataclass
class Settled:
    """The outcome of a re-read after a write: how many of the findings it named were read back, in how many
    requests; ``unseen``: those the service did not list within the budget (their copy is the write's patch)."""

    named: int = 0
    read_back: int = 0
    requests: int = 0
    unseen: list[int] = field(default_factory=list)


def settle(client: FindingsClient, warehouse: Warehouse, issue_type: str, selector: FindingSelector,
           written: Iterable[int], status: str | None = None, *, before_write: bool = False) -> Settled:
    """After a write: read again every finding it named (and the same-fingerprint findings the service reported
    triaged with them) and store the service's rows, so that in the same run the warehouse equals the service for
    each of them, what a person did a moment before the write included.

    First one pull with the policy's filters, its status the one the write leaves (``status``: a triage's; None:
    the selector's), from the oldest written finding's ``relevant_since``: what the write left as it left it. Then,
    for those not met, a pull without the filters a person changes (status) or that part twins (ref). In all at most
    ``ceil(named / 3000) + 1`` requests (secrets: their whole list). A finding not read back within that keeps the
    write's own patch, and is logged. ``before_write``: the same read of findings named by hand right before a write
    (a ticket link), whose ``unseen`` are then not written.
    """
    wanted = set(written)
    out = Settled(named=len(wanted))
    if not wanted:
        return out
    budget = None if issue_type == "secrets" else math.ceil(len(wanted) / FINDINGS_PAGE_SIZE.maximum) + 1
    fresh: dict[int, tuple[Any, ...]] = {}
    known = select_by_ids(warehouse, issue_type, sorted(wanted))  # twins the warehouse never held are not known
    as_left: dict[str, Any] = {}
    if issue_type != "secrets":
        as_left = api_filters(issue_type, selector, _since(known))
        if status is not None:
            as_left["status"] = status
    out.requests, _ = _pull_twice(client, warehouse, issue_type, selector, known, as_left, fresh, budget,
                                  wanted=wanted, twins=True)
    out.read_back = len(fresh)
    out.unseen = sorted(wanted - fresh.keys())
    log.info("%s: %d of %d %s findings it named read back from the service in %d request(s)%s",
             "before the write" if before_write else "after the write", out.read_back, out.named, issue_type,
             out.requests,
             f"; not listed within the budget: {out.unseen[:20]}" if out.unseen else "")
    return out


def settle_written(client: FindingsClient, warehouse: Warehouse, issue_type: str, selector: FindingSelector,
                   written: Sequence[int], counts: dict[str, Any], status: str | None = None) -> None:
    """Read back what a policy's requests wrote (:func:`settle`; ``status``: the one a triage leaves) and add the
    cost to ``counts`` (``settle_requests``, ``settled`` of ``settle_named``). A failed re-read is logged, never
    raised: the write itself is done and recorded, and the write's own patch stays in the warehouse until the next
    extraction."""
    if not written:
        return
    try:
        settled = settle(client, warehouse, issue_type, selector, written, status)
    except Exception as exc:
        log.warning("reading back the %d %s findings just written failed (%s: %s): the warehouse keeps what the "
                    "write set until the next extraction", len(set(written)), issue_type, type(exc).__name__, exc)
        counts["settle_failed"] = counts.get("settle_failed", 0) + 1
        return
    counts["settle_requests"] = counts.get("settle_requests", 0) + settled.requests
    counts["settled"] = counts.get("settled", 0) + settled.read_back
    counts["settle_named"] = counts.get("settle_named", 0) + settled.named



def window_summary(windows: Sequence[float]) -> dict[str, float | None]:
    """The race windows of a run's requests, in seconds from the re-read of a request's findings to the request
    itself (what a person does in the service in between, the request overrides): p50, p99 and the
    largest. None when nothing was sent."""
    ordered = sorted(windows)
    if not ordered:
        return {"window_p50_s": None, "window_p99_s": None, "window_max_s": None}

    def at(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)], 3)

    return {"window_p50_s": at(0.5), "window_p99_s": at(0.99), "window_max_s": round(ordered[-1], 3)}


def record_drops(
    warehouse: Warehouse, dropped: dict[int, str], *, kind: str, policy: str, issue_type: str, run_id: str | None
) -> None:
    """One ``dropped_findings`` row per dropped finding, with its reason."""
    rows = [
        {"run_id": run_id, "kind": kind, "policy": policy, "issue_type": issue_type, "finding_id": i,
         "reason": reason[:1000]}
        for i, reason in sorted(dropped.items())
    ]
    if rows:
        with warehouse.engine.begin() as conn:
            conn.execute(insert(dropped_findings), rows)
