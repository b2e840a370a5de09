"""Project settings against a real emulator: applying a plan to the service's projects, one PATCH per project.

The operators that plan and apply are tested in ``tests/operators/test_projects.py``.
"""

from __future__ import annotations

from typing import Any

from findings_provider.config import ProjectsFile
from findings_provider.governance.project_settings import (
    ProjectAction,
    ProjectPlan,
    apply_project_plan,
    plan_project_settings,
)
from findings_provider.warehouse.schema import projects as projects_table
from fixtures import seq_of, writes
from sqlalchemy import select

#: Emulator projects (seed 42): acme/identity-service has primary branch main and a develop branch (its code
#: host's default); acme/payments-api main; acme/billing-worker master.
SPEC = ProjectsFile.model_validate({
    "managed_tags": ["pci", "tier-1", "tier-2", "tier-3"],
    "projects": [
        {"match": "acme/identity-service", "primary_branch": "develop"},
        {"match": "acme/payments-api", "tags": ["pci"], "full_scan": True, "diff_scan": True,
         "primary_branch": "main"},
        {"match": "acme/billing-worker", "primary_branch": "master"},  # equal already: nothing to send
    ],
})


def stored_branches(warehouse) -> dict[str, str | None]:
    with warehouse.engine.connect() as conn:
        return dict(conn.execute(select(projects_table.c.name, projects_table.c.primary_branch)).all())


def test_a_project_gone_since_the_plan_is_skipped(client):
    plan_ = ProjectPlan(
        actions=[
            ProjectAction("acme/vanished", "add_tags", tags=("pci",)),
            ProjectAction("acme/payments-api", "add_tags", tags=("pci",)),
        ]
    )
    assert apply_project_plan(client, plan_) == {"patched": 1, "unchanged": 0, "skipped": 1}
    assert "pci" in next(p.tags for p in client.iter_projects() if p.name == "acme/payments-api")


def test_one_patch_per_project_with_exactly_the_fields_that_differ(emulator, client, warehouse):
    before = {p.name: p for p in client.iter_projects()}
    assert before["acme/identity-service"].primary_branch == "main"
    assert before["acme/billing-worker"].primary_branch == "master"
    payments = client.get_project("acme/payments-api")
    plan = plan_project_settings(before.values(), SPEC)
    assert "PLAN set_primary_branch acme/identity-service: main -> develop" in plan.lines()
    assert not [a for a in plan.actions if a.project == "acme/billing-worker"]
    seq = seq_of(emulator)

    counts = apply_project_plan(client, plan, warehouse)

    sent = emulator.requests(seq)
    patches = [r for r in sent if r["operation"] == "project_update"]
    assert writes(sent) == patches  # no tag PUT/DELETE, no managed-scan PATCH: everything in one PATCH
    assert counts == {"patched": len(plan.projects_changed()), "unchanged": 0, "skipped": 0}
    assert [r["path"].split("/projects/")[1] for r in patches] == plan.projects_changed()  # one per project
    # each PATCH follows a read of its project
    reads = [r["seq"] for r in sent if r["operation"] == "project_get"]
    assert len(reads) == len(patches)
    assert all(g < p["seq"] for g, p in zip(reads, patches, strict=True))
    bodies = {r["path"].split("/projects/")[1]: r["body"] for r in patches}
    assert bodies["acme/identity-service"] == {"primary_branch": "develop"}  # exactly the field that differs
    expected: dict[str, Any] = {"tags": [*payments.tags, "pci"]} if "pci" not in payments.tags else {}
    scans = {w: {"enabled": True} for w in ("diff_scan", "full_scan")
             if not getattr(payments.managed_scan_config, w).enabled}
    if scans:
        expected["managed_scan_config"] = scans
    assert bodies.get("acme/payments-api", {}) == expected  # no primary_branch: main already
    assert client.get_project("acme/identity-service").primary_branch == "develop"
    # the warehouse holds what the service answered
    assert stored_branches(warehouse)["acme/identity-service"] == "develop"

    seq = seq_of(emulator)
    assert plan_project_settings(client.iter_projects(), SPEC).actions == []  # converged
    assert writes(emulator.requests(seq)) == []


def test_no_patch_for_a_project_changed_into_shape_since_the_plan(emulator, client, warehouse):
    plan = plan_project_settings(client.iter_projects(), SPEC)
    client.update_project("acme/identity-service", primary_branch="develop")  # a person did it meanwhile
    seq = seq_of(emulator)

    counts = apply_project_plan(client, plan, warehouse)

    assert counts["unchanged"] == 1
    assert "acme/identity-service" not in [r["path"].split("/projects/")[1]
                                           for r in writes(emulator.requests(seq))]
    assert "acme/identity-service" not in stored_branches(warehouse)  # nothing answered, nothing stored
