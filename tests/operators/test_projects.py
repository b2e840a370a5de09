"""Project settings operators against the emulator, through connections: plan from its projects, dry run,
apply, convergence; an invalid projects file."""

from __future__ import annotations

from pathlib import Path

import pytest
from findings_provider.compat import AirflowFailException
from findings_provider.config import load_projects_file
from findings_provider.operators.projects import ApplyProjectSettingsOperator, ProjectSettingsPlanOperator
from findings_provider.warehouse.schema import projects
from fixtures import ops, seq_of, writes
from present import present
from sqlalchemy import select
from task_context import FakeTaskInstance, make_context, run_operator

from .helpers import default_api

pytestmark = pytest.mark.integration


PROJECTS_YAML = """\
managed_tags: [tier-1, tier-2, tier-3, pci, internet-facing]
projects:
  - match: "*"
    diff_scan: true
  - match: "acme/payments-*"
    tags: [tier-1, pci, internet-facing]
    full_scan: true
  - match: "acme-labs/*"
    tags: [tier-3]
    full_scan: false
  - match: "acme/legacy-*"
    tags: [tier-2]
  - match: "acme/no-such-repo"
    diff_scan: false
"""


@pytest.fixture
def projects_file(tmp_path: Path) -> str:
    path = tmp_path / "projects.yaml"
    path.write_text(PROJECTS_YAML)
    return str(path)


def state(client) -> dict[str, tuple[set[str], bool, bool]]:
    return {
        p.name: (
            set(p.tags),
            p.managed_scan_config.diff_scan.enabled,
            p.managed_scan_config.full_scan.enabled,
        )
        for p in client.items(client.list_projects)
    }


def plan(ti: FakeTaskInstance, projects_file: str) -> dict:
    return run_operator(ProjectSettingsPlanOperator(task_id="plan_project_settings", projects_file=projects_file), ti)


def apply(ti: FakeTaskInstance, dry_run: bool) -> dict:
    return run_operator(ApplyProjectSettingsOperator(task_id="apply_project_settings", dry_run=dry_run), ti)


def test_plan_dry_run_apply_then_an_empty_plan(fresh, warehouse, client, projects_file, capsys):
    spec = load_projects_file(path=projects_file)
    before = state(client)
    ti = FakeTaskInstance(run_id="run-1")

    first = plan(ti, projects_file)
    dry = apply(ti, dry_run=True)

    assert first["unmatched"] == ["acme/legacy-*", "acme/no-such-repo"]  # reported, skipped, not an error
    assert first["actions"] > 0
    assert dry == {"dry_run": True, "planned": first["actions"], "projects": first["projects_changed"],
                   "drift": first["drift"], "drift_projects": first["drift_projects"], "over_cap": False,
                   "changed": 0, "unchanged": 0, "skipped": 0}
    assert writes(fresh.requests()) == []
    assert state(client) == before
    out = capsys.readouterr().out
    assert "PLAN add_tags acme/payments-api: +internet-facing +pci +tier-1" in out
    assert "SKIP pattern 'acme/legacy-*': matches no project of the deployment" in out

    applied = apply(ti, dry_run=False)

    assert applied["changed"] == first["projects_changed"]
    sent = writes(fresh.requests())
    # no primary_branch in the file: only the reference's tag and managed-scan endpoints, no GET/PATCH of a project
    assert {r["operation"] for r in sent} == {"tags_add", "tags_remove", "managed_scan"}
    assert not [r for r in fresh.requests() if r["operation"] in ("project_get", "project_update")]
    assert len({r["path"].split("/projects/")[1].rsplit("/", 1)[0] for r in sent}) == first["projects_changed"]
    after = state(client)
    for name, (tags, diff, full) in after.items():
        want = present(spec.desired(name))
        old_tags = before[name][0]
        assert diff is True
        if want.full_scan is not None:
            assert full is want.full_scan, name
        else:
            assert full is before[name][2], name
        if want.tags is not None:
            assert tags & set(spec.managed_tags) == set(want.tags), name
        else:
            assert tags == old_tags, name
        assert tags - set(spec.managed_tags) == old_tags - set(spec.managed_tags), name  # others kept
    with warehouse.engine.connect() as conn:  # the plan's listing, then what the service answered to each write
        stored = {n: (set(t), b) for n, t, b in conn.execute(
            select(projects.c.name, projects.c.tags, projects.c.primary_branch))}
    assert stored == {p.name: (set(p.tags), p.primary_branch) for p in client.items(client.list_projects)}

    ti2 = FakeTaskInstance(run_id="run-2")
    seq = fresh.requests()[-1]["seq"]
    second = plan(ti2, projects_file)
    again = apply(ti2, dry_run=False)
    assert second["actions"] == 0
    assert again["changed"] == 0
    assert writes(fresh.requests(since=seq)) == []
    assert state(client) == after


def test_an_invalid_projects_file_fails_the_plan_with_line_and_reason(fresh, warehouse, tmp_path):
    path = tmp_path / "projects.yaml"
    path.write_text("managed_tags: [tier-1]\nprojects:\n  - match: 'acme/*'\n    full_scan: maybe\n")
    with pytest.raises(AirflowFailException, match=r"projects.yaml, line 4: field 'projects.0.full_scan'"):
        ProjectSettingsPlanOperator(task_id="plan", projects_file=str(path)).execute({"ti": FakeTaskInstance()})
    assert fresh.requests() == []  # the file is checked before the API is called


def test_apply_refuses_when_the_plan_task_left_no_plan_naming_it(fresh, warehouse):
    with pytest.raises(ValueError, match=r"no project settings plan from task 'plan_project_settings' \(key None\)"):
        ApplyProjectSettingsOperator(task_id="apply_project_settings").execute(make_context())
    assert fresh.requests() == []


def test_apply_without_a_plan_task_plans_itself_and_checks_dry_run(fresh, warehouse, projects_file):
    with pytest.raises(AirflowFailException, match="dry_run = 'perhaps' is not a boolean; use true or false"):
        ApplyProjectSettingsOperator(task_id="apply", plan_task_id=None, projects_file=projects_file,
                                     dry_run="perhaps").execute(make_context())
    assert fresh.requests() == []  # the value is checked before the projects are listed

    planned = ProjectSettingsPlanOperator(task_id="plan", projects_file=projects_file).execute(make_context())
    seq = seq_of(fresh)
    result = ApplyProjectSettingsOperator(task_id="apply", plan_task_id=None, projects_file=projects_file,
                                          dry_run="True").execute(make_context())
    assert (result["dry_run"], result["planned"], result["changed"]) == (True, planned["actions"], 0)
    assert planned["actions"] > 0
    assert [r["operation"] for r in fresh.requests(seq)] == ["projects"] * len(ops(fresh, seq, "projects")) != []
    assert writes(fresh.requests()) == []


def test_the_plan_reports_drift_in_the_log_the_xcom_and_the_stored_plan(fresh, warehouse, projects_file, capsys):
    ti = FakeTaskInstance(run_id="run-drift")
    summary = plan(ti, projects_file)

    # the file names acme/payments-*, acme-labs/* and acme/legacy-*: the other acme/ and acme-infra/ projects are
    # matched by "*" only
    names = {p.name for p in default_client_projects()}
    mentioned = {n for n in names if n.startswith(("acme/payments-", "acme-labs/"))}
    unmentioned = sorted(names - mentioned)
    assert summary["drift_unmentioned"] == len(unmentioned) > 0
    assert summary["drift"] == summary["drift_unmentioned"] + summary["drift_unmanaged_tags"]
    assert summary["drift_unmanaged_tags"] > 0  # the emulator's team:* tags on projects whose tags the file gives
    assert len(summary["drift_projects"]) == min(summary["drift"], 20)
    assert all(line.split()[0] in ("unmentioned", "unmanaged_tags") for line in summary["drift_projects"])
    stored = warehouse.get_state(summary["plan_key"])
    assert sorted(d["project"] for d in stored["drift"] if d["kind"] == "unmentioned") == unmentioned
    out = capsys.readouterr().out
    assert f"DRIFT unmentioned {unmentioned[0]}: not named by the file (only a catch-all entry matches it)" in out
    assert "DRIFT unmanaged_tags acme-labs/" in out  # acme-labs/* gives the tags; the emulator's team:* stay
    assert "left as is" in out


def test_apply_refuses_a_plan_over_the_cap_before_any_write(fresh, warehouse, projects_file):
    ti = FakeTaskInstance(run_id="run-cap")
    first = plan(ti, projects_file)
    assert first["projects_changed"] > 1
    seq = seq_of(fresh)
    with pytest.raises(AirflowFailException,
                       match=r"the plan changes \d+ projects, more than max_projects_changed = 1"):
        run_operator(ApplyProjectSettingsOperator(task_id="apply_project_settings", max_projects_changed=1), ti)
    assert writes(fresh.requests(seq)) == []
    dry = run_operator(ApplyProjectSettingsOperator(task_id="apply_project_settings", dry_run=True,
                                                    max_projects_changed="1"), ti)
    assert (dry["over_cap"], dry["changed"]) == (True, 0)
    with pytest.raises(AirflowFailException, match="max_projects_changed"):
        run_operator(ApplyProjectSettingsOperator(task_id="apply_project_settings", max_projects_changed="0"), ti)
    assert writes(fresh.requests(seq)) == []


def default_client_projects() -> list:
    with default_api() as api:
        return list(api.items(api.list_projects))


def test_on_the_real_dialect_the_operators_read_the_managed_scans_and_the_second_run_plans_nothing(
        emulator, warehouse, projects_file):
    emulator.reset(dialect="real")  # its listing leaves managed_scan_config out
    try:
        with default_api() as api:
            listed = list(api.items(api.list_projects))
        assert all(p.managed_scan_config is None for p in listed)
        ti = FakeTaskInstance(run_id="run-real-1")

        first = plan(ti, projects_file)
        applied = apply(ti, dry_run=False)

        assert first["managed_scans_unknown"] == 0
        assert 0 < first["set_managed_scans"] < len(listed)  # only the projects whose scans differ
        assert applied["changed"] == first["projects_changed"]
        ti2 = FakeTaskInstance(run_id="run-real-2")
        seq = seq_of(emulator)
        second = plan(ti2, projects_file)
        again = apply(ti2, dry_run=False)
        assert (second["actions"], again["changed"]) == (0, 0)
        assert writes(emulator.requests(seq)) == []
        assert len(ops(emulator, seq, "project_get")) == len(listed)  # the catch-all sets diff_scan for each
    finally:
        emulator.reset(dialect="reference")
