"""Several compressed days of the programme against one emulator and one warehouse, with people acting in the service
before, between and during the runs, and faults on one day: every day ends exact.

Each day stands for a UTC day (its runs' logical date) and runs what the DAGs run: the extraction (its first run of
the day is the full pull), the triage of the shipped policy and the ticket policies (caps raised: no approval step
here). People act through the emulator's admin routes, as the service's UI does: before the day's extraction (new
triage states, tickets made and closed by hand, findings a scan reintroduces), between the extraction and the writes
(on findings the writes planned), and while a write is in flight (after our re-read, before our request). On one
day the service answers with rate limits and errors. After every day:

- the warehouse equals the service (status, triage state and reason, ticket) for every finding;
- nobody was overridden: what a person did before our re-read is what the service still shows;
- no finding has two tickets, and on the last (quiet) day every finding the ticket policies select has one;
- history holds each observed change once: per finding and field, the events chain (each one's old value is the
  previous one's new value) and none records a non-change.

Both wire dialects, SQLite and PostgreSQL (marker ``multiday``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import extraction, ticket_plan, ticket_send, tickets, triage
from findings_provider.warehouse import Warehouse
from findings_provider.warehouse.schema import finding_events, ticket_actions
from fixtures import (
    acting_in_the_window,
    client_of,
    make_warehouse,
    service_state,
    warehouse_state,
)
from sqlalchemy import select

from devtools.warehouse import drop_every_table

pytestmark = [pytest.mark.multiday, pytest.mark.integration]

CONFIG = load_pipeline_config()
TRIAGE_POLICY = CONFIG.autotriage_triage.policies[0]
#: The shipped ticket policies that are on, with caps no day reaches (the approval step is the DAG's, tested there).
TICKET_POLICIES = [p.model_copy(update={"max_tickets": 100_000}) for p in CONFIG.ticket_creation.policies if p.enabled]
TYPES = ("sast", "sca")
DAYS = 4
FAULT_DAY = 0  # the first day: the one with the most to write
#: The first run of each day: five past midnight, UTC.
FIRST_DAY = datetime(2026, 11, 23, 0, 5, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: 500 findings; each test names its dialect."""
    return {"findings": 500}


@pytest.fixture(params=["sqlite", "postgresql"])
def warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Warehouse]:
    if request.param == "sqlite":
        yield make_warehouse(tmp_path / "warehouse.db")
        return
    store = make_warehouse(request.getfixturevalue("postgres_schema_url"))
    try:
        yield store
    finally:
        drop_every_table(store.engine)
        store.engine.dispose()


class People:
    """What people did in the service, to check that no run of ours undid it."""

    def __init__(self, emulator: EmulatorProcess, seed: int) -> None:
        self.emulator = emulator
        self.rng = random.Random(seed)
        #: finding id -> (column index in the watched state, the value the person set)
        self.expected: dict[int, tuple[int, Any]] = {}
        #: code findings whose ticket a person closed (a scan may bring them back: new work, a new ticket)
        self.closed: Counter[int] = Counter()

    def act(self, finding_id: int, **action: Any) -> None:
        self.emulator.person_acts(finding_id, **action)
        if action.get("ticket") == "remove":
            self.closed[finding_id] += 1
        if action.get("triage_state") in ("reviewing", "ignored"):  # a decision no policy may undo
            self.expected[finding_id] = (1, action["triage_state"])
        elif "status" in action:
            self.expected[finding_id] = (0, action["status"])
        else:  # reopened, a ticket made or closed, a reintroduction: new work, the policies may act on it
            self.expected.pop(finding_id, None)

    def before_the_day(self, state: dict[int, tuple[Any, ...]]) -> None:
        """Acts on open findings: reviewing, ignored, reopened, a ticket made by hand, one closed, a reintroduction."""
        open_ids = sorted(i for i, s in state.items() if s[0] == "open" and s[3] is None)  # open, no ticket
        chosen = self.rng.sample(open_ids, 6)
        self.act(chosen[0], triage_state="reviewing")
        self.act(chosen[1], triage_state="ignored", triage_reason="acceptable_risk")
        self.act(chosen[2], triage_state="reopened")
        self.act(chosen[3], ticket="create")
        self.act(chosen[4], status="reviewing")
        ticketed = sorted(i for i, s in state.items() if s[3] is not None)
        if ticketed:
            self.act(self.rng.choice(ticketed), ticket="remove")
        self.act(chosen[5], reintroduce=True)

    def between(self, candidates: list[int]) -> None:
        """After the extraction, before the writes: acts on findings the writes planned."""
        for finding_id in self.rng.sample(candidates, min(3, len(candidates))):
            self.act(finding_id, triage_state="reviewing")

    def overridden(self, state: dict[int, tuple[Any, ...]]) -> dict[int, tuple[Any, Any]]:
        """The acts the service no longer shows: finding id -> (what the person set, what the service has)."""
        return {i: (value, state[i][column]) for i, (column, value) in self.expected.items()
                if i in state and state[i][column] != value}


def history_breaks(warehouse: Warehouse) -> list[Any]:
    """Events that do not chain on the previous event of their finding and field, or record no change."""
    breaks = []
    last: dict[tuple[str, int, str], Any] = {}
    with warehouse.engine.connect() as conn:
        for event in conn.execute(select(finding_events).order_by(finding_events.c.id)):
            key = (event.issue_type, event.finding_id, event.field)
            if event.old_value == event.new_value or (key in last and last[key] != event.old_value):
                breaks.append(event)
            last[key] = event.new_value
    return breaks


def still_failed(warehouse: Warehouse) -> set[int]:
    """Findings whose latest ticket outcome is failed or ambiguous (to be retried or reconciled by a later run)."""
    latest: dict[tuple[str, int], str] = {}
    with warehouse.engine.connect() as conn:
        for row in conn.execute(select(ticket_actions).order_by(ticket_actions.c.id)):
            latest[(row.issue_type, row.finding_id)] = row.outcome
    return {finding_id for (_, finding_id), outcome in latest.items() if outcome in ("failed", "ambiguous")}


def twice_ticketed(emulator: EmulatorProcess, people: People) -> list[tuple[str, int]]:
    """Findings with more than one ticket (ours, or one a person made and one of ours), plus one for each ticket a
    person closed."""
    created = Counter((t["issue_type"], int(i)) for t in emulator.tickets() for i in t["issue_ids"])
    return [key for key, n in created.items() if n > 1 + (people.closed[key[1]] if key[0] == "sast" else 0)]


def run_day(client: FindingsClient, warehouse: Warehouse, people: People, emulator: EmulatorProcess,
            monkeypatch: pytest.MonkeyPatch, day: int) -> dict[str, Any]:
    at = FIRST_DAY + timedelta(days=day)
    run_id = f"scheduled__{at:%Y-%m-%d}"
    out: dict[str, Any] = {}
    out["extraction"] = extraction.run_extraction(
        client, warehouse, list(TYPES), now=at, logical_date=at, run_id=run_id,
        full_refresh_max_age=timedelta(hours=24), page_size=500)
    plans = triage.plan_triage(warehouse, [TRIAGE_POLICY], chunk_size=60)
    ticket_plans = ticket_plan.plan_policies(warehouse, TICKET_POLICIES)
    planned = [f.id for p in plans for f in p.selected][:20]
    planned += [f.id for p in ticket_plans if p.policy.issue_type == "sast" for f in p.selected][:20]
    people.between(planned)
    with monkeypatch.context() as window:
        # while our requests are in flight a person acts on two findings of each kind of write
        acting_in_the_window(window, client, "bulk_triage", emulator, [{"status": "reviewing"}] * 2)
        if day != FAULT_DAY:  # on the fault day, a person acting would (rightly) spoil the proof a resend needs
            acting_in_the_window(window, client, "create_tickets", emulator,
                                 [{"triage_state": "ignored", "triage_reason": "acceptable_risk"}] * 2)
        actions = triage.record_plan(warehouse, plans, dry_run=False, dag_id="autotriage_triage", run_id=run_id)
        out["triage"] = triage.execute_plan(client, warehouse, actions, [TRIAGE_POLICY])
        out["tickets"] = tickets.run_tickets(client, warehouse, TICKET_POLICIES, tickets_per_call=10, run_id=run_id)
    return out


@pytest.mark.parametrize("emulator", [{"dialect": "reference"}, {"dialect": "real"}], indirect=True,
                         ids=["reference", "real"], scope="function")  # a new emulator for each test
def test_every_day_ends_exact(emulator: EmulatorProcess, warehouse: Warehouse,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ticket_send, "RESEND_DELAYS", (0.0, 0.0))
    people = People(emulator, seed=26)
    days: list[dict[str, Any]] = []
    with client_of(emulator, retry_policy=RetryPolicy(max_retries=4, backoff_base=0.01)) as client:
        for day in range(DAYS):
            before = service_state(client, "sast")
            people.before_the_day(before)
            if day == FAULT_DAY:
                emulator.add_fault(operation="findings", schedule=["429", "ok", "500", "ok"])
                emulator.add_fault(operation="triage", schedule=["503", "ok"])
                emulator.add_fault(operation="tickets", schedule=["500", "ok", "502", "ok"])
            days.append(run_day(client, warehouse, people, emulator, monkeypatch, day))
            if day == FAULT_DAY:
                faulted = [r for r in emulator.requests() if r["fault"]]
                assert {r["operation"] for r in faulted} >= {"findings", "triage", "tickets"}
                # the 500 was proven undone and sent again the same day; the gateway's 502 proves nothing: its
                # findings, and only they, wait for the next day's re-read
                unproven = {int(i) for r in faulted if r["fault"] == "502" for i in r["body"]["issue_ids"]}
                assert unproven
                assert still_failed(warehouse) == unproven
            emulator.clear_faults()

            service = {t: service_state(client, t) for t in TYPES}
            for issue_type in TYPES:
                stored = warehouse_state(warehouse, issue_type)
                differ = {i: (stored.get(i), s) for i, s in service[issue_type].items() if stored.get(i) != s}
                assert not differ, (day, issue_type, len(differ), list(differ.items())[:5])
            assert people.overridden(service["sast"]) == {}, day
            assert twice_ticketed(emulator, people) == [], day
            assert history_breaks(warehouse) == [], day
        assert sum(d["triage"]["requests"] for d in days) >= 1  # the days wrote: triage and tickets
        assert sum(d["tickets"]["settled"] for d in days) >= 1
        # one more run with no one acting and no fault: every finding the ticket policies select gets its one ticket
        tickets.run_tickets(client, warehouse, TICKET_POLICIES, tickets_per_call=10, run_id="quiet")
        left = ticket_plan.plan_policies(warehouse, TICKET_POLICIES)
        assert [p.selected for p in left] == [[]] * len(TICKET_POLICIES)
        assert twice_ticketed(emulator, people) == []
