"""Every file in ``dags/``: it is one of the pipeline DAGs, imports alone and cheaply, and follows the conventions.

One test for every DAG file, so a new DAG is checked without an edit here: it only needs its id in
``dag_defaults.PIPELINE_DAGS`` (the one list the launcher, the dashboard and the tests read). What is particular to
a DAG (its schedule, its assets, its runs) is tested in ``test_pipeline_dags.py`` and ``test_governance_dags.py``.
How long a file takes to parse is measured by ``bench/dag_parse.py`` (``make bench``), not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from findings_provider.dag_defaults import START_DATE
from findings_provider.names import API_POOL, APPROVAL_DAGS, OWNER, PIPELINE_DAGS
from findings_provider.notifications import FindingsAlertNotifier

DAGS = Path(__file__).resolve().parents[2] / "dags"
FILES = sorted(p for p in DAGS.glob("*.py") if not p.name.startswith("_"))
#: Modules a DAG file must not import at parse time (the DAG processor parses every file every 30 s or so).
HEAVY = ("pandas", "matplotlib", "psycopg2", "alembic", "findings_emulator")

PARSE_SCRIPT = textwrap.dedent(
    """
    import importlib, json, socket, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils.file import iter_airflow_imports
    path, heavy = sys.argv[1], sys.argv[2:]
    for module in iter_airflow_imports(path):  # what the DAG processor pre-imports before parsing a file
        try:
            importlib.import_module(module)
        except Exception:
            pass
    def no_network(*args, **kwargs):
        raise AssertionError("network access while parsing a DAG file")
    socket.socket.connect = no_network
    loaded = {m for m in heavy if m in sys.modules}  # by Airflow itself (3.2's imports load alembic): not the file's
    bag = DagBag(dag_folder=path)
    print("PARSE " + json.dumps({"dags": sorted(bag.dag_ids),
                                 "heavy": sorted(m for m in heavy if m in sys.modules and m not in loaded),
                                 "errors": {str(k): v for k, v in bag.import_errors.items()}}))
    """
)


@pytest.fixture(scope="module")
def dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_the_dag_files_are_the_pipeline_dags() -> None:
    assert sorted(p.stem for p in FILES) == sorted(PIPELINE_DAGS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_parses_alone_cheaply_and_offline(path: Path, tmp_path: Path) -> None:
    """In a fresh interpreter, after the pre-imports the DAG processor does: one DAG named after its file, no
    import error, no network access, none of the heavy modules loaded by parsing it."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", PARSE_SCRIPT, str(path), *HEAVY], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    result = json.loads(next(line for line in out.splitlines() if line.startswith("PARSE "))[6:])
    assert result == {"dags": [path.stem], "heavy": [], "errors": {}}


@pytest.mark.parametrize("dag_id", PIPELINE_DAGS)
def test_conventions(dagbag: Any, dag_id: str) -> None:
    """Docs that explain every param, typed and described params, one run at a time, no catch-up, tags, the shared
    settings (``dag_settings``: native templates, the start date), and every task owned by the team, retried with
    backoff, alerting when it fails for good, in the API pool (or the default pool when it makes no API call)."""
    assert dagbag.import_errors == {}
    dag = dagbag.dags[dag_id]
    assert Path(dag.fileloc).stem == dag_id
    assert dag.tags
    assert dag.doc_md
    assert "**Params**" in dag.doc_md
    for name, param in dag.params.items():
        assert f"`{name}`" in dag.doc_md, f"doc_md of {dag_id} does not explain param {name}"
        assert param.description, (dag_id, name)
        assert param.schema.get("type"), (dag_id, name)
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert dag.render_template_as_native_obj is True
    assert dag.start_date == START_DATE
    for task in dag.tasks:
        callbacks = task.on_failure_callback if isinstance(task.on_failure_callback, list) else [
            task.on_failure_callback]
        assert any(isinstance(c, FindingsAlertNotifier) for c in callbacks), f"{dag_id}.{task.task_id} never alerts"
        assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"
        assert task.retry_exponential_backoff, f"{dag_id}.{task.task_id} has no exponential backoff"
        assert task.owner == OWNER, f"{dag_id}.{task.task_id}"
        assert task.pool in (API_POOL, "default_pool"), f"{dag_id}.{task.task_id}"


def test_every_approval_is_the_one_pattern_of_approval_steps(dagbag: Any) -> None:
    """Every Human-in-the-loop task of every DAG is the one approval pattern (``dag_defaults.approval_steps``): a
    ``PlanApprovalOperator`` of a ``pipeline.approval`` kind (it records the answer, which the write checks), asked
    only when the ``check_approval`` branch finds the plan ``needs_approval``, Reject when unanswered, telling
    someone, in front of the write, which the branch reaches directly otherwise. A second pattern fails here; the
    DAGs that ask are ``APPROVAL_DAGS`` (whose runs the alerts treat as waiting for a person)."""
    from airflow.providers.standard.operators.hitl import HITLOperator
    from airflow.sdk import TriggerRule
    from findings_provider.operators.approval import ApprovalBranchOperator, PlanApprovalOperator
    from findings_provider.pipeline import approval

    asking = set()
    for dag_id in PIPELINE_DAGS:
        dag = dagbag.dags[dag_id]
        for task in dag.tasks:
            if not isinstance(task, HITLOperator):
                continue
            where = f"{dag_id}.{task.task_id}"
            asking.add(dag_id)
            assert isinstance(task, PlanApprovalOperator), f"{where}: an approval not built by approval_steps"
            assert task.kind in approval.KINDS, where
            assert task.defaults == ["Reject"], where
            assert any(isinstance(n, FindingsAlertNotifier) and n.kind == "approval_waiting" for n in task.notifiers)
            branches = [t for t in task.upstream_list if isinstance(t, ApprovalBranchOperator)]
            assert len(branches) == 1, f"{where}: not asked from one check_approval branch"
            check = branches[0]
            assert (check.task_id, check.approval_task_id) == ("check_approval", task.task_id), where
            assert task.downstream_task_ids == {check.proceed_task_id}, where
            assert check.downstream_task_ids == {task.task_id, check.proceed_task_id}, where
            write = dag.get_task(check.proceed_task_id)
            assert write.trigger_rule == TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS, where  # runs when no one is asked
    assert asking == set(APPROVAL_DAGS)


def test_the_scan_wait_defers_whatever_airflows_default(dagbag: Any) -> None:
    # the sensor follows [operators] default_deferrable (False unless set); the pipeline's scans run for minutes to
    # hours, so its DAG asks for the triggerer itself
    wait = dagbag.dags["scan_monitoring"].get_task("wait_for_scan")
    assert wait.partial_kwargs["deferrable"] is True
    # so does the SBOM export, whose jobs take several polls of growing intervals
    assert dagbag.dags["dependency_inventory"].get_task("export_sboms").deferrable is True
