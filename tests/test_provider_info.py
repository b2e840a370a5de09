"""Provider metadata: get_provider_info(), its entry point, and what the installed Airflow makes of it.

The ``airflow`` commands and the ProvidersManager run in subprocesses with a throw-away AIRFLOW_HOME, so
neither the user's Airflow home nor the global ProvidersManager state of this test process is touched.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import findings_provider
import pytest
from findings_provider import get_provider_info

AIRFLOW = Path(sys.executable).with_name("airflow")
PACKAGE = "findings-airflow"
HOOK_CLASS = "findings_provider.hooks.findings_api.FindingsApiHook"


# --- the dictionary -----------------------------------------------------------------------------------------


def test_provider_info_structure() -> None:
    info = get_provider_info()
    assert info["package-name"] == PACKAGE
    assert info["name"]
    assert info["description"]
    assert info["versions"] == [findings_provider.__version__]
    [conn] = info["connection-types"]
    assert conn["connection-type"] == "findings_api"
    assert conn["hook-class-name"] == HOOK_CLASS
    assert conn["hook-name"] == "Security Findings API"
    assert {
        "deployment_slug",
        "deployment_id",
        "timeout",
        "verify",
        "max_retries",
        "allow_insecure_http",
    } <= set(conn["conn-fields"])
    for name, spec in conn["conn-fields"].items():
        assert spec["label"], name
        assert "null" in spec["schema"]["type"], name  # every extra is optional in the form
    behaviour = conn["ui-field-behaviour"]
    assert set(behaviour["hidden-fields"]) == {"schema", "port", "login"}
    assert behaviour["relabeling"] == {"host": "Base URL", "password": "API token"}
    assert any(HOOK_CLASS.rsplit(".", 1)[0] in h["python-modules"] for h in info["hooks"])


def test_provider_info_matches_airflows_schema() -> None:
    from airflow.providers_manager import _create_provider_info_schema_validator

    errors = [e.message for e in _create_provider_info_schema_validator().iter_errors(get_provider_info())]
    assert errors == []


def test_every_module_and_class_named_in_provider_info_imports() -> None:
    info = get_provider_info()
    modules = {
        m
        for section in ("hooks", "operators", "sensors", "triggers")
        for e in info.get(section, [])
        for m in e["python-modules"]
    }
    assert modules
    for module in sorted(modules):
        importlib.import_module(module)
    named = [c["hook-class-name"] for c in info["connection-types"]] + info.get("extra-links", []) + [
        p["plugin-class"] for p in info["plugins"]]
    assert "findings_provider.notifications.FindingsAlertNotifier" in info["notifications"]
    for dotted in named + info["notifications"]:
        module, _, name = dotted.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), dotted


def _classes(module: str, base: type) -> list[str]:
    """Public subclasses of ``base`` that ``module`` defines, dotted."""
    loaded = importlib.import_module(module)
    return [f"{module}.{name}" for name, value in vars(loaded).items()
            if isinstance(value, type) and issubclass(value, base) and value.__module__ == module
            and not name.startswith("_")]


def test_every_public_module_and_class_is_declared() -> None:
    """A new operator, sensor, trigger or hook module, operator link, notifier or plugin is declared without an
    edit to the provider info (it is discovered); a module that holds none is not declared."""
    from airflow.plugins_manager import AirflowPlugin
    from airflow.sdk import BaseHook, BaseNotifier, BaseOperator, BaseSensorOperator
    from airflow.triggers.base import BaseTrigger

    info = get_provider_info()
    bases = {"hooks": BaseHook, "operators": BaseOperator, "sensors": BaseSensorOperator, "triggers": BaseTrigger}
    for section, base in bases.items():
        [entry] = info[section]
        holding = {m for m in findings_provider._modules(section) if _classes(m, base)}
        assert set(entry["python-modules"]) == holding - {"findings_provider.operators.base"}, section
    operators = [c for m in findings_provider._modules("operators") for c in _classes(m, BaseOperator)]
    links = set()
    for dotted in operators:
        module, _, name = dotted.rpartition(".")
        for link in getattr(importlib.import_module(module), name).operator_extra_links:
            links.add(f"{type(link).__module__}.{type(link).__name__}")
    assert links
    assert links <= set(info["extra-links"])
    assert set(info["notifications"]) == set(_classes("findings_provider.notifications", BaseNotifier))
    plugins = {p["plugin-class"] for p in info["plugins"]}
    assert plugins == set(_classes("findings_provider.dashboard.plugin", AirflowPlugin))


def test_entry_point_resolves_to_get_provider_info() -> None:
    [ep] = [
        ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("findings_provider")
    ]
    assert ep.value == "findings_provider:get_provider_info"
    assert ep.dist is not None
    assert ep.dist.name == PACKAGE
    assert ep.load() is get_provider_info


# --- what Airflow sees (subprocesses) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
        }
    )
    return env


def run_airflow(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(AIRFLOW), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def json_output(text: str) -> list[dict]:
    """The JSON document of ``-o json`` output (ignoring any line a library prints before it)."""
    start = text.index("[")
    return json.loads(text[start:])


def test_airflow_providers_list_shows_the_provider(airflow_env: dict[str, str]) -> None:
    providers = {
        p["package_name"]: p for p in json_output(run_airflow(airflow_env, "providers", "list", "-o", "json"))
    }
    assert PACKAGE in providers
    assert providers[PACKAGE]["version"] == findings_provider.__version__
    assert providers[PACKAGE]["description"] == get_provider_info()["description"].rstrip(
        "."
    )  # Airflow trims it


def test_airflow_providers_get(airflow_env: dict[str, str]) -> None:
    [row] = json_output(run_airflow(airflow_env, "providers", "get", PACKAGE, "-o", "json"))
    assert row == {"Provider": PACKAGE, "Version": findings_provider.__version__}
    [full] = json_output(run_airflow(airflow_env, "providers", "get", PACKAGE, "--full", "-o", "json"))
    assert full["connection-types"][0]["connection-type"] == "findings_api"


def test_airflow_providers_hooks_lists_the_connection_type(airflow_env: dict[str, str]) -> None:
    hooks = {
        h["connection_type"]: h
        for h in json_output(run_airflow(airflow_env, "providers", "hooks", "-o", "json"))
    }
    assert "findings_api" in hooks
    assert hooks["findings_api"] == {
        "connection_type": "findings_api",
        "class": HOOK_CLASS,
        "conn_id_attribute_name": "findings_conn_id",
        "package_name": PACKAGE,
        "hook_name": "Security Findings API",
    }


PROBE = """
import json
from airflow.providers_manager import ProvidersManager

pm = ProvidersManager()
widgets = {
    name: {"field_name": w.field_name, "package": w.package_name, "hook": w.hook_class_name, "field": w.field}
    for name, w in pm.connection_form_widgets.items()
    if name.startswith("extra__findings_api__")
}
print(json.dumps({
    "behaviour": pm.field_behaviours.get("findings_api"),
    "widgets": widgets,
    "hook": pm.hooks["findings_api"].hook_class_name,
    "testable": pm.hooks["findings_api"].connection_testable,
}))
"""


def test_connection_form_in_the_ui(airflow_env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout.strip().splitlines()[-1])
    behaviour = data["behaviour"]
    assert set(behaviour["hidden_fields"]) == {"schema", "port", "login"}
    assert behaviour["relabeling"] == {"host": "Base URL", "password": "API token"}
    assert behaviour["placeholders"]["extra__findings_api__deployment_slug"] == "acme"
    widgets = data["widgets"]
    assert {"extra__findings_api__deployment_slug", "extra__findings_api__deployment_id"} <= set(widgets)
    slug = widgets["extra__findings_api__deployment_slug"]
    assert slug["field_name"] == "deployment_slug"
    assert slug["package"] == PACKAGE
    assert slug["hook"] == HOOK_CLASS
    assert slug["field"]["schema"]["title"] == "Deployment slug"
    assert widgets["extra__findings_api__allow_insecure_http"]["field"]["value"] is False
    assert data["hook"] == HOOK_CLASS
    assert data["testable"] is True


UI_API_PROBE = """
import json
from fastapi.testclient import TestClient
from airflow.api_fastapi.app import create_app

response = TestClient(create_app("core")).get("/ui/connections/hook_meta")
assert response.status_code == 200, response.text
print(json.dumps([m for m in response.json() if m["connection_type"] == "findings_api"]))
"""


def test_connection_form_through_the_ui_api(airflow_env: dict[str, str]) -> None:
    """The fields the Airflow UI's connection form renders, as its own API serves them (``hook_meta``)."""
    env = {**airflow_env, "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
    run_airflow(env, "db", "migrate")
    result = subprocess.run(
        [sys.executable, "-c", UI_API_PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    [meta] = json.loads(result.stdout.strip().splitlines()[-1])
    assert meta["hook_class_name"] == HOOK_CLASS
    assert meta["hook_name"] == "Security Findings API"
    standard = meta["standard_fields"]
    assert {name for name in ("port", "login") if standard[name]["hidden"]} == {"port", "login"}
    declared_behaviour = get_provider_info()["connection-types"][0]["ui-field-behaviour"]
    assert standard["host"] == {"hidden": False, "title": "Base URL",
                                "placeholder": declared_behaviour["placeholders"]["host"]}
    assert standard["password"]["title"] == "API token"
    assert not standard["password"]["hidden"]
    extra = meta["extra_fields"]
    # every field the hook declares is rendered, with its title and default
    declared = get_provider_info()["connection-types"][0]["conn-fields"]
    assert set(extra) == set(declared)
    for name, field in declared.items():
        assert extra[name]["schema"]["title"] == field["label"], name
        assert extra[name]["schema"].get("default") == field["schema"].get("default"), name
    assert extra["deployment_slug"]["schema"]["title"] == "Deployment slug"
    assert extra["allow_insecure_http"]["value"] is False
    assert extra["tags_body"]["schema"]["enum"] == ["array", "object", None]


@pytest.mark.parametrize("lazy", ["True", "False"])
def test_airflow_loads_the_dashboard_plugin_once_whatever_provider_discovery(
    airflow_env: dict[str, str], lazy: str
) -> None:
    """Declared in the provider info (loaded when providers are discovered eagerly) and as an ``airflow.plugins``
    entry point (loaded always): Airflow shows it once, with its app and its React apps (navigation, DAG, run and
    home-page widget), all from the one bundle the app serves."""
    env = {**airflow_env, "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": lazy}
    [declared] = get_provider_info()["plugins"]
    plugins = [p for p in json_output(run_airflow(env, "plugins", "-o", "json")) if p["name"] == declared["name"]]
    assert len(plugins) == 1
    [app] = plugins[0]["fastapi_apps"]
    assert app["url_prefix"] == "/findings-dashboard"
    apps = {a["destination"]: a for a in plugins[0]["react_apps"]}
    assert set(apps) == {"nav", "dag", "dag_run", "dashboard"}
    assert apps["nav"]["url_route"] == "findings"
    assert {a["bundle_url"] for a in apps.values()} == {"/findings-dashboard/static/findings-dashboard.js"}
    assert not plugins[0].get("external_views")
