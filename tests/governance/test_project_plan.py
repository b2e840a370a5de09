"""Project settings planning from known projects (no API), and the projects file's validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from findings_provider.client.models import Project
from findings_provider.config import ConfigError, ProjectsFile, load_projects_file
from findings_provider.governance.project_settings import ProjectPlan, plan_project_settings

SPEC = ProjectsFile.model_validate(
    {
        "managed_tags": ["tier-1", "tier-2", "pci", "deprecated"],
        "projects": [
            {"match": "*", "diff_scan": True},
            {"match": "acme/payments-*", "tags": ["tier-1", "pci"], "full_scan": True},
            {"match": "acme/legacy-*", "tags": ["deprecated"], "full_scan": False},
            {"match": "acme/ghost-*", "tags": ["tier-2"]},
        ],
    }
)


def project(name: str, tags: list[str], diff: bool | None, full: bool | None) -> Project:
    config = None
    if diff is not None or full is not None:
        config = {"diff_scan": {"enabled": diff}, "full_scan": {"enabled": full}}
    return Project.model_validate({"id": 1, "name": name, "tags": tags, "managed_scan_config": config})


def test_plan_lists_only_the_difference_in_a_fixed_order():
    projects = [
        project("acme/payments-api", ["tier-2", "team:payments"], diff=True, full=False),
        project("acme/legacy-billing", ["deprecated", "tier-1"], diff=False, full=False),
        project("acme/docs-site", ["tier-1"], diff=True, full=True),
        project("acme/unconfigured", [], diff=None, full=None),
    ]

    plan = plan_project_settings(reversed(projects), SPEC)

    assert plan.lines() == [
        "PLAN remove_tags acme/legacy-billing: -tier-1",
        "PLAN set_managed_scans acme/legacy-billing: diff_scan=on",
        "PLAN add_tags acme/payments-api: +pci +tier-1",
        "PLAN remove_tags acme/payments-api: -tier-2",  # managed; team:payments is not, so it stays
        "PLAN set_managed_scans acme/payments-api: full_scan=on",
        "PLAN set_managed_scans acme/unconfigured: diff_scan=on",  # unknown current state: set it
        "SKIP pattern 'acme/ghost-*': matches no project of the deployment",
    ]
    # acme/docs-site matches only "*" (no tags given): its tier-1 tag is left alone
    assert plan.summary() == {
        "projects": 4,
        "projects_matched": 4,
        "projects_changed": 3,
        "actions": 6,
        "add_tags": 1,
        "remove_tags": 2,
        "set_managed_scans": 3,
        "unmatched_patterns": 1,
    }
    assert ProjectPlan.from_dict(plan.to_dict()) == plan


def test_a_project_already_in_shape_has_an_empty_plan():
    projects = [project("acme/payments-api", ["tier-1", "pci", "other"], diff=True, full=True)]
    plan = plan_project_settings(projects, SPEC)
    assert plan.actions == []
    assert plan.unmatched_patterns == ["acme/legacy-*", "acme/ghost-*"]


def test_an_empty_tag_list_removes_every_managed_tag():
    spec = ProjectsFile.model_validate(
        {"managed_tags": ["tier-1", "pci"], "projects": [{"match": "acme/*", "tags": []}]}
    )
    plan = plan_project_settings([project("acme/a", ["pci", "tier-1", "mine"], None, None)], spec)
    assert plan.lines() == ["PLAN remove_tags acme/a: -pci -tier-1"]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            "managed_tags: [tier-1]\nprojects:\n  - match: 'acme/*'\n    tags: [tier-1, pci]\n",
            4,  # the entry's tags line
            "sets tags ['pci'] that are not in managed_tags",
        ),
        (
            "managed_tags: [tier-1]\nprojects:\n  - match: 'acme/*'\n    diff_scan: sometimes\n",
            4,
            "projects.0.diff_scan",
        ),
        (
            "managed_tags: [tier-1]\nprojects:\n  - match: 'acme/*'\n    colour: blue\n",
            4,
            "projects.0.colour",
        ),
        ("managed_tags: [tier-1\nprojects: []\n", 2, "not valid YAML"),
    ],
)
def test_an_invalid_projects_file_names_the_line_and_the_reason(tmp_path: Path, text, line, reason):
    path = tmp_path / "projects.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_projects_file(path=path)
    assert f"line {line}" in str(err.value)
    assert reason in str(err.value)
