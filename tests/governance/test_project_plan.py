"""Project settings planning from known projects (no API), and the projects file's validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from findings_provider.client.models import Project
from findings_provider.config import ConfigError, ProjectsFile, load_projects_file
from findings_provider.governance.project_settings import (
    ProjectAction,
    ProjectPlan,
    ProjectWrites,
    check_cap,
    plan_project_settings,
    remaining_writes,
)

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


def project(name: str, tags: list[str], diff: bool | None, full: bool | None, primary: str | None = None) -> Project:
    config = None
    if diff is not None or full is not None:
        config = {"diff_scan": {"enabled": diff}, "full_scan": {"enabled": full}}
    return Project.model_validate({"id": 1, "name": name, "tags": tags, "managed_scan_config": config,
                                   "primary_branch": primary})


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
        "PLAN set_managed_scans acme/unconfigured: diff_scan=on (current state unknown: set as wanted)",
        "SKIP pattern 'acme/ghost-*': matches no project of the deployment",
        "DRIFT unmentioned acme/docs-site: not named by the file (only a catch-all entry matches it); tags tier-1; "
        "primary branch (none)",
        "DRIFT unmanaged_tags acme/payments-api: carries team:payments, not in the file's tags for it nor in "
        "managed_tags: left as is",
        "DRIFT unmentioned acme/unconfigured: not named by the file (only a catch-all entry matches it); tags none; "
        "primary branch (none)",
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
        "set_primary_branch": 0,
        "managed_scans_unknown": 1,
        "unmatched_patterns": 1,
        "drift": 3,
        "drift_unmentioned": 2,
        "drift_unmanaged_tags": 1,
    }
    assert ProjectPlan.from_dict(plan.to_dict()) == plan


def test_a_project_already_in_shape_has_an_empty_plan():
    projects = [project("acme/payments-api", ["tier-1", "pci", "other"], diff=True, full=True)]
    plan = plan_project_settings(projects, SPEC)
    assert plan.actions == []
    assert plan.unmatched_patterns == ["acme/legacy-*", "acme/ghost-*"]
    assert [d.kind for d in plan.drift] == ["unmanaged_tags"]  # "other": not managed, not wanted, left alone


def test_an_empty_tag_list_removes_every_managed_tag():
    spec = ProjectsFile.model_validate(
        {"managed_tags": ["tier-1", "pci"], "projects": [{"match": "acme/*", "tags": []}]}
    )
    plan = plan_project_settings([project("acme/a", ["pci", "tier-1", "mine"], None, None)], spec)
    assert plan.lines() == [
        "PLAN remove_tags acme/a: -pci -tier-1",
        "DRIFT unmanaged_tags acme/a: carries mine, not in the file's tags for it nor in managed_tags: left as is",
    ]


# --- primary branch --------------------------------------------------------------------------------------------

BRANCHES = ProjectsFile.model_validate(
    {
        "managed_tags": ["tier-1"],
        "projects": [
            {"match": "*", "diff_scan": True},
            {"match": "acme/*", "primary_branch": "main"},
            {"match": "acme/gitflow", "primary_branch": "develop"},  # later entries win
        ],
    }
)


def test_a_primary_branch_that_differs_or_is_missing_on_the_service_is_planned_and_an_equal_one_is_not():
    projects = [
        project("acme/api", [], True, None, primary="master"),  # differs
        project("acme/web", [], True, None, primary="main"),  # equal
        project("acme/new", [], True, None, primary=None),  # the service names none
        project("acme/gitflow", [], True, None, primary="main"),  # a later entry wants develop
        project("other/tool", [], True, None, primary="trunk"),  # only the catch-all: no primary branch wanted
    ]
    plan = plan_project_settings(projects, BRANCHES)
    assert [line for line in plan.lines() if line.startswith("PLAN")] == [
        "PLAN set_primary_branch acme/api: master -> main",
        "PLAN set_primary_branch acme/gitflow: main -> develop",
        "PLAN set_primary_branch acme/new: (none) -> main",
    ]
    assert plan.summary()["set_primary_branch"] == 3
    assert plan.projects_changed() == ["acme/api", "acme/gitflow", "acme/new"]
    assert ProjectPlan.from_dict(plan.to_dict()) == plan  # the stored plan keeps the target and the old value


def test_primary_branch_with_tags_and_scans_plans_every_field_of_the_project():
    spec = ProjectsFile.model_validate({"managed_tags": ["pci"], "projects": [
        {"match": "acme/api", "tags": ["pci"], "full_scan": True, "primary_branch": "main"}]})
    plan = plan_project_settings([project("acme/api", [], True, False, primary="master")], spec)
    assert plan.lines() == [
        "PLAN add_tags acme/api: +pci",
        "PLAN set_managed_scans acme/api: full_scan=on",
        "PLAN set_primary_branch acme/api: master -> main",
    ]
    assert plan.projects_changed() == ["acme/api"]


# --- drift -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "unmentioned"),
    [
        (["*"], ["acme/api", "acme/web", "labs/x"]),  # the catch-all names nobody
        (["*/*", "**"], ["acme/api", "acme/web", "labs/x"]),  # nor does any pattern of wildcards only
        (["*", "acme/*"], ["labs/x"]),  # a glob that names a part of the name mentions what it matches
        (["acme/api"], ["acme/web", "labs/x"]),  # no entry matches them at all
        (["acme/?eb", "labs/x"], ["acme/api"]),
    ],
)
def test_projects_no_entry_but_a_catch_all_names_are_unmentioned_drift(patterns, unmentioned):
    spec = ProjectsFile.model_validate({"projects": [{"match": p, "diff_scan": True} for p in patterns]})
    listed = [project(n, [], True, None, primary="main") for n in ("acme/api", "acme/web", "labs/x")]
    plan = plan_project_settings(listed, spec)
    assert [d.project for d in plan.drift if d.kind == "unmentioned"] == unmentioned
    assert plan.actions == []  # drift is reported, never changed
    assert plan.summary()["drift_unmentioned"] == len(unmentioned)


def test_unmentioned_drift_says_whether_anything_matches_and_what_the_project_has():
    spec = ProjectsFile.model_validate({"projects": [{"match": "acme/api", "diff_scan": True}]})
    plan = plan_project_settings([project("labs/x", ["team:a", "b"], None, None, primary="trunk")], spec)
    assert plan.lines() == [
        "SKIP pattern 'acme/api': matches no project of the deployment",
        "DRIFT unmentioned labs/x: not named by the file (no entry matches it); tags team:a, b; primary branch trunk",
    ]
    assert plan.projects_matched == 0


def test_unmanaged_tags_are_drift_only_where_an_entry_gives_the_tags():
    spec = ProjectsFile.model_validate({"managed_tags": ["pci"], "projects": [
        {"match": "acme/*", "diff_scan": True}, {"match": "acme/api", "tags": ["pci"]}]})
    plan = plan_project_settings([project("acme/api", ["pci", "team:x"], True, None),
                                  project("acme/web", ["team:y"], True, None)], spec)
    assert [(d.project, d.kind) for d in plan.drift] == [("acme/api", "unmanaged_tags")]


# --- what is left to write against the fresh listing ------------------------------------------------------------


ALL_FOUR = [
    ProjectAction("acme/api", "add_tags", tags=("pci", "tier-1")),
    ProjectAction("acme/api", "remove_tags", tags=("tier-2",)),
    ProjectAction("acme/api", "set_managed_scans", diff_scan=True, full_scan=False),
    ProjectAction("acme/api", "set_primary_branch", primary_branch="main", previous="master"),
]


def test_the_writes_carry_exactly_what_still_differs_from_the_fresh_project_and_tags_as_deltas():
    fresh = project("acme/api", ["tier-2", "team:x", "tier-1"], diff=True, full=True, primary="master")
    # tier-1 is there already: only pci to add; diff_scan already on: not sent; team:x never named
    assert remaining_writes(fresh, ALL_FOUR) == ProjectWrites(
        add_tags=("pci",), remove_tags=("tier-2",), scans={"full_scan": False}, primary_branch="main")
    assert remaining_writes(fresh, ALL_FOUR).describe() == (
        "PUT tags +pci, DELETE tags -tier-2, PATCH project primary_branch=main full_scan=off")


def test_a_tag_to_remove_that_the_fresh_project_no_longer_carries_is_not_sent():
    fresh = project("acme/api", ["pci", "tier-1", "a-person-added-it"], diff=True, full=False, primary="main")
    assert remaining_writes(fresh, ALL_FOUR) == ProjectWrites()
    assert not remaining_writes(fresh, ALL_FOUR)


def test_without_a_primary_branch_to_change_the_managed_scans_go_alone():
    fresh = project("acme/api", ["pci", "tier-1"], diff=False, full=False, primary="main")
    writes = remaining_writes(fresh, ALL_FOUR)
    assert writes == ProjectWrites(scans={"diff_scan": True})
    assert writes.describe() == "PATCH managed-scan diff_scan=on"


def test_managed_scans_the_listing_does_not_state_are_sent_as_planned():
    fresh = project("acme/api", ["pci", "tier-1"], diff=None, full=None, primary="main")  # the real listing
    assert remaining_writes(fresh, ALL_FOUR).scans == {"diff_scan": True, "full_scan": False}


def test_a_plan_changing_more_projects_than_the_cap_is_refused():
    plan = ProjectPlan(actions=[ProjectAction(f"acme/p{i}", "add_tags", tags=("pci",)) for i in range(3)]
                       + [ProjectAction("acme/p0", "set_primary_branch", primary_branch="main")])
    check_cap(plan, 3)  # three projects (p0 twice is one project)
    check_cap(plan, None)
    with pytest.raises(ConfigError, match=r"the plan changes 3 projects, more than max_projects_changed = 2"):
        check_cap(plan, 2)


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
        (
            "projects:\n  - match: 'acme/*'\n    primary_branch: release 2024\n",
            3,
            "field 'projects.0.primary_branch' = 'release 2024': primary_branch 'release 2024' is not a branch name "
            "(it contains ' '); give a branch name as git allows it (e.g. main, release/2024)",
        ),
        (
            "projects:\n  - match: 'acme/*'\n    diff_scan: true\n  - match: 'acme/api'\n    primary_branch: a..b\n",
            5,
            "field 'projects.1.primary_branch' = 'a..b': primary_branch 'a..b' is not a branch name (it contains '..')",
        ),
        (
            "projects:\n  - match: 'acme/*'\n    primary_branch: [main]\n",
            3,
            "field 'projects.0.primary_branch': Input should be a valid string",
        ),
        (
            "projects:\n  - match: 'acme/*'\n    primary_branch: 2024\n",
            3,
            "field 'projects.0.primary_branch' = 2024: Input should be a valid string",
        ),
        (
            "projects:\n  - match: 'acme/*'\n    primary_branch: ''\n",
            3,
            "field 'projects.0.primary_branch' = '': primary_branch '' is not a branch name (it has 0 characters)",
        ),
    ],
)
def test_an_invalid_projects_file_names_the_line_and_the_reason(tmp_path: Path, text, line, reason):
    path = tmp_path / "projects.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_projects_file(path=path)
    assert f"line {line}" in str(err.value)
    assert reason in str(err.value)


@pytest.mark.parametrize("name", ["-main", "feature/", "main.lock", "a/.hidden", "x~1", "a:b", "wip*", "a\\b", "@",
                                  "a//b", "a@{1}", "x" * 256])
def test_names_git_refuses_are_refused_as_primary_branch(name):
    with pytest.raises(ValueError, match="is not a branch name") as err:
        ProjectsFile.model_validate({"projects": [{"match": "acme/*", "primary_branch": name}]})
    assert "give a branch name as git allows it" in str(err.value)


@pytest.mark.parametrize("name", ["main", "release/2024", "feature/JIRA-1_x.y", "develop", "v1.2"])
def test_branch_names_git_allows_are_accepted(name):
    spec = ProjectsFile.model_validate({"projects": [{"match": "acme/*", "primary_branch": name}]})
    desired = spec.desired("acme/api")
    assert desired is not None
    assert desired.primary_branch == name
