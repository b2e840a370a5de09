"""Scan monitoring: search scans since the last successful search, store them, classify, and describe failures.

The watermark is the start time of the last search that stored everything; the next search starts ``overlap``
before it (never further back than ``lookback_days``; the API keeps about 30 days). Scans still running in the
warehouse from earlier runs are waited for again, so a run processes everything outstanding.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import select

from findings_provider.client import ScanStatus, UnknownScanStatusError
from findings_provider.client.timeutil import parse_timestamp
from findings_provider.warehouse import Warehouse, scan_rows
from findings_provider.warehouse.schema import scans

if TYPE_CHECKING:
    from findings_provider.client import FindingsClient

log = logging.getLogger(__name__)

WATERMARK_KEY = "scan_monitoring.watermark"
ALERTED_KEY = "scan_monitoring.alerted"
#: How many alerted scan ids are remembered (so the overlap of two searches does not alert twice).
ALERTED_MEMORY = 5000
WAITING = (ScanStatus.RUNNING.value, ScanStatus.PENDING.value)
SEARCH_PAGE_SIZE = 500


def _dump(scan: BaseModel) -> dict[str, Any]:
    return scan.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _classify(status: str | None) -> tuple[ScanStatus | None, str]:
    """(enum or None, bucket): bucket is running, completed, failed or unknown."""
    try:
        parsed = ScanStatus.parse(status or "")
    except UnknownScanStatusError:
        return None, "unknown"
    if not parsed.is_terminal:
        return parsed, "running"
    return parsed, "completed" if parsed.is_success else "failed"


def _stored_statuses(warehouse: Warehouse, ids: Sequence[str]) -> dict[str, str | None]:
    if not ids:
        return {}
    with warehouse.engine.connect() as conn:
        return dict(conn.execute(select(scans.c.id, scans.c.status).where(scans.c.id.in_(list(ids)))).all())


def _store(warehouse: Warehouse, page: list[Any], counts: Counter[str], buckets: dict[str, list[str]]) -> None:
    """Upsert one page of scans and classify it (newly completed: not completed in the warehouse before)."""
    before = _stored_statuses(warehouse, [str(s.id) for s in page])
    counts["written"] += warehouse.upsert_scans(scan_rows(_dump(s) for s in page))
    for scan in page:
        sid = str(scan.id)
        _, bucket = _classify(scan.status)
        counts[bucket] += 1
        buckets[bucket].append(sid)
        if bucket == "completed" and before.get(sid) != ScanStatus.COMPLETED.value:
            counts["newly_completed"] += 1
        if bucket == "unknown":
            log.warning("scan %s reports a status this pipeline does not know: %r", sid, scan.status)


def search_window(
    warehouse: Warehouse, *, lookback_days: int, overlap: timedelta, now: datetime
) -> tuple[datetime, str]:
    """Where the search starts: the last successful search minus ``overlap``, at most ``lookback_days`` back."""
    if lookback_days < 1:
        raise ValueError(f"lookback_days must be >= 1, got {lookback_days}")
    floor = now - timedelta(days=lookback_days)
    mark = parse_timestamp(warehouse.get_state(WATERMARK_KEY))
    if mark is None:
        return floor, f"no earlier successful search: looking back {lookback_days} days"
    since = mark - overlap
    if since < floor:
        return floor, f"last successful search {mark.isoformat()} is older than {lookback_days} days"
    return since, f"since the last successful search {mark.isoformat()} minus {overlap}"


def outstanding_running(warehouse: Warehouse, *, since: datetime) -> list[str]:
    """Scans the warehouse still has as running or pending (from earlier runs), started after ``since``."""
    stmt = (
        select(scans.c.id)
        .where(scans.c.status.in_(WAITING), (scans.c.started_at >= since) | scans.c.started_at.is_(None))
        .order_by(scans.c.id)
    )
    with warehouse.engine.connect() as conn:
        return list(conn.execute(stmt).scalars())


def search_and_store(
    client: FindingsClient,
    warehouse: Warehouse,
    *,
    lookback_days: int = 30,
    overlap: timedelta = timedelta(minutes=15),
    now: datetime | None = None,
) -> dict[str, Any]:
    """Search scans, store them page by page, advance the watermark; return counts and the ids to act on.

    ``running_ids``: scans to wait for (running or pending now, plus those still running in the warehouse);
    ``failed_ids``: scans that finished unsuccessfully or report an unknown status.
    """
    now = now or datetime.now(timezone.utc)
    since, reason = search_window(warehouse, lookback_days=lookback_days, overlap=overlap, now=now)
    log.info("searching scans since %s (%s)", since.isoformat(), reason)
    outstanding = outstanding_running(warehouse, since=now - timedelta(days=lookback_days))
    counts: Counter[str] = Counter()
    buckets: dict[str, list[str]] = {"running": [], "completed": [], "failed": [], "unknown": []}
    page: list[Any] = []
    for scan in client.items(client.search_scans, since=since, limit=SEARCH_PAGE_SIZE):
        page.append(scan)
        counts["found"] += 1
        if len(page) >= SEARCH_PAGE_SIZE:
            _store(warehouse, page, counts, buckets)
            page = []
    if page:
        _store(warehouse, page, counts, buckets)
    warehouse.set_state(WATERMARK_KEY, now.isoformat())
    found_now = set(buckets["running"]) | set(buckets["completed"]) | set(buckets["failed"]) | set(buckets["unknown"])
    carried = [s for s in outstanding if s not in found_now]
    running = sorted(set(buckets["running"]) | set(carried), key=_id_order)
    failed = sorted(set(buckets["failed"]) | set(buckets["unknown"]), key=_id_order)
    result = {
        "since": since.isoformat(),
        "found": counts["found"],
        "written": counts["written"],
        "running": len(running),
        "carried_over": len(carried),
        "completed": counts["completed"],
        "newly_completed": counts["newly_completed"],
        "failed": len(failed),
        "unknown_status": counts["unknown"],
        "running_ids": running,
        "failed_ids": failed,
    }
    log.info(
        "found %d scans (%d rows written): %d running (%d carried over from earlier runs), %d completed "
        "(%d newly), %d failed or unknown",
        result["found"], result["written"], len(running), len(carried), result["completed"],
        result["newly_completed"], len(failed),
    )
    return result


def _id_order(scan_id: str) -> tuple[int, str]:
    return (int(scan_id), "") if scan_id.isdigit() else (0, scan_id)


def refresh_scans(client: FindingsClient, warehouse: Warehouse, scan_ids: Iterable[str]) -> dict[str, Any]:
    """Re-read the given scans through scan search (the stored shape) and store their current status."""
    wanted = {str(s) for s in scan_ids}
    result: dict[str, Any] = {"refreshed": 0, "newly_completed": 0, "failed_ids": [], "still_running_ids": []}
    if not wanted:
        return result
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(scans.c.id, scans.c.status, scans.c.started_at).where(scans.c.id.in_(wanted))).all()
    before = {r.id: r.status for r in rows}
    starts = [r.started_at for r in rows if r.started_at is not None]
    since = (min(starts) if starts else datetime.now(timezone.utc) - timedelta(days=30)) - timedelta(minutes=1)
    listed = client.items(client.search_scans, since=since, limit=SEARCH_PAGE_SIZE)
    page = [scan for scan in listed if str(scan.id) in wanted]
    if page:
        warehouse.upsert_scans(scan_rows(_dump(s) for s in page))
    for scan in page:
        sid = str(scan.id)
        _, bucket = _classify(scan.status)
        result["refreshed"] += 1
        if bucket == "completed" and before.get(sid) != ScanStatus.COMPLETED.value:
            result["newly_completed"] += 1
        elif bucket in ("failed", "unknown"):
            result["failed_ids"].append(sid)
        elif bucket == "running":
            result["still_running_ids"].append(sid)
    result["failed_ids"].sort(key=_id_order)
    result["still_running_ids"].sort(key=_id_order)
    log.info("refreshed %d of %d waited-for scans: %d newly completed, %d failed, %d still running",
             result["refreshed"], len(wanted), result["newly_completed"], len(result["failed_ids"]),
             len(result["still_running_ids"]))
    return result


@dataclass
class ScanAlert:
    """What a person needs to follow up a scan that did not succeed."""

    scan_id: str
    status: str
    repository: str | None
    branch: str | None
    commit: str | None
    ci_job_url: str | None
    exit_code: int | None

    def line(self) -> str:
        return (
            f"scan {self.scan_id} {self.status}: repository {self.repository or 'unknown'}, "
            f"branch {self.branch or 'unknown'}, commit {self.commit or 'unknown'}, "
            f"exit code {self.exit_code if self.exit_code is not None else 'none'}, "
            f"CI job {self.ci_job_url or 'unknown'}"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def scan_alerts(client: FindingsClient, warehouse: Warehouse, scan_ids: Iterable[str]) -> list[ScanAlert]:
    """Alert details of each scan: its details (repository, branch, commit, CI job URL) and stored status."""
    ids = sorted({str(s) for s in scan_ids}, key=_id_order)
    with warehouse.engine.connect() as conn:
        stored = {r.id: r for r in conn.execute(select(scans).where(scans.c.id.in_(ids))).all()}
    alerts = []
    for scan_id in ids:
        row = stored.get(scan_id)
        details = client.get_scan(scan_id)
        meta = details.meta
        status = row.status if row is not None and row.status else details.derive_status().value
        alerts.append(
            ScanAlert(
                scan_id=scan_id,
                status=status,
                repository=meta.repository or meta.repo_url,
                branch=meta.branch or (row.branch if row is not None else None),
                commit=meta.commit or (row.commit if row is not None else None),
                ci_job_url=meta.ci_job_url,
                exit_code=details.exit_code if details.exit_code is not None else (row.exit_code if row else None),
            )
        )
    return alerts


def not_yet_alerted(warehouse: Warehouse, scan_ids: Iterable[str], run_id: str | None) -> list[str]:
    """The scans no other run has alerted about yet (a rerun of the same run alerts again)."""
    alerted: dict[str, Any] = warehouse.get_state(ALERTED_KEY, {}) or {}
    return [s for s in scan_ids if str(s) not in alerted or alerted[str(s)] == run_id]


def mark_alerted(warehouse: Warehouse, scan_ids: Iterable[str], run_id: str | None) -> None:
    """Remember that ``run_id`` alerted about these scans (the newest ``ALERTED_MEMORY`` are kept)."""
    alerted: dict[str, Any] = dict(warehouse.get_state(ALERTED_KEY, {}) or {})
    for scan_id in scan_ids:
        alerted.pop(str(scan_id), None)
        alerted[str(scan_id)] = run_id
    if len(alerted) > ALERTED_MEMORY:
        alerted = dict(list(alerted.items())[-ALERTED_MEMORY:])
    warehouse.set_state(ALERTED_KEY, alerted)
