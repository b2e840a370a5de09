"""Bad configuration and bad DAG params are refused with a message naming the offending field.

- ``include/pipeline.yaml`` and ``include/projects.yaml``: the shipped files with one field broken at random
  (a value of the wrong type, an unknown key, a missing required key) are refused with ``ConfigError`` naming
  the file, the field's dotted path and the line it is on; the unbroken files load.
- DAG params: any run conf with a value of the wrong type or out of range is refused, before anything runs,
  with ``ParamValidationError`` naming that param (checked against the params the scheduler holds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chaos.harness import tally
from findings_provider.config import (
    ConfigError,
    PipelineConfig,
    ProjectsFile,
    load_pipeline_config,
    load_projects_file,
    load_yaml_model,
)
from findings_provider.names import PIPELINE_DAGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = yaml.safe_load((ROOT / "include" / "pipeline.yaml").read_text())
PROJECTS = yaml.safe_load((ROOT / "include" / "projects.yaml").read_text())
SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def leaves(node: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, value) of every scalar or list-of-scalars in a parsed YAML document."""
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in leaves(value, (*path, key))]
    if isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        return [leaf for i, value in enumerate(node) for leaf in leaves(value, (*path, i))]
    return [(path, node)]


def mappings(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every mapping in a parsed YAML document (where an unknown key can be added)."""
    found = [path] if isinstance(node, dict) else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += mappings(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += mappings(value, (*path, i))
    return found


def wrong_value(value: Any) -> Any:
    """A value no field of this type accepts."""
    if isinstance(value, bool):
        return "maybe"
    if isinstance(value, (int, float)):
        return "not-a-number"
    if isinstance(value, str):
        return {"nested": ["object"]}
    if isinstance(value, list):
        return {"not": "a list"}
    return {"nested": {"object": [1]}}  # null: an optional scalar, list or enum


def set_path(document: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        document = document[key]
    document[path[-1]] = value


def refused(tmp_path: Path, document: Any, model: type) -> ConfigError:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(ConfigError) as caught:
        load_yaml_model(path, model)
    return caught.value


def assert_names(error: ConfigError, path: tuple, tmp_path: Path) -> None:
    message = str(error)
    dotted = ".".join(str(p) for p in path)
    assert f"field '{dotted}" in message, message
    assert str(tmp_path / "config.yaml") in message
    line = int(message.split(", line ", 1)[1].split(":", 1)[0])
    lines = (tmp_path / "config.yaml").read_text().splitlines()
    last_key = next(str(p) for p in reversed(path) if not isinstance(p, int))
    # the line of the key, or of its value when that is a block starting on the next line
    near = lines[max(0, line - 3) : line]
    assert any(f"{last_key}:" in text or text.lstrip().startswith("-") for text in near), (line, near, message)


DOCUMENTS: dict[str, tuple[Any, type[BaseModel]]] = {
    "pipeline.yaml": (PIPELINE, PipelineConfig), "projects.yaml": (PROJECTS, ProjectsFile)}


@SETTINGS
@given(name=st.sampled_from(sorted(DOCUMENTS)), data=st.data())
def test_a_wrong_type_anywhere_is_refused_naming_the_field_and_line(name: str, data: Any,
                                                                     tmp_path_factory) -> None:
    tally("hypothesis.examples.config_wrong_types")
    original, model = DOCUMENTS[name]
    path, value = data.draw(st.sampled_from(leaves(original)), label="field")
    document = yaml.safe_load(yaml.safe_dump(original))
    set_path(document, path, wrong_value(value))
    tmp = tmp_path_factory.mktemp("cfg")
    assert_names(refused(tmp, document, model), path, tmp)


@SETTINGS
@given(name=st.sampled_from(sorted(DOCUMENTS)), data=st.data(), key=st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True))
def test_an_unknown_key_anywhere_is_refused_naming_it(name: str, data: Any, key: str, tmp_path_factory) -> None:
    """A typo (``dry_rn: true``) must not silently become the default."""
    tally("hypothesis.examples.config_unknown_keys")
    original, model = DOCUMENTS[name]
    where = data.draw(st.sampled_from(mappings(original)), label="mapping")
    document = yaml.safe_load(yaml.safe_dump(original))
    target = document
    for part in where:
        target = target[part]
    if key in target or (isinstance(target, dict) and key in model.model_fields and not where):
        return
    target[key] = True
    tmp = tmp_path_factory.mktemp("cfg")
    error = refused(tmp, document, model)
    assert_names(error, (*where, key), tmp)
    assert "Extra inputs are not permitted" in str(error)


REQUIRED = [("autotriage_triage", "policies", 0, "set"), ("autotriage_triage", "policies", 0, "issue_type"),
            ("ticket_creation", "policies", 0, "select"), ("ticket_creation", "policies", 1, "name"),
            ("policy_tuning", "rules", 0, "to_mode")]


@pytest.mark.parametrize("path", REQUIRED, ids=lambda p: ".".join(map(str, p)))
def test_a_missing_required_field_is_refused_naming_it(path: tuple, tmp_path: Path) -> None:
    document = yaml.safe_load(yaml.safe_dump(PIPELINE))
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    error = refused(tmp_path, document, PipelineConfig)
    assert f"field '{'.'.join(map(str, path))}'" in str(error)
    assert "Field required" in str(error)


def test_not_yaml_at_all_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("connections:\n  api_conn_id: x\n  : : broken [\n")
    with pytest.raises(ConfigError, match=r"line 3: not valid YAML"):
        load_yaml_model(path, PipelineConfig)


def test_the_shipped_files_load() -> None:
    config = load_pipeline_config(ROOT / "include" / "pipeline.yaml")
    assert config.autotriage_triage.policies
    assert load_projects_file(config).projects


# --- DAG params --------------------------------------------------------------------------------------------------

DAG_IDS = PIPELINE_DAGS


@pytest.fixture(scope="module")
def scheduler_params() -> dict[str, Any]:
    """Each DAG's params as the scheduler holds them (it validates a run's conf with these)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    params = {}
    for dag_id in DAG_IDS:
        dag = DagBag(dag_folder=str(ROOT / "dags" / f"{dag_id}.py")).dags[dag_id]
        params[dag_id] = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    return params


BAD_VALUES = st.one_of(st.text(max_size=8), st.integers(-10**6, 10**6), st.booleans(), st.none(),
                       st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                            max_size=2),
                       st.floats(allow_nan=False), st.lists(st.sampled_from(["sast", "bogus", "sca"]), max_size=3))


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(dag_id=st.sampled_from(DAG_IDS), data=st.data())
def test_any_invalid_run_conf_is_refused_naming_the_param(scheduler_params: dict[str, Any], dag_id: str,
                                                          data: Any) -> None:
    from findings_provider.compat import ParamValidationError

    tally("hypothesis.examples.dag_params")
    params = scheduler_params[dag_id]
    names = sorted(params.keys())
    if not names:
        return
    name = data.draw(st.sampled_from(names), label="param")
    value = data.draw(BAD_VALUES, label="value")
    schema = params.get_param(name).schema
    message: str | None
    try:
        params.deep_merge({name: value}).validate()
    except ParamValidationError as exc:
        message = str(exc)
    else:
        message = None
    if message is not None:
        assert f"param {name}" in message, message
        tally("dag_params.refused")
        return
    # accepted: then the value really is one the param's schema allows (and the operator copes with it)
    import jsonschema

    jsonschema.validate(value, schema)
    tally("dag_params.accepted")
