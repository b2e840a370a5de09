"""Planning a ticket run: selection, grouping into tickets of at most 50 findings, batches of at most 20 tickets,
the approval text."""

from __future__ import annotations

import math
from datetime import timedelta

from findings_provider.config import TicketPolicy
from findings_provider.pipeline import extraction, ticket_plan
from findings_provider.pipeline.selection import SelectedFinding

from .fakes import NOW, FakeApi, finding
from .ticket_runs import POLICIES, run, seed, sent


def test_groups_are_capped_at_50_and_batches_at_20_tickets() -> None:
    selected = [SelectedFinding(i, f"repo{i % 45}", "rule", "main", "high") for i in range(45 * 2)]
    selected += [SelectedFinding(1000 + i, "big", "rule", "main", "high") for i in range(120)]
    keyed = ticket_plan.group_findings(selected)
    assert sum(len(groups) for groups in keyed) == 45 + 3
    assert sorted(len(g.ids) for g in keyed[0 if keyed[0][0].repository == "big" else -1]) == [20, 50, 50]
    batches = ticket_plan.batch_groups("sast", "p", keyed, 20)
    assert len(batches) == math.ceil(48 / 20)
    for batch in batches:
        assert len(batch.groups) <= 20
        keys = [(g.repository, g.rule) for g in batch.groups]
        assert len(keys) == len(set(keys))  # never two groups of one (repository, rule) in a request
    assert sorted(i for b in batches for i in b.ids) == sorted(f.id for f in selected)
    ungrouped = ticket_plan.group_findings(selected[:30], group_issues=False)
    assert len(ticket_plan.batch_groups("sast", "p", ungrouped, 20)) == 2


def test_a_keys_tickets_take_its_most_recently_detected_findings_first() -> None:
    # 120 findings of one key, detected one a day in an order unrelated to their ids, and two never dated: the first
    # ticket holds the newest 50 (its re-read lists the key since the oldest of them), the undated come last
    days = [(i * 37) % 120 for i in range(120)]
    selected = [SelectedFinding(500 - i, "big", "rule", "main", "high", relevant_since=NOW - timedelta(days=d))
                for i, d in enumerate(days)]
    selected += [SelectedFinding(9000 + i, "big", "rule", "main", "high") for i in range(2)]
    (groups,) = ticket_plan.group_findings(selected)
    age = {f.id: (NOW - f.relevant_since).days for f in selected if f.relevant_since is not None}
    assert [sorted(age[i] for i in g.ids if i in age) for g in groups] == [
        list(range(50)), list(range(50, 100)), list(range(100, 120))]
    assert groups[-1].ids[-2:] == [9000, 9001]


def test_requests_per_run_are_ceil_of_groups_over_20(api: FakeApi, warehouse) -> None:
    sast = [finding(i, verdict="true_positive", severity="high", rule=f"rule{i}") for i in range(1, 46)]
    seed(api, warehouse, sast=sast, sca=[])
    tally = run(api, warehouse)
    assert tally.requests == len(sent(api)) == math.ceil(45 / 20)
    assert tally.tickets == 45


def test_secrets_policy_is_off_by_default_and_can_be_enabled(api: FakeApi, warehouse) -> None:
    seed(api, warehouse, sast=[], sca=[])
    api.findings["secrets"] = [{**finding(900, severity="critical"), "rule_name": None, "secret_type": "aws"}]
    extraction.run_extraction(api.client(), warehouse, ["secrets"], now=NOW)
    assert ticket_plan.plan_tickets(warehouse, POLICIES) == []
    enabled = [TicketPolicy.model_validate({**p.model_dump(), "enabled": True}) for p in POLICIES
               if p.issue_type == "secrets"]
    (batch,) = ticket_plan.plan_tickets(warehouse, enabled)
    assert (batch.issue_type, batch.ids) == ("secrets", [900])


def test_approval_body_shows_service_data_as_inert_cells(api: FakeApi, warehouse) -> None:
    from markdown_view import table_rows

    hostile = 'acme/x | 1 | ![i](http://evil) <b>x</b>'
    seed(api, warehouse, sast=[finding(1, verdict="true_positive", repo=hostile, rule="r*1*")], sca=[])
    plans = ticket_plan.plan_policies(warehouse, POLICIES)
    subject, body = ticket_plan.approval_text(plans, ["policy code-true-positives plans 1 tickets"])
    assert subject == "Create 1 tickets?"
    policies, groups = table_rows(body)[:2], table_rows(body)[2:]  # fails on any link, image, HTML, emphasis
    assert [row[0] for row in policies] == ["code-true-positives", "reachable-supply-chain"]
    assert groups == [[hostile, "r*1*", "1"]]
