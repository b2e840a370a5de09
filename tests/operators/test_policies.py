"""Policy tuning operators against the emulator, through connections: rules listed, proposals from known findings,
dry run, approval.

The approval is the one of every write (``PlanApprovalOperator``, kind ``policies``): its completion handler is
driven with the event the Human-in-the-loop trigger sends, and "marked successful by hand" is a run without it.
"""

from __future__ import annotations

import csv
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG
from findings_provider.client import FindingsClient
from findings_provider.compat import AirflowFailException, AirflowSkipException
from findings_provider.governance import policy_tuning as pt
from findings_provider.operators.approval import PlanApprovalOperator
from findings_provider.operators.policies import (
    ApplyPolicyChangesOperator,
    ListPolicyRulesOperator,
    ProposePolicyChangesOperator,
)
from findings_provider.pipeline import approval
from findings_provider.warehouse import policy_rule_rows
from findings_provider.warehouse.schema import policy_changes, policy_rules
from fixtures import writes
from governance.helpers import FindingWriter
from hitl import answer
from present import present
from sqlalchemy import select
from task_context import FakeTaskInstance, make_context, run_operator

from .helpers import TUNING_RULES

pytestmark = pytest.mark.integration

BLOCKING = {"MODE_BLOCK", "MODE_COMMENT"}
APPROVAL_TASK = "approve_policy_changes"


def listed_modes(client) -> dict[str, dict[str, str]]:
    """rule path -> {policy id: mode}, as the emulator lists them now."""
    modes: dict[str, dict[str, str]] = {}
    for policy in client.list_policies():
        for rule in client.items(client.list_policy_rules, policy.id):
            modes.setdefault(rule.path, {})[policy.id] = rule.policyMode
    return modes


@pytest.fixture
def known_data(client, warehouse):
    """Controlled verdicts for five of the emulator's rules; returns (modes before, expected proposals).

    - noisy: 21 of 25 autotriaged false positives (84% > 80%, 25 >= 20): monitor wherever it blocks/comments;
    - precise: 19 of 20 true positives (95% > 90%): comment where it is monitored;
    - too few: 19 of 19 false positives, below min_findings (20);
    - fp at threshold: 16 of 20 false positives, exactly 80% (not above);
    - tp at threshold: 18 of 20 true positives, exactly 90% (not above).
    """
    modes = listed_modes(client)
    taken: set[str] = set()

    def pick(predicate) -> str:
        path = next(p for p in sorted(modes) if p not in taken and predicate(modes[p]))
        taken.add(path)
        return path

    noisy = pick(lambda m: set(m.values()) <= BLOCKING)
    precise = pick(lambda m: m.get("2101") == "MODE_MONITOR")
    too_few = pick(lambda m: set(m.values()) <= BLOCKING)
    fp_at_threshold = pick(lambda m: set(m.values()) <= BLOCKING)
    tp_at_threshold = pick(lambda m: "MODE_MONITOR" in m.values())
    writer = FindingWriter(warehouse)
    writer.add(noisy, false_positive=21, true_positive=4)
    writer.add(precise, true_positive=19, false_positive=1)
    writer.add(too_few, false_positive=19)
    writer.add(fp_at_threshold, false_positive=16, true_positive=4)
    writer.add(tp_at_threshold, true_positive=18, false_positive=2)
    expected = {(policy, noisy): "MODE_MONITOR" for policy in modes[noisy]}
    expected |= {(p, precise): "MODE_COMMENT" for p, mode in modes[precise].items() if mode == "MODE_MONITOR"}
    return modes, expected


def list_and_propose(ti: FakeTaskInstance, *, dry_run: bool, report_dir: Path) -> dict:
    run_operator(ListPolicyRulesOperator(task_id="list_policy_rules", limit=7), ti)
    return run_operator(
        ProposePolicyChangesOperator(
            task_id="propose_policy_changes",
            thresholds=TUNING_RULES,
            policy_ids=ti.xcom_pull("list_policy_rules", key="policy_ids"),
            dry_run=dry_run,
            report_dir=str(report_dir),
        ),
        ti,
    )


def answered(ti: FakeTaskInstance, choice: str) -> None:
    """A person answers the run's approval request ``choice`` (the approval task's completion handler runs)."""
    with DAG("policy_approval_test", start_date=datetime(2024, 1, 1, tzinfo=timezone.utc), schedule=None):
        approve = PlanApprovalOperator(task_id=APPROVAL_TASK, kind=approval.POLICIES, subject="s", body="b")
    answer(approve, make_context(ti), choice)


def apply_operator() -> ApplyPolicyChangesOperator:
    return ApplyPolicyChangesOperator(task_id="apply_policy_changes")


def change_rows(warehouse) -> set[tuple]:
    c = policy_changes.c
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(c.policy_id, c.rule_path, c.previous_mode, c.new_mode, c.status)).all()
    return {tuple(r) for r in rows}


def test_rules_of_every_listed_policy_reach_the_warehouse_through_the_cursor(fresh, client, warehouse):
    stale = {"id": "999", "path": "removed.rule", "policyMode": "MODE_BLOCK"}
    warehouse.upsert_policy_rules(policy_rule_rows("2101", [stale]))
    ti = FakeTaskInstance()

    result = run_operator(ListPolicyRulesOperator(task_id="list_policy_rules", limit=7), ti)
    pages = [r for r in fresh.requests() if r["operation"] == "policy_rules" and r["path"].endswith("/2101")]

    listed = {(p.id, r.id) for p in client.list_policies() for r in client.items(client.list_policy_rules, p.id)}
    with warehouse.engine.connect() as conn:
        stored = {tuple(r) for r in conn.execute(select(policy_rules.c.policy_id, policy_rules.c.id))}
    assert stored == listed  # every rule, and the rule no longer listed is gone
    assert result["rules"] == len(listed)
    assert ti.xcom_pull("list_policy_rules", key="policy_ids") == ["2101", "2102"]
    assert len(pages) == -(-sum(1 for p, _ in listed if p == "2101") // 7)  # ceil(rules / limit) pages
    assert pages[0]["query"].get("cursor") in (None, "", [""])
    assert all(r["query"].get("cursor") for r in pages[1:])


def test_named_policies_are_the_only_ones_listed(fresh, warehouse):
    ti = FakeTaskInstance()

    result = run_operator(ListPolicyRulesOperator(task_id="list_policy_rules", policy_ids="['2102']"), ti)

    assert result["policy_ids"] == ["2102"]
    assert {r["operation"] for r in fresh.requests()} == {"policy_rules"}  # no policy listing needed
    with warehouse.engine.connect() as conn:
        assert set(conn.execute(select(policy_rules.c.policy_id)).scalars()) == {"2102"}


SENT_ALERTS: list[dict[str, Any]] = []
POLICY_OPERATIONS = {"policies_list", "policy_rules", "policy_update"}


class RecordingNotifier:
    """A ``notifier`` alert channel that keeps what it was asked to send."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def notify(self, context: Any) -> None:
        SENT_ALERTS.append(self.kwargs)


ALERTS = {"channels": [{"type": "notifier", "class": f"{__name__}.RecordingNotifier",
                        "kwargs": {"subject": "{subject}", "body": "{body}", "link": "{link}"}}]}


def policy_requests(emulator) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["operation"] in POLICY_OPERATIONS]


def list_rules(policy_ids: Any = None, run_id: str = "scheduled__1") -> dict[str, Any]:
    """Run the list task as a run of the policy_tuning DAG would."""
    ti = FakeTaskInstance("policy_tuning", run_id)
    return run_operator(ListPolicyRulesOperator(task_id="list_policy_rules", policy_ids=policy_ids, alerts=ALERTS),
                        ti)


def test_a_retired_policy_api_is_said_once_and_later_runs_skip_without_calling_it(fresh, warehouse):
    SENT_ALERTS.clear()
    fresh.reset(retired_policies=True)
    try:
        with pytest.raises(AirflowSkipException, match="retired its policy API") as first:
            list_rules(run_id="scheduled__1")
        assert not isinstance(first.value, AirflowFailException)
        assert [r["operation"] for r in policy_requests(fresh)] == ["policies_list"]
        (alert,) = SENT_ALERTS
        assert "retired its policy API" in alert["subject"]
        assert "newer policy system" in alert["body"]
        assert "policy_tuning.policies" in alert["body"]
        assert "remove the policy_tuning DAG" in alert["body"]
        assert "view=policies" in alert["link"]
        record = warehouse.get_state(pt.RETIRED_STATE)
        assert record["status_code"] == 410
        assert record["run_id"] == "scheduled__1"
        assert record["deployment_id"] == fresh.deployment_id
        assert record["configuration"]["policy_ids"] is None
        assert record["seen_at"]

        fresh.clear_requests()
        with pytest.raises(AirflowSkipException, match="not calling the policy API"):
            list_rules(run_id="scheduled__2")
        assert policy_requests(fresh) == []  # the retired API is not asked again
        assert len(SENT_ALERTS) == 1  # and no one is told again
        assert warehouse.get_state(pt.RETIRED_STATE)["run_id"] == "scheduled__1"

        with pytest.raises(AirflowSkipException, match="retired its policy API"):
            list_rules(policy_ids="['2102']", run_id="scheduled__3")  # the configuration changed: try again
        assert [r["operation"] for r in policy_requests(fresh)] == ["policy_rules"]
        assert len(SENT_ALERTS) == 2
        again = warehouse.get_state(pt.RETIRED_STATE)
        assert (again["run_id"], again["policy_ids"]) == ("scheduled__3", ["2102"])
    finally:
        fresh.reset(retired_policies=False)  # the override would outlive this test on the module's emulator

    fresh.clear_requests()
    with pytest.raises(AirflowSkipException, match="not calling the policy API"):
        list_rules(policy_ids="['2102']", run_id="scheduled__4")  # the record stands for this configuration
    assert policy_requests(fresh) == []
    result = list_rules(run_id="scheduled__5")  # another configuration, and the API answers: the record goes
    assert result["policy_ids"] == ["2101", "2102"]
    assert pt.retired_record(warehouse) is None
    assert len(SENT_ALERTS) == 2


def test_dry_run_proposes_exactly_the_expected_rules_and_sends_no_put(
    fresh, client, warehouse, known_data, tmp_path
):
    modes, expected = known_data
    ti = FakeTaskInstance()

    proposal = list_and_propose(ti, dry_run=True, report_dir=tmp_path)
    applied = run_operator(ApplyPolicyChangesOperator(task_id="apply_policy_changes", dry_run=True), ti)

    assert {(p["policy_id"], p["rule_path"]): p["proposed_mode"] for p in proposal["preview"]} == expected
    assert (proposal["proposed"], proposal["dry_run"], proposal["needs_approval"]) == (
        len(expected),
        True,
        False,
    )
    assert applied["applied"] == 0
    assert writes(fresh.requests()) == []
    assert listed_modes(client) == modes
    assert change_rows(warehouse) == set()
    # the full proposal is in the warehouse, the readable report and the CSV
    stored = warehouse.get_state(proposal["proposal_key"])["proposals"]
    assert {(p["policy_id"], p["rule_path"]) for p in stored} == set(expected)
    html = Path(proposal["report"]["html"]).read_text()
    assert "<table" in html
    assert "<img" in html
    assert all(path in html for _, path in expected)
    with open(proposal["report"]["csv"]["proposed changes"]) as fh:
        assert {(r["policy_id"], r["rule_path"], r["proposed_mode"]) for r in csv.DictReader(fh)} == {
            (p, path, mode) for (p, path), mode in expected.items()
        }


def test_an_approved_apply_changes_exactly_the_proposed_rules_and_records_previous_modes(
    fresh, client, warehouse, known_data, tmp_path
):
    modes, expected = known_data
    ti = FakeTaskInstance()
    proposal = list_and_propose(ti, dry_run=False, report_dir=tmp_path)
    assert proposal["needs_approval"] is True
    assert ti.xcoms[("propose_policy_changes", "needs_approval")] is True  # what check_approval branches on
    assert proposal["approval_subject"] == f"Apply {len(expected)} rule mode changes?"
    answered(ti, "Approve")
    before = fresh.requests()[-1]["seq"]

    result = run_operator(apply_operator(), ti)

    after = listed_modes(client)
    changed = {(p, path): mode for path, by in after.items() for p, mode in by.items() if modes[path][p] != mode}
    assert changed == expected
    puts = [r for r in writes(fresh.requests(since=before))]
    assert sorted((r["method"], r["body"]["rulePath"], r["body"]["policyMode"]) for r in puts) == sorted(
        ("PUT", path, mode) for (_, path), mode in expected.items()
    )
    assert change_rows(warehouse) == {
        (p, path, modes[path][p], mode, "applied") for (p, path), mode in expected.items()
    }
    assert result["applied"] == len(expected)
    # the local copy of the rules follows the change
    with warehouse.engine.connect() as conn:
        stored = dict(
            conn.execute(
                select(policy_rules.c.path, policy_rules.c.policy_mode).where(
                    policy_rules.c.policy_id == "2101", policy_rules.c.path.in_([p for _, p in expected])
                )
            ).all()
        )
    assert stored == {path: mode for (p, path), mode in expected.items() if p == "2101"}

    # a retried task sends nothing again
    before = fresh.requests()[-1]["seq"]
    again = run_operator(apply_operator(), ti)
    assert writes(fresh.requests(since=before)) == []
    assert (again["applied"], again["already_applied"]) == (0, len(expected))


def test_a_rejected_approval_applies_nothing(fresh, client, warehouse, known_data, tmp_path):
    modes, _ = known_data
    ti = FakeTaskInstance()
    list_and_propose(ti, dry_run=False, report_dir=tmp_path)
    answered(ti, "Reject")

    with pytest.raises(AirflowFailException, match=r"a person \(alice\) rejected this plan"):
        run_operator(apply_operator(), ti)

    assert writes(fresh.requests()) == []
    assert listed_modes(client) == modes
    assert change_rows(warehouse) == set()


def test_an_approval_task_marked_successful_by_hand_applies_nothing(fresh, client, warehouse, known_data, tmp_path):
    """No recorded answer: the approval task "succeeded" without its completion handler, as when a person marks it
    successful by hand; even an XCom of it saying "Approve" (left by an earlier try, or pushed by hand) is not
    consent."""
    modes, _ = known_data
    ti = FakeTaskInstance(xcoms={(APPROVAL_TASK, "return_value"): {"chosen_options": ["Approve"]}})
    list_and_propose(ti, dry_run=False, report_dir=tmp_path)

    with pytest.raises(AirflowFailException, match="marking the approval task successful by hand is not approval"):
        run_operator(apply_operator(), ti)

    assert writes(fresh.requests()) == []
    assert listed_modes(client) == modes
    assert change_rows(warehouse) == set()


def test_an_approval_of_an_earlier_proposal_does_not_cover_a_new_one(fresh, client, warehouse, known_data,
                                                                     tmp_path):
    """Proposing again in the same run (a cleared task) records a new plan: the earlier answer is gone."""
    modes, _ = known_data
    ti = FakeTaskInstance()
    list_and_propose(ti, dry_run=False, report_dir=tmp_path)
    answered(ti, "Approve")
    list_and_propose(ti, dry_run=False, report_dir=tmp_path)

    with pytest.raises(AirflowFailException, match="none is recorded"):
        run_operator(apply_operator(), ti)

    assert writes(fresh.requests()) == []
    assert listed_modes(client) == modes


def test_nothing_proposed_applies_nothing_and_asks_no_one(fresh, client, warehouse, tmp_path):
    modes = listed_modes(client)
    ti = FakeTaskInstance()

    proposal = list_and_propose(ti, dry_run=False, report_dir=tmp_path)  # no findings: nothing to propose
    result = run_operator(apply_operator(), ti)

    assert (proposal["proposed"], proposal["needs_approval"]) == (0, False)
    assert ti.xcoms[("propose_policy_changes", "needs_approval")] is False
    assert present(approval.get_plan(warehouse, approval.POLICIES, ti.run_id))["needs_approval"] is False
    assert (result["proposed"], result["applied"]) == (0, 0)
    assert writes(fresh.requests()) == []
    assert listed_modes(client) == modes


def test_explicit_proposals_without_a_recorded_plan_apply_nothing(fresh, client, warehouse, known_data):
    modes, expected = known_data
    (policy, path), mode = sorted(expected.items())[0]
    proposals = [{"policy_id": policy, "rule_path": path, "current_mode": modes[path][policy],
                  "proposed_mode": mode}]

    with pytest.raises(AirflowFailException, match="recorded no proposal for a person to approve"):
        run_operator(ApplyPolicyChangesOperator(task_id="apply_policy_changes", proposals=proposals),
                     FakeTaskInstance())

    assert writes(fresh.requests()) == []
    assert listed_modes(client) == modes


def test_a_rule_changed_by_someone_since_the_proposal_is_skipped(fresh, client, warehouse, known_data, tmp_path):
    modes, expected = known_data
    ti = FakeTaskInstance()
    list_and_propose(ti, dry_run=False, report_dir=tmp_path)
    answered(ti, "Approve")
    (policy, path), _ = sorted(expected.items())[0]
    client.update_rule_mode(policy, path, "MODE_DISABLED")

    result = run_operator(apply_operator(), ti)

    assert listed_modes(client)[path][policy] == "MODE_DISABLED"
    assert (policy, path, modes[path][policy], expected[(policy, path)], "skipped") in change_rows(warehouse)
    assert (result["skipped"], result["applied"]) == (1, len(expected) - 1)


def test_apply_refuses_when_the_propose_task_left_no_proposal_naming_it(fresh, warehouse):
    with pytest.raises(ValueError, match="task 'propose_policy_changes' left no proposal_key in its XCom"):
        apply_operator().execute({"ti": FakeTaskInstance()})
    ti = FakeTaskInstance(xcoms={("propose_policy_changes", "return_value"): {"proposal_key": "policy_tuning/x"}})
    with pytest.raises(ValueError, match="no proposal stored in the warehouse under 'policy_tuning/x'"):
        apply_operator().execute({"ti": ti})
    assert fresh.requests() == []


def test_explicit_proposals_in_a_dry_run_are_not_sent_and_dry_run_must_be_a_boolean(fresh, warehouse):
    proposals = [{"policy_id": "2101", "rule_path": "some.rule", "current_mode": "MODE_BLOCK",
                  "proposed_mode": "MODE_MONITOR", "metric": "fp_share", "value": 0.9, "sample": 30,
                  "threshold": "noisy"}]
    ti = FakeTaskInstance()
    dry = ApplyPolicyChangesOperator(task_id="apply", proposals=proposals, dry_run="true")
    assert run_operator(dry, ti) == {"dry_run": True, "approved": None, "proposed": 1, "applied": 0}
    with pytest.raises(AirflowFailException, match="dry_run = 'sometimes' is not a boolean; use true or false"):
        ApplyPolicyChangesOperator(task_id="apply", proposals=proposals, dry_run="sometimes").execute({"ti": ti})
    assert fresh.requests() == []
    assert change_rows(warehouse) == set()


# --- the policy API retired between the proposal and the apply ------------------------------------------------------


def change_statuses(warehouse) -> dict[tuple[str, str], str]:
    c = policy_changes.c
    with warehouse.engine.connect() as conn:
        return {(p, path): status for p, path, status in conn.execute(select(c.policy_id, c.rule_path, c.status))}


def list_rules_as_in_list_and_propose(run_id: str) -> dict[str, Any]:
    """The list task of :func:`list_and_propose` (same configuration), in a later run."""
    return run_operator(ListPolicyRulesOperator(task_id="list_policy_rules", limit=7, alerts=ALERTS),
                        FakeTaskInstance("policy_tuning", run_id))


@pytest.mark.parametrize("sent_before", [0, 1], ids=["before-the-first-read", "after-the-first-write"])
def test_a_policy_api_retired_during_the_apply_is_recorded_alerted_once_and_later_runs_skip(
        fresh, client, warehouse, known_data, tmp_path, monkeypatch, sent_before):
    modes, expected = known_data
    assert len(expected) >= 2
    SENT_ALERTS.clear()
    ti = FakeTaskInstance("policy_tuning", "scheduled__1")
    list_and_propose(ti, dry_run=False, report_dir=tmp_path)  # the plan's reads answer
    answered(ti, "Approve")
    original = FindingsClient.update_rule_mode
    writes_seen: list[str] = []

    def update_then_migrate(self: FindingsClient, policy_id: Any, path: str, mode: str) -> Any:
        result = original(self, policy_id, path, mode)
        writes_seen.append(path)
        if len(writes_seen) == sent_before:
            fresh.retire_policies()  # the deployment migrates right after this write
        return result

    monkeypatch.setattr(FindingsClient, "update_rule_mode", update_then_migrate)
    if sent_before == 0:
        fresh.retire_policies()  # between the proposal and the apply
    try:
        with pytest.raises(AirflowSkipException, match="retired its policy API") as skipped:
            run_operator(ApplyPolicyChangesOperator(task_id="apply_policy_changes", alerts=ALERTS), ti)
        assert not isinstance(skipped.value, AirflowFailException)
        assert f"{sent_before} of {len(expected)} rule mode changes applied" in str(skipped.value)

        statuses = change_statuses(warehouse)
        assert sorted(statuses.values()) == sorted(["applied"] * sent_before
                                                   + ["not_applied"] * (len(expected) - sent_before))
        assert set(statuses) == set(expected)
        applied = [key for key, status in statuses.items() if status == "applied"]
        assert [path for _, path in applied] == writes_seen
        (alert,) = SENT_ALERTS
        assert "retired its policy API" in alert["subject"]
        assert f"{sent_before} applied before it, {len(expected) - sent_before} not applied" in alert["body"]
        record = pt.retired_record(warehouse)
        assert record is not None
        assert (record["status_code"], record["run_id"]) == (410, "scheduled__1")
        assert len(record["during_apply"]["not_applied"]) == len(expected) - sent_before

        fresh.clear_requests()
        with pytest.raises(AirflowSkipException, match="not calling the policy API"):
            list_rules_as_in_list_and_propose("scheduled__2")  # the next run skips at its first step
        assert policy_requests(fresh) == []
        assert len(SENT_ALERTS) == 1
    finally:
        fresh.retire_policies(False)
    after = listed_modes(client)  # nothing but what was applied before the 410 changed in the service
    assert {(p, path) for path, by in after.items() for p, mode in by.items() if modes[path][p] != mode} == set(
        applied)
