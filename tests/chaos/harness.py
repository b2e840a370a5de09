"""Shared machinery of the chaos, crash and token-safety suites.

- ground truth: a fault-free fetch of every finding straight from the emulator (plain httpx, not the client
  under test), and an independent reading of the warehouse file (``sqlite3``, not the warehouse code);
- ``assert_complete_and_exact``: every emulator finding is in the warehouse exactly once, with its columns and
  its raw JSON equal to what the emulator serves;
- connections for ``dag.test()`` runs (``AIRFLOW_CONN_*`` JSON) with fast client retry settings;
- a tally of what the suites tried (fault schedules, runs, crash points), written next to the session's
  AIRFLOW_HOME and printed at the end of the run, from which ``docs/reliability.md`` takes its counts.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from findings_emulator.faults import ACT_KINDS
from findings_emulator.testing import EmulatorProcess
from fixtures import sqlite_url

#: A distinctive token: nothing else in the project, the data or the logs contains it by chance.
TOKEN = "fp-chaos-T0KEN-7c1e9b2a5d"
PAGE_SIZE = 100  # the API's minimum: a few hundred findings span several pages
ISSUE_TYPES = ("sast", "sca")
FAULT_KINDS = ("429", "500", "502", "503", "drop", "drop_after", "truncate", "latency")

# --- the tally (counts for docs/reliability.md) ----------------------------------------------------------------

_TALLY: Counter = Counter()
_LOCK = threading.Lock()


def tally(key: str, n: int = 1) -> None:
    """Count something the suites tried (``fault_schedule``, ``dag_run.findings_extraction``, ...)."""
    with _LOCK:
        _TALLY[key] += n


def tally_snapshot() -> dict[str, int]:
    with _LOCK:
        return dict(sorted(_TALLY.items()))


def tally_path() -> Path:
    return Path(os.environ.get("AIRFLOW_HOME", "/tmp")) / "reliability-tally.json"


def write_tally() -> Path | None:
    """Write the tally (merged with what another suite of this session wrote) and return its path."""
    snapshot = tally_snapshot()
    if not snapshot:
        return None
    path = tally_path()
    path.write_text(json.dumps(snapshot, indent=2, sort_keys=True))
    return path


# --- emulator ground truth ---------------------------------------------------------------------------------------


def emulator_settings(
    findings: int = 300, *, seed: int = 7, token: str = TOKEN, extra_args: Iterable[str] = ()
) -> dict[str, Any]:
    """The options of an emulator with few findings (several pages of 100), the distinctive :data:`TOKEN` and few
    running scans that finish fast: the chaos suites' ``emulator_options`` (the shared ``emulator`` fixture of
    ``tests/fixtures.py`` starts it; the faults are injected per test through its admin routes, so the emulator
    itself is the ordinary one)."""
    return {"findings": findings, "seed": seed, "token": token, "extra_args": ("--scan-duration", "1", *extra_args)}


def start_emulator(
    findings: int = 300, *, seed: int = 7, token: str = TOKEN, extra_args: Iterable[str] = ()
) -> EmulatorProcess:
    """The emulator of :func:`emulator_settings`, for a fixture that starts one beside a DAG stack."""
    return EmulatorProcess(**emulator_settings(findings, seed=seed, token=token, extra_args=extra_args))


def fetch_findings(emu: EmulatorProcess, issue_type: str, **params: Any) -> dict[int, dict[str, Any]]:
    """Every finding of ``issue_type`` as the emulator serves it, fault-free (faults must be cleared)."""
    found: dict[int, dict[str, Any]] = {}
    page = 0
    key = "scaFindings" if issue_type == "sca" else "sastFindings"
    with emu.client(timeout=60.0) as api:
        while True:
            response = api.get(f"/api/v1/deployments/{emu.deployment_slug}/findings",
                               params={"issue_type": issue_type, "page": page, "page_size": 3000, **params})
            assert response.status_code == 200, response.text
            items = response.json()[key]["findings"]
            for item in items:
                assert item["id"] not in found, f"emulator served {item['id']} twice"
                found[item["id"]] = item
            if len(items) < 3000:
                return found
            page += 1


def ticket_selection(emu: EmulatorProcess) -> dict[int, str]:
    """Findings the default ticket policies select (open, no ticket, need work) -> issue type."""
    chosen: dict[int, str] = {}
    for issue_type in ("sast", "sca"):
        for i, f in fetch_findings(emu, issue_type).items():
            verdict = ((f.get("assistant") or {}).get("autotriage") or {}).get("verdict")
            needs_work = (verdict == "true_positive" if issue_type == "sast"
                          else f.get("reachability") in ("reachable", "always_reachable"))
            if f["status"] == "open" and f.get("external_ticket") is None and needs_work \
                    and f["severity"] in ("high", "critical"):
                chosen[i] = issue_type
    return chosen


def ground_truth(
    emu: EmulatorProcess, issue_types: Iterable[str] = ISSUE_TYPES
) -> dict[tuple[str, int], dict[str, Any]]:
    """(issue_type, id) -> finding, for every finding of ``issue_types``, fetched with faults cleared."""
    emu.clear_faults()
    truth: dict[tuple[str, int], dict[str, Any]] = {}
    for issue_type in issue_types:
        truth.update({(issue_type, i): f for i, f in fetch_findings(emu, issue_type).items()})
    return truth


def _ticket_id(finding: dict[str, Any]) -> int | None:
    ticket = finding.get("external_ticket")
    if not isinstance(ticket, dict) and isinstance(finding.get("usage"), dict):
        ticket = finding["usage"].get("external_ticket")
    return ticket.get("id") if isinstance(ticket, dict) else None


def _verdict(finding: dict[str, Any]) -> str | None:
    assistant = finding.get("assistant")
    autotriage = assistant.get("autotriage") if isinstance(assistant, dict) else None
    return autotriage.get("verdict") if isinstance(autotriage, dict) else None


def _instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def expected_columns(finding: dict[str, Any]) -> dict[str, Any]:
    """The warehouse columns of a finding, derived here independently of the product's row builder."""
    return {
        "repository_name": finding["repository"]["name"],
        "ref": finding.get("ref"),
        "rule_name": finding.get("rule_name"),
        "severity": finding.get("severity"),
        "confidence": finding.get("confidence"),
        "status": finding.get("status"),
        "triage_state": finding.get("triage_state"),
        "triage_reason": finding.get("triage_reason"),
        "autotriage_verdict": _verdict(finding),
        "reachability": finding.get("reachability"),
        "match_based_id": finding.get("match_based_id"),
        "external_ticket_id": _ticket_id(finding),
        "first_seen_scan_id": finding.get("first_seen_scan_id"),
        "relevant_since": _instant(finding.get("relevant_since")),
    }


# --- the warehouse, read independently ---------------------------------------------------------------------------


@contextmanager
def _db(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


def table_exists(path: Path, table: str) -> bool:
    if not Path(path).exists():
        return False
    with _db(path) as conn:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
    return found is not None


def warehouse_findings(path: Path) -> list[dict[str, Any]]:
    """Every row of the warehouse ``findings`` table (empty when there is no table yet)."""
    if not table_exists(path, "findings"):
        return []
    with _db(path) as conn:
        return [dict(row) for row in conn.execute("SELECT * FROM findings")]


def warehouse_rows(path: Path, table: str) -> list[dict[str, Any]]:
    if not table_exists(path, table):
        return []
    with _db(path) as conn:
        return [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")]


def warehouse_state(path: Path, key: str) -> Any:
    if not table_exists(path, "pipeline_state"):
        return None
    with _db(path) as conn:
        row = conn.execute("SELECT value FROM pipeline_state WHERE key = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def assert_complete_and_exact(
    truth: dict[tuple[str, int], dict[str, Any]],
    warehouse_path: Path,
    *,
    issue_types: Iterable[str] = ISSUE_TYPES,
    raw_exact: bool = True,
) -> int:
    """Every finding of ``truth`` is in the warehouse once, nothing else is, and columns (+ raw JSON) are equal.

    Returns the number of findings compared.
    """
    types = set(issue_types)
    rows = [r for r in warehouse_findings(warehouse_path) if r["issue_type"] in types]
    keys = [(r["issue_type"], r["id"]) for r in rows]
    duplicates = [k for k, n in Counter(keys).items() if n > 1]
    assert not duplicates, f"findings stored twice: {duplicates[:10]}"
    wanted = {k for k in truth if k[0] in types}
    missing = sorted(wanted - set(keys))
    extra = sorted(set(keys) - wanted)
    assert not missing, f"{len(missing)} of {len(wanted)} findings missing from the warehouse, e.g. {missing[:10]}"
    assert not extra, f"{len(extra)} warehouse findings the emulator does not have, e.g. {extra[:10]}"
    differences: list[tuple[str, int, object]] = []
    for row in rows:
        finding = truth[(row["issue_type"], row["id"])]
        stored = {k: row[k] for k in expected_columns(finding)}
        stored["relevant_since"] = _instant(stored["relevant_since"])
        expected = expected_columns(finding)
        if stored != expected:
            diff = {k: (stored[k], expected[k]) for k in expected if stored[k] != expected[k]}
            differences.append((row["issue_type"], row["id"], diff))
        elif raw_exact and json.loads(row["raw"]) != finding:
            differences.append((row["issue_type"], row["id"], "raw JSON differs"))
    assert not differences, f"{len(differences)} findings differ from the emulator, e.g. {differences[:3]}"
    return len(rows)


# --- emulator request log and tickets ----------------------------------------------------------------------------


def api_requests(emu: EmulatorProcess, operation: str | None = None, since: int | None = None) -> list[dict[str, Any]]:
    """Logged API requests (optionally of one operation) after sequence number ``since``."""
    return [r for r in emu.requests(since) if operation is None or r["operation"] == operation]


def last_seq(emu: EmulatorProcess) -> int:
    entries = emu.requests()
    return entries[-1]["seq"] if entries else 0


def injected(emu: EmulatorProcess) -> int:
    """How many faults the emulator's rules injected so far (visible as soon as a request arrives)."""
    return sum(rule["injected"] for rule in emu._admin_call("GET", "faults")["faults"])


def settle(emu: EmulatorProcess, timeout: float = 15.0) -> None:
    """Wait until every request that met a fault has been logged (a ``latency`` request is logged only when the
    emulator finished serving it, after the client gave up), so that it cannot land in a later test's log."""

    def logged_all() -> bool:
        logged = sum(1 for entry in emu.requests() if entry["fault"])
        return logged >= injected(emu)

    wait_until(logged_all, timeout=timeout, what="requests delayed by the emulator to finish")


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def ticket_counts(emu: EmulatorProcess) -> Counter:
    """finding id -> number of tickets the emulator created for it through the API."""
    counts: Counter = Counter()
    for ticket in emu.tickets():
        counts.update(ticket["issue_ids"])
    return counts


def ticket_sends(emu: EmulatorProcess) -> Counter:
    """finding id -> number of ticket requests that reached the application with it.

    Counted: requests the server acted on (no fault, latency, a cut response), not those answered by an injected
    status or dropped before the application saw them.
    """
    counts: Counter = Counter()
    for entry in api_requests(emu, "tickets"):
        if entry["fault"] not in (None, "latency", *ACT_KINDS):
            continue
        counts.update(int(i) for i in (entry["body"] or {}).get("issue_ids") or [])
    return counts


def assert_no_double_tickets(emu: EmulatorProcess) -> None:
    """No finding has two tickets, and no ticketed finding was ever sent in a second ticket request.

    The emulator, like the real service when findings are selected by filters, skips findings that already
    have a ticket; for findings selected by id the real service may not. So a pipeline that resends a finding
    after the server ticketed it would double-ticket on the real service even where the emulator saves it.
    """
    counts = ticket_counts(emu)
    doubled = {i: n for i, n in counts.items() if n > 1}
    assert not doubled, f"findings with two tickets: {doubled}"
    sends = ticket_sends(emu)
    resent = {i: sends[i] for i in counts if sends[i] > 1}
    assert not resent, f"ticketed findings sent again in another ticket request: {resent}"


# --- Airflow connections for dag.test() / operators ---------------------------------------------------------------


def api_connection(emu: EmulatorProcess, *, token: str = TOKEN, timeout: float = 1.0, max_retries: int = 4,
                   **extra: Any) -> str:
    """The emulator's connection with the chaos suites' token and fast client retries."""
    return emu.connection_json(token=token, timeout=timeout, max_retries=max_retries, **extra)


def warehouse_uri(path: Path) -> str:
    """The URL of the SQLite warehouse file ``path``."""
    return sqlite_url(path)
