"""The governance DAGs: integrity and conventions, then ``dag.test()`` runs against a real emulator.

Connections are ``AIRFLOW_CONN_*`` environment variables (the emulator; a SQLite warehouse in a temporary
directory); ``AIRFLOW_HOME`` is the session's temporary home (``tests/conftest.py``), its metadata database
created here.

Human-in-the-loop: on Airflow 3.3 ``dag.test()`` parks an ``ApprovalOperator`` task in ``awaiting_input`` and
waits until a response is recorded from outside (the Required Actions UI or the HITL REST API of an api-server
sharing the metadata database). The approval runs here answer from a thread the way that API does
(``update_hitl_detail``): write the response to the task's ``hitl_detail`` row and resume the task with
``handle_event_submit``. The operator then resumes in ``execute_complete`` exactly as in production.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import CronTriggerTimetable
from airflow_version import share_the_in_process_execution_api
from findings_provider.assets import DEPENDENCIES, POLICY_RULES
from findings_provider.config import load_pipeline_config, load_projects_file
from findings_provider.names import API_POOL, GOVERNANCE_DAGS
from findings_provider.pipeline import approval
from findings_provider.text import md_escape
from findings_provider.warehouse import Warehouse, finding_row_from_dict
from findings_provider.warehouse.schema import (
    dependencies,
    dependency_repositories,
    policy_changes,
    projects,
    sboms,
)
from fixtures import connect, make_warehouse
from hitl import Approver
from hitl import run_with_answer as answered
from present import present
from sqlalchemy import select

#: A guard against a hang, not a speed target: a ``dag.test()`` run waiting for an answer that never resumes it would
#: otherwise hold its worker until CI's own limit.
pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"
APPROVAL_TASK = "approve_policy_changes"
#: The tasks of ``dag_defaults.approval_steps`` (in the default pool: they make no API call), per DAG.
APPROVAL_STEPS = {"policy_tuning": {"check_approval", APPROVAL_TASK}}


# --- fixtures -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    return {"findings": 200}


@pytest.fixture(scope="module")
def environment(emulator, tmp_path_factory) -> Iterator[Warehouse]:
    """Connections to the emulator and a fresh warehouse, and the Airflow metadata database; yields the warehouse."""
    path = tmp_path_factory.mktemp("governance") / "warehouse.db"
    with pytest.MonkeyPatch.context() as mp:
        connect(mp, emulator=emulator, warehouse=path)
        from airflow.utils.db import initdb

        initdb()
        share_the_in_process_execution_api()
        warehouse = make_warehouse(path)
        yield warehouse
        warehouse.engine.dispose()


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def fresh_dag(dag_id: str) -> Any:
    """The DAG parsed anew from its file: ``dag.test(run_conf=...)`` leaves the conf in the in-memory tasks' params,
    so each run gets its own DAG object."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS / f"{dag_id}.py")).dags[dag_id]


def xcom(run: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key=key)
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def writes(requests: list[dict]) -> list[dict]:
    return [r for r in requests if r["method"] in ("PUT", "PATCH", "DELETE")]


# --- integrity and conventions --------------------------------------------------------------------------------


def test_governance_dags_load_on_their_schedules_in_the_api_pool(dagbag):
    """The conventions every DAG follows are checked in ``test_dag_integrity.py``."""
    cfg = load_pipeline_config()
    schedules = {
        "policy_tuning": cfg.policy_tuning.schedule,
        "project_settings": cfg.project_settings.schedule,
        "dependency_inventory": cfg.dependency_inventory.schedule,
    }
    errors = {path: err for path, err in dagbag.import_errors.items() if Path(path).stem in GOVERNANCE_DAGS}
    assert errors == {}
    for dag_id in GOVERNANCE_DAGS:
        assert dag_id in dagbag.dags
        dag = dagbag.dags[dag_id]
        assert "governance" in dag.tags
        assert dag.timetable == CronTriggerTimetable(present(schedules[dag_id]), timezone="UTC")
        # every task talks to the API but the approval steps, which only ask a person
        pools = {task.task_id: task.pool for task in dag.tasks}
        assert {t for t, pool in pools.items() if pool != API_POOL} == APPROVAL_STEPS.get(dag_id, set()), dag_id


def test_dag_params_are_typed_and_validated(dagbag):
    from airflow.sdk.exceptions import ParamValidationError

    tuning = dagbag.dags["policy_tuning"].params
    assert set(tuning) == {"dry_run", "policies"}
    assert tuning["dry_run"] is True  # a fixed public name: dry by default
    assert tuning.get_param("policies").resolve(["2101", "2102"]) == ["2101", "2102"]
    assert tuning.get_param("policies").resolve(None) is None
    for bad in (["policy-a"], "2101"):
        with pytest.raises(ParamValidationError):
            tuning.get_param("policies").resolve(bad)
    with pytest.raises(ParamValidationError):
        tuning.get_param("dry_run").resolve("maybe")
    settings = dagbag.dags["project_settings"].params
    assert set(settings) == {"dry_run"}
    assert settings["dry_run"] is load_pipeline_config().project_settings.dry_run
    inventory = dagbag.dags["dependency_inventory"].params
    assert set(inventory) == {"sbom", "sbom_repositories"}
    assert inventory["sbom"] is load_pipeline_config().dependency_inventory.sbom.enabled
    assert inventory["sbom_repositories"] == []
    assert inventory.get_param("sbom_repositories").resolve([3, 4]) == [3, 4]
    for wrong in (["web"], [3, 3]):
        with pytest.raises(ParamValidationError):
            inventory.get_param("sbom_repositories").resolve(wrong)


def test_policy_changes_are_gated_by_the_approval_pattern_of_every_write(dagbag):
    """``approval_steps``: a branch on the proposal's ``needs_approval``, then the approval that records the answer
    (kind ``policies``; no answer in 6 days is Reject), which the apply task checks itself."""
    from datetime import timedelta

    from airflow.sdk import TriggerRule
    from findings_provider.operators.approval import ApprovalBranchOperator, PlanApprovalOperator
    from findings_provider.pipeline import approval

    dag = dagbag.dags["policy_tuning"]
    check, approve, apply = (
        dag.get_task("check_approval"),
        dag.get_task(APPROVAL_TASK),
        dag.get_task("apply_policy_changes"),
    )
    assert isinstance(check, ApprovalBranchOperator)
    assert (check.approval_task_id, check.proceed_task_id) == (APPROVAL_TASK, "apply_policy_changes")
    assert check.upstream_task_ids == {"propose_policy_changes"}
    assert isinstance(approve, PlanApprovalOperator)
    assert approve.kind == approval.POLICIES
    assert approve.defaults == ["Reject"]  # no answer in time: nothing is applied
    assert approve.response_timeout == timedelta(days=6)
    assert "approval_subject" in present(approve.subject)
    assert "approval_body" in present(approve.body)
    assert check.downstream_task_ids == {APPROVAL_TASK, "apply_policy_changes"}
    assert approve.downstream_task_ids == {"apply_policy_changes"}
    assert apply.trigger_rule == TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS
    assert dag.get_task("list_policy_rules").outlets == [POLICY_RULES]
    assert dagbag.dags["dependency_inventory"].get_task("extract_dependencies").outlets == [DEPENDENCIES]


# --- dag.test() against the emulator ----------------------------------------------------------------------------


@pytest.mark.integration
def test_dependency_inventory_run_mirrors_the_inventory_and_reports(dagbag, environment, emulator, client):
    emulator.reset()

    run = fresh_dag("dependency_inventory").test()

    assert str(run.state) == "success", states(run)
    page_sizes = {r["body"].get("pageSize") for r in emulator.requests() if r["operation"] == "dependencies"}
    served = {(d.id, d.name, d.version) for d in client.items(client.list_dependencies, page_size=1000)}
    with environment.engine.connect() as conn:
        stored = set(conn.execute(select(dependencies.c.id, dependencies.c.name, dependencies.c.version)).all())
        repos = set(conn.execute(select(dependency_repositories.c.id, dependency_repositories.c.num_dependencies)))
    assert len(served) == 300
    assert stored == served
    summaries = client.items(client.list_repositories_with_dependencies, page_size=100)
    assert repos == {(r.id, r.numDependencies) for r in summaries}
    assert page_sizes == {10000}  # pipeline.yaml's page size
    report = xcom(run, "dependency_report")
    html = Path(report["report"]["html"]).read_text()
    assert "<table" in html
    assert html.count("<img") == 2


@pytest.mark.integration
def test_dependency_inventory_exports_the_sboms_after_the_inventory_and_a_failed_one_stays_partial(
        dagbag, environment, emulator, client):
    emulator.reset()
    summaries = client.items(client.list_repositories_with_dependencies, page_size=100)
    wanted = sorted(r.id for r in summaries if r.numDependencies)
    emulator.sbom(polls=2, fail_repositories=[wanted[0]], error_message="generator crashed")

    run = fresh_dag("dependency_inventory").test()

    assert str(run.state) == "success", states(run)
    result = xcom(run, "export_sboms")
    assert result["repositories"] == wanted  # every repository with dependencies (the param's default)
    assert result["completed"] == wanted[1:]
    assert result["failed"] == {str(wanted[0]): "failed: generator crashed"}
    log = emulator.requests()
    assert log.index(next(r for r in log if r["operation"] == "sbom_export")) > max(
        i for i, r in enumerate(log) if r["operation"] == "dependency_repositories")  # after the inventory
    # the DAG defers the task: the trigger polls each job twice (it finishes on the second poll), then the worker
    # reads each completed job once more for a fresh download link (the trigger's event carries none)
    assert len([r for r in log if r["operation"] == "sbom_status"]) == 2 * len(wanted) + len(wanted) - 1
    downloads = [r for r in log if r["operation"] == "sbom_download"]
    assert len(downloads) == len(wanted) - 1
    assert not any(r["authorization_sent"] for r in downloads)
    with environment.engine.connect() as conn:
        stored = conn.execute(select(sboms.c.repository_id, sboms.c.status, sboms.c.spec_version)
                              .where(sboms.c.run_id == run.run_id)).all()
    assert sorted(stored) == sorted([(wanted[0], "failed", None)] + [(i, "completed", "1.6") for i in wanted[1:]])


@pytest.mark.integration
def test_dependency_inventory_sbom_params_choose_the_repositories_or_switch_it_off(dagbag, environment, emulator,
                                                                                   client):
    emulator.reset()
    emulator.sbom(polls=1)
    wanted = sorted(r.id for r in client.items(client.list_repositories_with_dependencies, page_size=100))[:1]

    run = fresh_dag("dependency_inventory").test(run_conf={"sbom_repositories": wanted})
    assert xcom(run, "export_sboms")["completed"] == wanted

    emulator.reset()
    run = fresh_dag("dependency_inventory").test(run_conf={"sbom": False})
    assert states(run)["export_sboms"] == "skipped"
    assert str(run.state) == "success", states(run)
    assert not [r for r in emulator.requests() if r["operation"].startswith("sbom")]


@pytest.mark.integration
def test_project_settings_runs_converge_and_a_dry_run_changes_nothing(dagbag, environment, emulator, client):
    emulator.reset()
    spec = load_projects_file()
    before = {p.name: p for p in client.items(client.list_projects)}

    dry = fresh_dag("project_settings").test(run_conf={"dry_run": True})

    assert str(dry.state) == "success", states(dry)
    planned = xcom(dry, "plan_project_settings")
    assert planned["actions"] > 0
    assert "acme/legacy-*" in planned["unmatched"]  # a glob naming no project: reported and skipped
    assert writes(emulator.requests()) == []
    assert xcom(dry, "apply_project_settings")["changed"] == 0

    applied = fresh_dag("project_settings").test()  # the configured default: dry_run false

    assert str(applied.state) == "success", states(applied)
    assert xcom(applied, "apply_project_settings")["changed"] == planned["projects_changed"]
    # the shipped file names no primary_branch: only the API reference's endpoints, never GET/PATCH of a project
    assert not any(p.primary_branch for p in spec.projects)
    assert {r["operation"] for r in emulator.requests()} <= {"projects", "tags_add", "tags_remove", "managed_scan"}
    for project in client.items(client.list_projects):
        want = present(spec.desired(project.name))
        assert project.managed_scan_config.diff_scan.enabled is True
        if want.tags is not None:
            assert set(project.tags) >= set(want.tags)
        if want.full_scan is not None:
            assert project.managed_scan_config.full_scan.enabled is want.full_scan
        else:
            assert (
                project.managed_scan_config.full_scan.enabled
                is before[project.name].managed_scan_config.full_scan.enabled
            )

    seq = emulator.requests()[-1]["seq"]
    again = fresh_dag("project_settings").test()

    assert xcom(again, "plan_project_settings")["actions"] == 0
    assert writes(emulator.requests(since=seq)) == []


@pytest.mark.integration
def test_project_settings_sets_the_primary_branch_in_the_service_and_the_warehouse(
        dagbag, environment, emulator, client, tmp_path, monkeypatch):
    """A projects file naming a new primary branch: one PATCH of that project, with its managed scans and without
    its tags (the tag endpoints add the delta); the service's project has it after the run, and the warehouse's
    ``projects`` table holds what the service answered."""
    emulator.reset()
    assert client.get_project("acme/identity-service").primary_branch == "main"  # develop is its host's default
    (tmp_path / "pipeline.yaml").write_text((ROOT / "include" / "pipeline.yaml").read_text())
    (tmp_path / "projects.yaml").write_text(
        "managed_tags: [pci]\n"
        "projects:\n"
        "  - match: acme/identity-service\n"
        "    primary_branch: develop\n"
        "    tags: [pci]\n"
        "    full_scan: true\n"
        "  - match: acme/payments-api\n"
        "    primary_branch: main\n"  # the service's already: no request
    )
    monkeypatch.setenv("FINDINGS_PIPELINE_CONFIG", str(tmp_path / "pipeline.yaml"))
    start = emulator.requests()[-1]["seq"]

    run = fresh_dag("project_settings").test()

    assert str(run.state) == "success", states(run)
    planned = xcom(run, "plan_project_settings")
    assert (planned["actions"], planned["set_primary_branch"], planned["projects_changed"]) == (3, 1, 1)
    assert planned["drift_unmentioned"] == planned["projects"] - 2  # every project the file does not name
    assert xcom(run, "apply_project_settings")["changed"] == 1
    sent = writes(emulator.requests(since=start))
    assert [r["operation"] for r in sent] == ["tags_add", "project_update"]
    assert sent[0]["body"] in (["pci"], {"tags": ["pci"]})  # the tag to add, whatever the body's form
    assert sent[1]["body"] == {"primary_branch": "develop", "managed_scan_config": {"full_scan": {"enabled": True}}}
    assert not [r for r in emulator.requests(since=start) if r["operation"] == "project_get"]
    service = client.get_project("acme/identity-service").primary_branch
    assert service == "develop"
    with environment.engine.connect() as conn:
        stored = dict(conn.execute(select(projects.c.name, projects.c.primary_branch)).all())
    assert stored["acme/identity-service"] == service
    assert stored == {p.name: p.primary_branch for p in client.items(client.list_projects)}  # the whole table matches

    seq = emulator.requests()[-1]["seq"]
    again = fresh_dag("project_settings").test()
    assert xcom(again, "plan_project_settings")["actions"] == 0
    assert writes(emulator.requests(since=seq)) == []


# --- policy tuning: known data, dry run, reject, approve ------------------------------------------------------------


@pytest.fixture
def known_proposals(environment, emulator, client) -> tuple[dict, dict]:
    """Known verdicts for three of the emulator's rules; returns (modes now, expected proposals)."""
    emulator.reset()
    modes: dict[str, dict[str, str]] = {}
    for policy in client.list_policies():
        for rule in client.items(client.list_policy_rules, policy.id):
            modes.setdefault(rule.path, {})[policy.id] = rule.policyMode
    blocking = [p for p in sorted(modes) if set(modes[p].values()) <= {"MODE_BLOCK", "MODE_COMMENT"}]
    noisy, below_min = blocking[0], blocking[1]
    precise = next(p for p in sorted(modes) if modes[p].get("2101") == "MODE_MONITOR")
    rows, next_id = [], 5_000_000
    for rule, verdicts in (
        (noisy, ["false_positive"] * 22 + ["true_positive"] * 3),  # 88% over 25
        (below_min, ["false_positive"] * 19),  # 100% but only 19 findings
        (precise, ["true_positive"] * 20),  # 100% true positives over 20
    ):
        for verdict in verdicts:
            rows.append(
                finding_row_from_dict(
                    "sast",
                    {
                        "id": next_id,
                        "rule_name": rule,
                        "status": "open",
                        "triage_state": "untriaged",
                        "assistant": {"autotriage": {"verdict": verdict}},
                    },
                )
            )
            next_id += 1
    environment.upsert_findings(rows)
    expected = {(p, noisy): "MODE_MONITOR" for p in modes[noisy]}
    expected |= {(p, precise): "MODE_COMMENT" for p, m in modes[precise].items() if m == "MODE_MONITOR"}
    return modes, expected


def current_modes(client) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for policy in client.list_policies():
        for rule in client.items(client.list_policy_rules, policy.id):
            out.setdefault(rule.path, {})[policy.id] = rule.policyMode
    return out


def run_with_answer(dag: Any, choice: str) -> tuple[Any, Approver]:
    return answered(dag, APPROVAL_TASK, choice, {"dry_run": False})


def stored_changes(warehouse: Warehouse) -> set[tuple]:
    c = policy_changes.c
    with warehouse.engine.connect() as conn:
        return set(conn.execute(select(c.policy_id, c.rule_path, c.previous_mode, c.new_mode, c.status)).all())


@pytest.mark.integration
def test_policy_tuning_dry_run_proposes_the_expected_rules_and_changes_nothing(
    dagbag, environment, emulator, client, known_proposals
):
    modes, expected = known_proposals
    changes_before = stored_changes(environment)

    run = fresh_dag("policy_tuning").test()  # default params: dry_run true

    assert str(run.state) == "success", states(run)
    proposal = xcom(run, "propose_policy_changes")
    assert {(p["policy_id"], p["rule_path"]): p["proposed_mode"] for p in proposal["preview"]} == expected
    assert proposal["dry_run"] is True
    assert states(run)[APPROVAL_TASK] == "skipped"  # no one is asked
    assert states(run)["apply_policy_changes"] == "success"
    assert xcom(run, "apply_policy_changes") == {"dry_run": True, "approved": None, "proposed": len(expected),
                                                 "applied": 0}
    assert [r for r in emulator.requests() if r["method"] == "PUT"] == []
    assert current_modes(client) == modes
    assert stored_changes(environment) == changes_before
    html = Path(proposal["report"]["html"]).read_text()
    assert "<table" in html
    assert "<img" in html


@pytest.mark.integration
@pytest.mark.approval_in_dag_test
def test_policy_tuning_rejected_applies_nothing(dagbag, environment, emulator, client, known_proposals):
    modes, _ = known_proposals
    changes_before = stored_changes(environment)

    run, approver = run_with_answer(fresh_dag("policy_tuning"), "Reject")

    assert approver.asked["options"] == ["Approve", "Reject"]
    assert states(run)[APPROVAL_TASK] == "success"
    assert states(run)["apply_policy_changes"] == "skipped"
    assert present(approval.get_plan(environment, approval.POLICIES, run.run_id))["decision"]["approved"] is False
    assert [r for r in emulator.requests() if r["method"] == "PUT"] == []
    assert current_modes(client) == modes
    assert stored_changes(environment) == changes_before


@pytest.mark.integration
def test_policy_tuning_with_the_approval_marked_successful_by_hand_applies_nothing(
    dagbag, environment, emulator, client, known_proposals
):
    """The approval task succeeds without a person's answer (``mark_success_pattern``: what marking it successful
    by hand does): the apply task finds no recorded approval, fails, and changes no rule."""
    modes, _ = known_proposals
    changes_before = stored_changes(environment)

    run = fresh_dag("policy_tuning").test(run_conf={"dry_run": False}, mark_success_pattern=APPROVAL_TASK)

    assert states(run)[APPROVAL_TASK] == "success"
    assert states(run)["apply_policy_changes"] == "failed"
    assert present(approval.get_plan(environment, approval.POLICIES, run.run_id))["decision"] is None
    assert [r for r in emulator.requests() if r["method"] == "PUT"] == []
    assert current_modes(client) == modes
    assert stored_changes(environment) == changes_before


@pytest.mark.integration
@pytest.mark.approval_in_dag_test
def test_policy_tuning_approved_changes_exactly_the_proposed_rules(
    dagbag, environment, emulator, client, known_proposals
):
    modes, expected = known_proposals
    changes_before = stored_changes(environment)

    run, approver = run_with_answer(fresh_dag("policy_tuning"), "Approve")

    assert str(run.state) == "success", states(run)
    assert approver.asked["subject"] == f"Apply {len(expected)} rule mode changes?"
    # the approver sees the proposal (each rule path escaped: shown as text, never as Markdown)
    assert all(md_escape(path) in approver.asked["body"] for _, path in expected)
    after = current_modes(client)
    changed = {(p, path): m for path, by in after.items() for p, m in by.items() if modes[path][p] != m}
    assert changed == expected
    puts = [r for r in emulator.requests() if r["method"] == "PUT"]
    assert len(puts) == len(expected)
    assert stored_changes(environment) - changes_before == {
        (p, path, modes[path][p], mode, "applied") for (p, path), mode in expected.items()
    }
    assert xcom(run, "apply_policy_changes")["applied"] == len(expected)
    assert present(approval.get_plan(environment, approval.POLICIES, run.run_id))["decision"]["by"] == "Test Approver"


# --- policy tuning: a retired policy API ------------------------------------------------------------------------


@pytest.mark.integration
def test_policy_tuning_on_a_retired_policy_api_alerts_once_and_stays_green(dagbag, environment, emulator,
                                                                           monkeypatch):
    from findings_provider.alerts import Delivery
    from findings_provider.governance import policy_tuning as pt
    from findings_provider.operators import policies

    sent: list[Any] = []

    def deliver(alerts: list[Any], *args: Any, **kwargs: Any) -> Delivery:
        sent.extend(alerts)
        return Delivery(sent=len(alerts))

    monkeypatch.setattr(policies, "deliver", deliver)
    policy_operations = {"policies_list", "policy_rules", "policy_update"}
    environment.set_state(pt.RETIRED_STATE, None)
    emulator.reset(retired_policies=True)
    try:
        first = fresh_dag("policy_tuning").test()
        assert str(first.state) == "success", states(first)
        assert states(first)["list_policy_rules"] == "skipped"
        assert "failed" not in states(first).values()
        assert [a.kind for a in sent] == ["policy_api_retired"]
        assert environment.get_state(pt.RETIRED_STATE)["run_id"] == first.run_id
        assert [r for r in emulator.requests() if r["operation"] in policy_operations]

        emulator.clear_requests()
        second = fresh_dag("policy_tuning").test()
        assert str(second.state) == "success", states(second)
        assert states(second)["list_policy_rules"] == "skipped"
        assert [r for r in emulator.requests() if r["operation"] in policy_operations] == []
        assert len(sent) == 1

        changed = fresh_dag("policy_tuning").test(run_conf={"policies": ["2102"]})
        assert states(changed)["list_policy_rules"] == "skipped"
        assert [r["operation"] for r in emulator.requests() if r["operation"] in policy_operations] == [
            "policy_rules"]
        assert len(sent) == 2
    finally:
        emulator.reset(retired_policies=False)
        environment.set_state(pt.RETIRED_STATE, None)
