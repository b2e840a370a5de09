"""The client against the real emulator under injected faults, at fixed schedules and at a seeded random rate.

Reads either come back complete and exact (compared with a fault-free fetch) or fail with a typed error after
a bounded number of attempts; ``Retry-After`` is honoured (measured on the emulator's request log); ticket
creation is never sent twice, whatever happens to its response.
"""

from __future__ import annotations

import itertools
import json
import random
from datetime import datetime
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import (
    AmbiguousWriteError,
    FindingsApiError,
    FindingsClient,
    RateLimitedError,
    ResponseDecodeError,
    RetryPolicy,
    ServerError,
    TransportError,
)
from fixtures import client_of

from chaos.harness import (
    FAULT_KINDS,
    PAGE_SIZE,
    TOKEN,
    api_requests,
    fetch_findings,
    settle,
    tally,
    ticket_counts,
    wait_until,
)

pytestmark = pytest.mark.chaos

TIMEOUT = 1.0
LATENCY = 1.6  # beyond the client's timeout


def make_client(emu: EmulatorProcess, max_retries: int = 4, total_timeout: float | None = None,
                **policy: Any) -> FindingsClient:
    policy.setdefault("backoff_base", 0.02)
    policy.setdefault("backoff_max", 0.2)
    policy.setdefault("max_total_seconds", 60.0)
    return client_of(emu, timeout=TIMEOUT, total_timeout=total_timeout,
                     retry_policy=RetryPolicy(max_retries=max_retries, rng=random.Random(7), **policy))


def pull(client: FindingsClient, issue_type: str) -> dict[int, dict[str, Any]]:
    """Every finding through the extraction fast path (raw pages), each id once."""
    found: dict[int, dict[str, Any]] = {}
    for page in client.raw_pages(client.list_findings, issue_type, page_size=PAGE_SIZE):
        for item in page.items:
            finding = json.loads(bytes(item))
            assert finding["id"] not in found, f"{finding['id']} pulled twice"
            found[finding["id"]] = finding
    return found


def fault(kind: str, **extra: Any) -> dict[str, Any]:
    """Rule fields for one kind: quick 429s, latency beyond the client's timeout."""
    return {"retry_after": 0.1, "latency": LATENCY, **extra}


# --- reads: every fault kind at a fixed schedule -------------------------------------------------------------------


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_pull_through_a_fault_schedule_is_complete_and_exact(fresh: EmulatorProcess, kind: str) -> None:
    """Code findings span three pages of 100: the faults hit first pages, retries and later pages alike."""
    issue_type = "sast"
    truth = fetch_findings(fresh, issue_type)
    fresh.clear_requests()
    schedule = [kind, kind, "ok", kind, "ok", "ok", kind]
    fresh.add_fault(operation="findings", schedule=schedule, **fault(kind))
    tally("client.fault_schedules")
    with make_client(fresh) as client:
        assert pull(client, issue_type) == truth
    settle(fresh)
    log = api_requests(fresh, "findings")
    pages_needed = len(truth) // PAGE_SIZE + 1
    assert [e["fault"] for e in log if e["fault"]] == [kind] * _faults_before(schedule, pages_needed)
    pages = [int(e["query"]["page"][0]) for e in sorted(log, key=lambda e: e["time"])]  # in order of arrival
    assert pages == sorted(pages), "pages out of order: a page was skipped or repeated after a fault"
    assert set(pages) == set(range(len(truth) // PAGE_SIZE + 1))


def _faults_before(schedule: list[str], successes: int) -> int:
    """How many faults of ``schedule`` a run of ``successes`` successful requests consumes."""
    faults = 0
    for kind in schedule:
        if successes == 0:
            break
        if kind == "ok":
            successes -= 1
        else:
            faults += 1
    return faults


ERRORS = {"429": RateLimitedError, "500": ServerError, "502": ServerError, "503": ServerError,
          "drop": TransportError, "drop_after": TransportError, "latency": TransportError,
          "truncate": ResponseDecodeError}


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_burst_longer_than_the_retries_is_a_typed_error_after_bounded_attempts(fresh: EmulatorProcess,
                                                                                  kind: str) -> None:
    tally("client.fault_schedules")
    fresh.add_fault(operation="findings", schedule=[kind] * 10, **fault(kind))
    with make_client(fresh, max_retries=3) as client, pytest.raises(FindingsApiError) as caught:
        pull(client, "sast")
    assert type(caught.value) is ERRORS[kind], caught.value
    assert caught.value.endpoint == "findings"
    settle(fresh)
    assert len(api_requests(fresh, "findings")) == 4  # one attempt and three retries, not one more
    assert TOKEN not in str(caught.value)


# --- Retry-After --------------------------------------------------------------------------------------------------


def _gaps(entries: list[dict[str, Any]]) -> list[float]:
    times = [datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp() for e in entries]
    return [b - a for a, b in itertools.pairwise(times)]


def test_retry_after_is_honoured(fresh: EmulatorProcess) -> None:
    """Two 429s saying ``Retry-After: 1.2``: the client waits that long each time, not its own (tiny) backoff."""
    tally("client.fault_schedules")
    fresh.add_fault(operation="deployments", schedule=["429", "429"], retry_after=1.2)
    with make_client(fresh, backoff_base=0.01, backoff_max=0.02) as client:
        assert client.list_deployments()
    log = api_requests(fresh, "deployments")
    assert [e["status"] for e in log] == [429, 429, 200]
    assert all(gap >= 1.15 for gap in _gaps(log)), _gaps(log)


def test_without_retry_after_the_client_backs_off_on_its_own(fresh: EmulatorProcess) -> None:
    tally("client.fault_schedules")
    fresh.add_fault(operation="deployments", schedule=["429", "429"], retry_after=None)
    with make_client(fresh, backoff_base=0.2, backoff_max=0.4) as client:
        assert client.list_deployments()
    gaps = _gaps(api_requests(fresh, "deployments"))
    assert len(gaps) == 2
    assert all(0.09 <= gap < 2.0 for gap in gaps), gaps  # its own backoff: 0.1-0.2 s, then 0.2-0.4 s


def test_a_retry_after_beyond_the_time_budget_gives_up_at_once(fresh: EmulatorProcess) -> None:
    tally("client.fault_schedules")
    fresh.add_fault(operation="deployments", schedule=["429"], retry_after=600)
    with make_client(fresh, max_total_seconds=30) as client, pytest.raises(RateLimitedError) as caught:
        client.list_deployments()
    assert caught.value.retry_after == 600
    assert len(api_requests(fresh, "deployments")) == 1


# --- reads at a seeded random fault rate ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pulls_at_a_seeded_random_fault_rate_end_complete_and_exact(fresh: EmulatorProcess, seed: int) -> None:
    """Every operation misbehaves with probability 0.5 (every kind). A pull either completes exactly, or fails
    with a typed error and the next attempt (the rule keeps firing) completes it."""
    tally("client.random_rate_runs")
    truth = {t: fetch_findings(fresh, t) for t in ("sast", "sca")}
    fresh.add_fault(operation="*", probability=0.5, kinds=list(FAULT_KINDS), seed=seed, retry_after=0.1,
                    latency=1.2)
    failures: list[str] = []
    for issue_type in ("sast", "sca"):
        for _attempt in range(4):
            try:
                with make_client(fresh, max_retries=3) as client:
                    assert pull(client, issue_type) == truth[issue_type]
                break
            except FindingsApiError as exc:  # loud and typed; rerun
                failures.append(type(exc).__name__)
        else:
            pytest.fail(f"{issue_type}: four pulls in a row failed: {failures}")
    settle(fresh)
    injected = [e["fault"] for e in api_requests(fresh) if e["fault"]]
    assert len(injected) >= 2, "the random rule injected (almost) nothing"
    tally("client.random_rate_faults_injected", len(injected))


# --- ticket creation: never sent twice ------------------------------------------------------------------------------


def _ticketable(emu: EmulatorProcess, n: int = 3) -> list[int]:
    """Open code findings without a ticket, from different (repository, rule) groups."""
    findings = fetch_findings(emu, "sast", status="open")
    chosen: dict[tuple[str, str], int] = {}
    for finding in findings.values():
        if finding.get("external_ticket") is None:
            chosen.setdefault((finding["repository"]["name"], finding["rule_name"]), finding["id"])
    return sorted(chosen.values())[:n]


@pytest.mark.parametrize(("kind", "server_acts"), [("drop_after", True), ("truncate", True), ("latency", True),
                                                   ("500", False), ("502", False), ("503", False), ("drop", False)])
def test_a_ticket_request_with_a_lost_or_failed_response_is_never_resent(fresh: EmulatorProcess, kind: str,
                                                                          server_acts: bool) -> None:
    tally("client.ticket_fault_cases")
    ids = _ticketable(fresh)
    fresh.add_fault(operation="tickets", schedule=[kind], latency=LATENCY)
    with make_client(fresh) as client, pytest.raises(AmbiguousWriteError) as caught:
        client.create_tickets(issue_type="sast", issue_ids=[str(i) for i in ids])
    assert "external_ticket" in str(caught.value)  # says what to do: re-read before trying again
    if server_acts:
        wait_until(lambda: len(fresh.tickets()) == len(ids), timeout=10, what="the server to create the tickets")
    wait_until(lambda: api_requests(fresh, "tickets"), timeout=10, what="the ticket request to be logged")
    assert len(api_requests(fresh, "tickets")) == 1  # the client raised instead of sending it again
    counts = ticket_counts(fresh)
    assert all(counts[i] == (1 if server_acts else 0) for i in ids), counts


#: Fault kinds that carry the ticket request out, then answer wrongly; ``act_drip`` sends its body in pieces 0.15 s
#: apart (within the 1 s read timeout) over 3 s, beyond the 1.5 s total deadline given to the client.
ACTED_THEN_MISANSWERED = ("act_500", "act_html", "act_wrong_shape", "act_redirect", "act_slow", "act_drip")
DRIP_LATENCY = 3.0
TOTAL_TIMEOUT = 1.5


@pytest.mark.parametrize("kind", ACTED_THEN_MISANSWERED)
def test_a_ticket_request_carried_out_then_misanswered_is_ambiguous(fresh: EmulatorProcess, kind: str) -> None:
    """Over real HTTP: the server created the tickets, then answered with a 500, an HTML page, JSON of another
    shape, a redirect, too late, or too slowly: the client says "may have acted" and never sends it again."""
    tally("client.ticket_fault_cases")
    ids = _ticketable(fresh)
    fresh.add_fault(operation="tickets", schedule=[kind], latency=DRIP_LATENCY if kind == "act_drip" else LATENCY)
    with make_client(fresh, total_timeout=TOTAL_TIMEOUT) as client, pytest.raises(AmbiguousWriteError) as caught:
        client.create_tickets(issue_type="sast", issue_ids=[str(i) for i in ids])
    assert "external_ticket" in str(caught.value)
    assert sorted(i for t in fresh.tickets() for i in t["issue_ids"]) == ids  # the tickets do exist
    settle(fresh)
    assert [e["fault"] for e in api_requests(fresh, "tickets")] == [kind]  # sent once
    assert all(n == 1 for n in ticket_counts(fresh).values())
    assert TOKEN not in str(caught.value)


def test_a_rate_limited_ticket_request_is_retried_and_tickets_once(fresh: EmulatorProcess) -> None:
    """429 means the server did not act: safe to resend, and exactly one ticket per finding results."""
    tally("client.ticket_fault_cases")
    ids = _ticketable(fresh)
    fresh.add_fault(operation="tickets", schedule=["429", "429"], retry_after=0.1)
    with make_client(fresh) as client:
        result = client.create_tickets(issue_type="sast", issue_ids=[str(i) for i in ids])
    assert sorted(i for s in result.succeeded for i in s.issue_ids) == ids
    assert [e["status"] for e in api_requests(fresh, "tickets")] == [429, 429, 200]
    assert all(n == 1 for n in ticket_counts(fresh).values())


@pytest.mark.parametrize("kind", ["503", "drop_after", "truncate", "latency"])
def test_bulk_triage_is_retried_through_faults_and_lands_once(fresh: EmulatorProcess, kind: str) -> None:
    """Triage is idempotent (setting a state twice is harmless): retried through every fault, same result."""
    tally("client.fault_schedules")
    ids = sorted(fetch_findings(fresh, "sast", status="open"))[:5]
    fresh.add_fault(operation="triage", schedule=[kind], latency=LATENCY)
    with make_client(fresh) as client:
        result = client.bulk_triage(issue_type="sast", issue_ids=ids, new_triage_state="reviewing")
    assert set(ids) <= set(result.triaged_issues)
    after = fetch_findings(fresh, "sast")
    assert all(after[i]["status"] == "reviewing" for i in result.triaged_issues)
    settle(fresh)
    assert len(api_requests(fresh, "triage")) == 2
