"""Project settings against a real emulator: applying a plan to the service's projects.

The operators that plan and apply are tested in ``tests/operators/test_projects.py``.
"""

from __future__ import annotations

from findings_provider.governance.project_settings import ProjectAction, ProjectPlan, apply_project_plan


def test_a_project_gone_since_the_plan_is_skipped(client):
    plan_ = ProjectPlan(
        actions=[
            ProjectAction("acme/vanished", "add_tags", tags=("pci",)),
            ProjectAction("acme/payments-api", "add_tags", tags=("pci",)),
        ]
    )
    assert apply_project_plan(client, plan_) == {"applied": 1, "skipped": 1}
    assert "pci" in next(p.tags for p in client.items(client.list_projects) if p.name == "acme/payments-api")
