"""Tests of ``governance/project_settings.py``: the plan from ``projects.yaml`` (tags, managed scans, primary branch,
drift, the cap, the YAML's validation), then the apply against a real emulator (which requests, in which order,
what the warehouse holds afterwards).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from findings_provider.client import FindingsClient
from findings_provider.client.models import Project
from findings_provider.config import ConfigError, ProjectsFile, load_projects_file
from findings_provider.governance.project_settings import (
    ProjectAction,
    ProjectPlan,
    ProjectWrites,
    apply_project_plan,
    check_cap,
    plan_project_settings,
    read_managed_scans,
    remaining_writes,
    sets_managed_scans,
)
from findings_provider.warehouse.branches import store_projects
from findings_provider.warehouse.schema import projects as projects_table
from fixtures import seq_of, writes
from sqlalchemy import select

# --- project plan: Project settings planning from known projects (no API), and the projects file's validation.

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


# --- project settings emulator: Project settings against a real emulator: applying a plan to the service's projects
# with the reference's endpoints (tags as deltas, managed scans), and one project PATCH only for a primary branch.
# The operators that plan and apply are tested in ``tests/operators/test_projects.py``.

REFERENCE_OPERATIONS = {"projects", "tags_add", "tags_remove", "managed_scan"}
WRITE_METHODS = ("add_project_tags", "remove_project_tags", "set_managed_scans", "update_project")

#: Tags and managed scans only, as the shipped projects.yaml: no primary branch anywhere.
TAGS_AND_SCANS = ProjectsFile.model_validate({
    "managed_tags": ["pci", "tier-1", "tier-2", "tier-3"],
    "projects": [
        {"match": "*", "diff_scan": True},
        {"match": "acme/payments-*", "tags": ["pci", "tier-1"], "full_scan": True},
        {"match": "acme-labs/*", "tags": ["tier-3"], "full_scan": False},
    ],
})


def project_of(request: dict[str, Any]) -> str:
    return str(request["path"].split("/projects/")[1].removesuffix("/tags").removesuffix("/managed-scan"))


def tags_sent(request: dict[str, Any]) -> list[str]:
    """The tags of a logged tag request: the PUT's body (a bare array or ``{"tags": [...]}``), the DELETE's query."""
    if request["operation"] == "tags_remove":
        return list(request["query"]["tags"])
    body = request["body"]
    return list(body if isinstance(body, list) else body["tags"])


def warehouse_projects(warehouse) -> dict[str, tuple[list[str], str | None]]:
    with warehouse.engine.connect() as conn:
        rows = conn.execute(select(projects_table.c.name, projects_table.c.tags, projects_table.c.primary_branch))
        return {name: (list(tags), branch) for name, tags, branch in rows}


def service_projects(client) -> dict[str, tuple[list[str], str | None]]:
    return {p.name: (list(p.tags), p.primary_branch) for p in client.items(client.list_projects)}


class PersonBeforeTheFirstWrite:
    """The client, but a person changes the service (``act``, through the unwrapped client) right before the
    apply's first write, after whatever the apply read."""

    def __init__(self, client: FindingsClient, act: Callable[[], object]) -> None:
        self._client = client
        self._act: Callable[[], object] | None = act

    def __getattr__(self, name: str) -> Any:
        if name in WRITE_METHODS and self._act is not None:
            act, self._act = self._act, None
            act()
        return getattr(self._client, name)


def test_a_project_gone_since_the_plan_is_skipped(emulator, client):
    plan_ = ProjectPlan(
        actions=[
            ProjectAction("acme/vanished", "add_tags", tags=("pci",)),  # not listed any more
            ProjectAction("acme/payments-api", "add_tags", tags=("pci",)),
        ]
    )
    assert apply_project_plan(client, plan_) == {"changed": 1, "unchanged": 0, "skipped": 1}
    assert "pci" in next(p.tags for p in client.items(client.list_projects) if p.name == "acme/payments-api")


def test_a_project_deleted_between_the_listing_and_its_write_is_skipped(emulator, client):
    plan_ = ProjectPlan(actions=[ProjectAction("acme/payments-api", "add_tags", tags=("pci",)),
                                 ProjectAction("acme/notifications", "add_tags", tags=("pci",))])
    names = {p.name for p in client.items(client.list_projects)}
    assert {"acme/payments-api", "acme/notifications"} <= names
    racing = PersonBeforeTheFirstWrite(client, lambda: client.delete_project("acme/payments-api"))

    counts = apply_project_plan(cast(FindingsClient, racing), plan_)

    assert counts == {"changed": 1, "unchanged": 0, "skipped": 1}  # the 404 of its PUT: skipped, the next applied
    assert "pci" in next(p.tags for p in client.items(client.list_projects) if p.name == "acme/notifications")


def test_without_a_primary_branch_only_reference_endpoints_are_used_and_tags_go_as_exact_deltas(
        emulator, client, warehouse):
    # a server that follows only the API reference: no GET or PATCH of a single project
    for operation in ("project_get", "project_update"):
        emulator.add_fault(operation=operation, probability=1.0, kinds=["405"])
    listing = list(client.items(client.list_projects))
    store_projects(warehouse, listing)  # as the plan task does
    before = {p.name: p for p in listing}
    plan = plan_project_settings(listing, TAGS_AND_SCANS)
    assert {a.action for a in plan.actions} == {"add_tags", "remove_tags", "set_managed_scans"}
    seq = seq_of(emulator)

    counts = apply_project_plan(client, plan, warehouse)

    sent = emulator.requests(seq)
    assert {r["operation"] for r in sent} <= REFERENCE_OPERATIONS
    assert all(r["status"] == 200 for r in sent)
    assert counts == {"changed": len(plan.projects_changed()), "unchanged": 0, "skipped": 0}
    # the tags: exactly the plan's delta, one PUT and/or one DELETE per project
    for kind, operation in (("add_tags", "tags_add"), ("remove_tags", "tags_remove")):
        assert sorted((project_of(r), tags_sent(r)) for r in sent if r["operation"] == operation) == sorted(
            (a.project, list(a.tags)) for a in plan.actions if a.action == kind)
    scans = {project_of(r): r["body"] for r in sent if r["operation"] == "managed_scan"}
    assert set(scans) == {a.project for a in plan.actions if a.action == "set_managed_scans"}
    for name, body in scans.items():
        toggles = {k: v["enabled"] for k, v in body.items() if k in ("diff_scan", "full_scan") and v is not None}
        want = next(a for a in plan.actions if a.project == name and a.action == "set_managed_scans")
        assert toggles == {k: getattr(want, k) for k in ("diff_scan", "full_scan") if getattr(want, k) is not None}
    # tags outside managed_tags stay
    after = service_projects(client)
    for name, project in before.items():
        unmanaged = set(project.tags) - set(TAGS_AND_SCANS.managed_tags)
        assert unmanaged <= set(after[name][0]), name
    # the warehouse holds what the service answered
    assert warehouse_projects(warehouse) == after

    seq = seq_of(emulator)
    assert plan_project_settings(client.items(client.list_projects), TAGS_AND_SCANS).actions == []  # converged
    assert writes(emulator.requests(seq)) == []


def test_the_fresh_listing_comes_after_the_plan_and_before_the_first_write(emulator, client):
    plan = plan_project_settings(client.items(client.list_projects), TAGS_AND_SCANS)
    plan_walk = len([r for r in emulator.requests() if r["operation"] == "projects"])
    seq = seq_of(emulator)

    apply_project_plan(client, plan)

    sent = emulator.requests(seq)
    listing = [r["seq"] for r in sent if r["operation"] == "projects"]
    written = [r["seq"] for r in writes(sent)]
    assert len(listing) == plan_walk  # one walk of the listing for the whole apply
    assert written
    assert max(listing) < min(written)


def test_a_tag_a_person_adds_between_the_plan_and_the_writes_is_kept(emulator, client, warehouse):
    plan = plan_project_settings(client.items(client.list_projects), TAGS_AND_SCANS)
    first = plan.projects_changed()[0]
    assert any(a.project == first and a.action == "add_tags" for a in plan.actions)
    client.add_project_tags("acme/payments-api", ["person:before-apply"])  # between the plan and the apply
    # and one after the apply's listing, right before its first write, on the project it writes first
    racing = PersonBeforeTheFirstWrite(client, lambda: client.add_project_tags(first, ["person:racing"]))
    seq = seq_of(emulator)

    apply_project_plan(cast(FindingsClient, racing), plan, warehouse)

    after = service_projects(client)
    assert "person:before-apply" in after["acme/payments-api"][0]
    assert "person:racing" in after[first][0]
    assert warehouse_projects(warehouse)[first] == after[first]  # the answer of the last write to it
    ours = [r for r in emulator.requests(seq) if r["operation"].startswith("tags")
            and tags_sent(r) != ["person:racing"]]  # the person's own PUT left out
    assert sorted((project_of(r), r["operation"], tags_sent(r)) for r in ours) == sorted(
        (a.project, {"add_tags": "tags_add", "remove_tags": "tags_remove"}[a.action], list(a.tags))
        for a in plan.actions if a.action in ("add_tags", "remove_tags"))  # the delta, never the person's tags


# --- the primary branch: the one PATCH of a project -----------------------------------------------------------------


def branch_spec(identity_full_scan: bool) -> ProjectsFile:
    """Emulator projects (seed 42): acme/identity-service has primary branch main and a develop branch (its code
    host's default); acme/payments-api main; acme/billing-worker master."""
    return ProjectsFile.model_validate({
        "managed_tags": ["pci", "tier-1", "tier-2", "tier-3"],
        "projects": [
            {"match": "acme/identity-service", "primary_branch": "develop", "tags": ["tier-2"],
             "full_scan": identity_full_scan},
            {"match": "acme/payments-api", "tags": ["pci"], "full_scan": True, "diff_scan": True,
             "primary_branch": "main"},  # the service's already: tags and scans through the reference's endpoints
            {"match": "acme/billing-worker", "primary_branch": "master"},  # equal already: nothing to send
        ],
    })


def test_a_primary_branch_change_and_managed_scans_go_in_one_patch_and_tags_never_do(emulator, client, warehouse):
    listing = list(client.items(client.list_projects))
    store_projects(warehouse, listing)
    before = {p.name: p for p in listing}
    assert before["acme/identity-service"].primary_branch == "main"
    assert before["acme/billing-worker"].primary_branch == "master"
    identity_full = before["acme/identity-service"].managed_scan_config.full_scan.enabled
    spec = branch_spec(identity_full_scan=not identity_full)  # differs: rides in the PATCH
    plan = plan_project_settings(listing, spec)
    assert "PLAN set_primary_branch acme/identity-service: main -> develop" in plan.lines()
    assert not [a for a in plan.actions if a.project == "acme/billing-worker"]
    seq = seq_of(emulator)

    counts = apply_project_plan(client, plan, warehouse)

    sent = emulator.requests(seq)
    assert counts == {"changed": len(plan.projects_changed()), "unchanged": 0, "skipped": 0}
    assert not [r for r in sent if r["operation"] == "project_get"]
    patches = [r for r in sent if r["operation"] == "project_update"]
    assert [(project_of(r), r["body"]) for r in patches] == [
        ("acme/identity-service", {"primary_branch": "develop",
                                   "managed_scan_config": {"full_scan": {"enabled": not identity_full}}})]
    identity = [r["operation"] for r in writes(sent) if project_of(r) == "acme/identity-service"]
    assert "managed_scan" not in identity  # the scans went in the PATCH
    assert identity == ["tags_add", "tags_remove", "project_update"]  # tier-1 -> tier-2 as deltas, then the PATCH
    payments = [r["operation"] for r in writes(sent) if project_of(r) == "acme/payments-api"]
    assert payments == ["tags_add", "managed_scan"]  # its branch is main already: the reference's endpoints
    assert client.get_project("acme/identity-service").primary_branch == "develop"
    assert client.get_project("acme/identity-service").managed_scan_config.full_scan.enabled is not identity_full
    assert warehouse_projects(warehouse) == service_projects(client)  # what the service answered

    seq = seq_of(emulator)
    assert plan_project_settings(client.items(client.list_projects), spec).actions == []  # converged
    assert writes(emulator.requests(seq)) == []


def test_no_write_for_a_project_changed_into_shape_since_the_plan(emulator, client, warehouse):
    spec = ProjectsFile.model_validate({"projects": [
        {"match": "acme/identity-service", "primary_branch": "develop"},
        {"match": "acme/billing-worker", "primary_branch": "main"}]})
    plan = plan_project_settings(client.items(client.list_projects), spec)
    assert plan.projects_changed() == ["acme/billing-worker", "acme/identity-service"]
    client.update_project("acme/identity-service", primary_branch="develop")  # a person did it meanwhile
    seq = seq_of(emulator)

    counts = apply_project_plan(client, plan, warehouse)

    assert counts == {"changed": 1, "unchanged": 1, "skipped": 0}
    assert [project_of(r) for r in writes(emulator.requests(seq))] == ["acme/billing-worker"]
    assert "acme/identity-service" not in warehouse_projects(warehouse)  # nothing answered, nothing stored


# --- the real dialect: a listing without managed_scan_config ---------------------------------------------------------

#: Managed scans for some projects only: the others are never read one by one.
SOME_SCANS = ProjectsFile.model_validate({
    "managed_tags": ["pci", "tier-1", "tier-3"],
    "projects": [
        {"match": "acme/payments-*", "tags": ["pci", "tier-1"], "full_scan": True, "diff_scan": True},
        {"match": "acme-labs/*", "tags": ["tier-3"]},  # no managed scans: not read
        {"match": "acme/identity-service", "full_scan": False},
    ],
})


def plan_as_the_task_does(client, spec: ProjectsFile) -> ProjectPlan:
    """The plan task's steps: the listing, the managed scans it leaves out read, the plan."""
    return plan_project_settings(read_managed_scans(client, client.items(client.list_projects), spec), spec)


@pytest.fixture
def real_dialect(emulator) -> Iterator[Any]:
    """The session's emulator regenerated in the real service's dialect (the same data), reference afterwards."""
    emulator.reset(dialect="real")
    try:
        yield emulator
    finally:
        emulator.reset(dialect="reference")


def get_requests(emulator, seq: int) -> list[str]:
    return [project_of(r) for r in emulator.requests(seq) if r["operation"] == "project_get"]


@pytest.mark.parametrize("spec", [TAGS_AND_SCANS, SOME_SCANS], ids=["catch-all", "some"])
def test_on_the_real_dialect_the_plan_reads_the_managed_scans_and_equals_the_reference_one_and_converges(
        emulator, client, warehouse, spec):
    reference = plan_as_the_task_does(client, spec)  # the reference listing carries managed_scan_config
    assert not [r for r in emulator.requests() if r["operation"] == "project_get"]
    emulator.reset(dialect="real")
    try:
        listing = list(client.items(client.list_projects))
        assert listing
        assert all(p.managed_scan_config is None for p in listing)
        wanted = sorted(p.name for p in listing if sets_managed_scans(spec, p.name))
        seq = seq_of(emulator)

        plan = plan_as_the_task_does(client, spec)

        assert sorted(get_requests(emulator, seq)) == wanted  # one GET per project whose entry sets managed scans
        assert plan.lines() == reference.lines()  # the managed scans the service has, not "unknown"
        assert plan.summary()["managed_scans_unknown"] == 0
        scans = sorted(a.project for a in plan.actions if a.action == "set_managed_scans")
        assert set(scans) < set(wanted)  # only those that differ, not every project the file sets them for
        seq = seq_of(emulator)

        counts = apply_project_plan(client, plan, warehouse)

        sent = emulator.requests(seq)
        assert sorted(get_requests(emulator, seq)) == scans  # the apply reads only the projects it sets scans of
        assert counts == {"changed": len(plan.projects_changed()), "unchanged": 0, "skipped": 0}
        assert sorted(project_of(r) for r in sent if r["operation"] == "managed_scan") == scans
        seq = seq_of(emulator)
        assert plan_as_the_task_does(client, spec).actions == []  # a second run plans nothing
        assert writes(emulator.requests(seq)) == []
    finally:
        emulator.reset(dialect="reference")


def test_on_the_real_dialect_a_managed_scan_set_since_the_plan_is_not_sent_again(real_dialect, client, warehouse):
    plan = plan_as_the_task_does(client, SOME_SCANS)
    target = next(a for a in plan.actions if a.action == "set_managed_scans")
    client.set_managed_scans(target.project, diff_scan=target.diff_scan, full_scan=target.full_scan)  # a person
    seq = seq_of(real_dialect)

    counts = apply_project_plan(client, plan, warehouse)

    assert target.project not in [project_of(r) for r in writes(real_dialect.requests(seq))
                                  if r["operation"] == "managed_scan"]
    assert counts["changed"] == len(plan.projects_changed()) - (
        0 if any(a.project == target.project and a.action != "set_managed_scans" for a in plan.actions) else 1)


@pytest.mark.parametrize(("kind", "asked"), [("405", 1), ("501", 1), ("404", 2)])
def test_on_the_real_dialect_without_get_of_a_project_the_wanted_scans_are_sent_as_before_and_said_once(
        real_dialect, client, warehouse, caplog, kind, asked):
    real_dialect.add_fault(operation="project_get", probability=1.0, kinds=[kind])
    wanted = [p.name for p in client.items(client.list_projects) if sets_managed_scans(TAGS_AND_SCANS, p.name)]
    seq = seq_of(real_dialect)

    with caplog.at_level(logging.WARNING, logger="findings_provider.governance.project_settings"):
        plan = plan_as_the_task_does(client, TAGS_AND_SCANS)

    assert len(get_requests(real_dialect, seq)) == asked  # then not asked again in the task
    unknown = [a for a in plan.actions if a.action == "set_managed_scans"]
    assert sorted(a.project for a in unknown) == sorted(wanted)  # today's behaviour: planned writes
    assert all(a.state_unknown for a in unknown)
    assert plan.summary()["managed_scans_unknown"] == len(wanted)
    assert any("(current state unknown: set as wanted)" in line for line in plan.lines())
    warnings = [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()]
    assert len(warnings) == 1
    assert f"managed scans of {len(wanted)} projects" in warnings[0]
    seq = seq_of(real_dialect)

    counts = apply_project_plan(client, plan, warehouse)

    assert len(get_requests(real_dialect, seq)) == asked
    assert counts == {"changed": len(plan.projects_changed()), "unchanged": 0, "skipped": 0}
    assert sorted(project_of(r) for r in real_dialect.requests(seq) if r["operation"] == "managed_scan") == sorted(
        wanted)
    again = plan_as_the_task_does(client, TAGS_AND_SCANS)  # still unknown: the settings are planned each run
    assert [a.action for a in again.actions] == ["set_managed_scans"] * len(wanted)


def test_a_404_after_get_of_a_project_answered_is_that_project_only(real_dialect, client):
    # the second and third projects asked: gone since the listing
    real_dialect.add_fault(operation="project_get", schedule=["ok", "404", "404"])
    wanted = sorted(p.name for p in client.items(client.list_projects) if sets_managed_scans(TAGS_AND_SCANS, p.name))
    assert len(wanted) >= 4
    seq = seq_of(real_dialect)

    plan = plan_as_the_task_does(client, TAGS_AND_SCANS)

    assert sorted(get_requests(real_dialect, seq)) == wanted  # the route answered: every project is asked
    assert [a.project for a in plan.actions if a.state_unknown] == wanted[1:3]
