"""The base of the operators: the hooks of the connections given, the run id on the warehouse, the client closed
after the run, and errors no task retry can fix failing the task at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from findings_provider.client import AuthenticationError, PolicyApiRetiredError, RateLimitedError, ServerError
from findings_provider.compat import AirflowFailException
from findings_provider.config import ConfigError
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.pipeline.approval import ApprovalError
from findings_provider.values import ParamError
from findings_provider.warehouse import Warehouse, make_engine
from fixtures import ops
from task_context import make_context

pytestmark = pytest.mark.integration


class Probe(FindingsBaseOperator):
    """Lists the policies, notes them in the warehouse, then raises ``error`` when one is given."""

    def __init__(self, *, error: Exception | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def run(self, context: Any) -> dict[str, Any]:
        self.client_seen = self.api_hook.client
        policies = [p.id for p in self.client_seen.list_policies()]
        warehouse = self.warehouse_hook.get_warehouse()
        warehouse.set_state("probe", policies)
        if self.error is not None:
            raise self.error
        return {"policies": policies, "run_id": warehouse.run_id}


def test_the_connection_ids_are_templated_and_name_the_hooks_connections() -> None:
    assert Probe.template_fields == ("findings_conn_id", "warehouse_conn_id")
    op = Probe(task_id="probe", findings_conn_id="api_b", warehouse_conn_id="wh_b")
    assert (op.api_hook.findings_conn_id, op.warehouse_hook.warehouse_conn_id) == ("api_b", "wh_b")
    default = Probe(task_id="probe")
    assert (default.findings_conn_id, default.warehouse_conn_id) == ("findings_api_default",
                                                                     "findings_warehouse_default")


def test_a_run_uses_the_connections_it_names_not_the_defaults(fresh, warehouse, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_API_B", fresh.connection_json())
    monkeypatch.delenv("AIRFLOW_CONN_FINDINGS_API_DEFAULT")
    monkeypatch.setenv("AIRFLOW_CONN_WH_B", f"sqlite:///{tmp_path / 'b.db'}")

    result = Probe(task_id="probe", findings_conn_id="api_b", warehouse_conn_id="wh_b").execute(
        make_context("manual__b"))

    assert result == {"policies": ["2101", "2102"], "run_id": "manual__b"}  # the context's run id reached it
    assert len(ops(fresh, 0, "policies_list")) == 1
    assert Warehouse(make_engine(f"sqlite:///{tmp_path / 'b.db'}")).get_state("probe") == ["2101", "2102"]
    assert warehouse.get_state("probe") is None  # the default warehouse was not touched


@pytest.mark.parametrize("failing", [False, True])
def test_the_client_is_closed_after_the_run_and_the_service_it_used_kept(fresh, warehouse, failing) -> None:
    op = Probe(task_id="probe", error=ServerError("boom", status_code=503) if failing else None)
    if failing:
        with pytest.raises(ServerError):
            op.execute(make_context())
    else:
        op.execute(make_context())
    assert "client" not in op.api_hook.__dict__
    assert op.client_seen._http.is_closed
    assert op._api_used == (fresh.base_url, fresh.deployment_id, fresh.deployment_slug)


@pytest.mark.parametrize("error", [
    ConfigError("pipeline.yaml, line 3: field 'x': bad"),
    ParamError("lookback_days = 0 must be >= 1"),
    ApprovalError("not triaging: no answer is recorded"),
    AuthenticationError("token revoked", status_code=401),
    PolicyApiRetiredError("the policy API is retired", status_code=410),
], ids=lambda e: type(e).__name__)
def test_an_error_no_retry_can_fix_fails_the_task_at_once_with_its_message(fresh, warehouse, error) -> None:
    with pytest.raises(AirflowFailException) as raised:
        Probe(task_id="probe", error=error).execute(make_context())
    assert str(raised.value) == f"{type(error).__name__}: {error}"
    assert raised.value.__cause__ is error


@pytest.mark.parametrize("error", [
    ServerError("unavailable", status_code=503),
    RateLimitedError("slow down", status_code=429),
    RuntimeError("something else"),
], ids=lambda e: type(e).__name__)
def test_an_error_a_retry_may_fix_is_raised_as_it_is(fresh, warehouse, error) -> None:
    with pytest.raises(type(error)) as raised:
        Probe(task_id="probe", error=error).execute(make_context())
    assert raised.value is error


def test_no_operator_shadows_a_method_of_base_operator_and_dry_run_stays_templated() -> None:
    # a templated ``dry_run`` attribute once hid BaseOperator.dry_run(); the argument keeps its name, the attribute
    # holding it is ``is_dry_run``
    import inspect

    from airflow.sdk import BaseOperator
    from findings_provider.assets import TRIAGE
    from findings_provider.operators import findings, policies, projects, tickets, triage

    required: dict[str, dict[str, Any]] = {
        "PlanTriageOperator": {"policies": []}, "BulkTriageOperator": {"policies": []},
        "CreateTicketsOperator": {"policies": []}, "ProposePolicyChangesOperator": {"thresholds": []},
        "PublishAssetOperator": {"asset": TRIAGE, "changed": 1},
    }
    methods = {name for name, value in inspect.getmembers(BaseOperator) if callable(value)}
    with_dry_run = []
    for module in (findings, policies, projects, tickets, triage):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, BaseOperator) or cls.__module__ != module.__name__:
                continue
            assert not set(cls.template_fields) & methods, cls
            if "dry_run" in inspect.signature(cls.__init__).parameters:
                assert "is_dry_run" in cls.template_fields, cls
                operator = cls(task_id="t", dry_run="{{ params.dry_run }}", **required.get(cls.__name__, {}))
                assert vars(operator)["is_dry_run"] == "{{ params.dry_run }}"
                assert inspect.ismethod(operator.dry_run), cls
                with_dry_run.append(cls.__name__)
    assert len(with_dry_run) == 8, with_dry_run


#: What finds and reads this repository's configuration files: only a DAG file (when it is parsed) may call them.
CONFIG_READERS = {"load_pipeline_config", "load_projects_file", "config_path"}


def config_reads(source: str) -> set[str]:
    """The names of :data:`CONFIG_READERS` that ``source`` uses (called, imported or referenced)."""
    import ast

    used = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            used.update(alias.name for alias in node.names)
    return used & CONFIG_READERS


def test_no_operator_sensor_or_notifier_reads_the_pipeline_configuration_while_it_runs() -> None:
    # they take their inputs as arguments (the DAG files pass pipeline.yaml's values, loaded when they are parsed):
    # what a task runs with is what the DAG was parsed with, and they work with no include/ anywhere
    # (tests/install: a user's own DAG)
    import findings_provider

    package = Path(findings_provider.__file__).parent
    folders = ("operators", "sensors", "triggers", "hooks")
    modules = [package / "alerts.py", package / "notifications.py",
               *(p for folder in folders for p in (package / folder).glob("*.py"))]
    assert len(modules) > 15
    readers = {str(p.relative_to(package)): found for p in modules if (found := config_reads(p.read_text()))}
    assert readers == {}
    assert config_reads("from findings_provider.config import load_pipeline_config\n") == {"load_pipeline_config"}
    assert config_reads("import findings_provider.config as c\nc.load_projects_file()\n") == {"load_projects_file"}
