"""Finding and reading the configuration files: line numbers in every error, the search path of
``include/pipeline.yaml``, and the projects file it names.

An invalid file raises ``ConfigError`` naming the file, the line, the field and the reason. Loading is cheap (a
small YAML file): the DAG files load it when they are parsed and pass its values to the operators, which read no
file while they run.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from findings_provider.config.models import ConfigError, PipelineConfig, ProjectsFile

#: Where the configuration lives unless ``FINDINGS_PIPELINE_CONFIG`` says otherwise: ``<project>/include``.
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[3] / "include" / "pipeline.yaml"
#: Where a wheel installs the DAG files and the default configuration (``data-files`` in pyproject.toml).
INSTALLED_SHARE = Path(sys.prefix) / "share" / "findings-airflow"
#: libyaml's safe loader where PyYAML has it (several times faster: a DAG file's parse loads the configuration).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)



def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (the deepest node found)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if k.value == key), None)
            if child is None:
                key_node = next((k for k, _ in node.value if k.value == key), None)
                return key_node.start_mark.line + 1 if key_node is not None else line
            node = child
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        line = node.start_mark.line + 1
    return line


def load_yaml_model(path: str | Path, model: type[BaseModel]) -> Any:
    """Load ``path`` into ``model``; any problem raises ``ConfigError`` with file, line, field and reason."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=_LOADER) or {}  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "unknown line"
        raise ConfigError(f"{path}, {where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}, line 1: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        node = yaml.compose(text, Loader=_LOADER)  # the nodes know their lines: read again only for an error
        err = exc.errors(include_url=False)[0]
        loc = tuple(err.get("loc", ()))
        field = ".".join(str(p) for p in loc) or "(top level)"
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        given = err.get("input")
        shown = "" if isinstance(given, (dict, list)) else f" = {given!r}"
        raise ConfigError(f"{path}, line {_line_of(node, loc)}: field '{field}'{shown}: {msg}") from None


def config_path() -> Path:
    """``$FINDINGS_PIPELINE_CONFIG``, else ``<project>/include/pipeline.yaml`` (a checkout), else
    ``$AIRFLOW_HOME/include/pipeline.yaml`` (your copy), else the one the wheel installed
    (``<prefix>/share/findings-airflow/include/pipeline.yaml``)."""
    if os.environ.get("FINDINGS_PIPELINE_CONFIG"):
        return Path(os.environ["FINDINGS_PIPELINE_CONFIG"])
    if DEFAULT_CONFIG_PATH.exists():
        return DEFAULT_CONFIG_PATH
    home = Path(os.environ.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "include" / "pipeline.yaml"
    installed = INSTALLED_SHARE / "include" / "pipeline.yaml"
    return installed if not home.exists() and installed.exists() else home


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime: float) -> PipelineConfig:
    cfg = load_yaml_model(path, PipelineConfig)
    cfg.source = Path(path)
    return cfg


def load_pipeline_config(path: str | Path | None = None) -> PipelineConfig:
    """The validated pipeline configuration (cached per file version)."""
    p = Path(path) if path else config_path()
    try:
        mtime = p.stat().st_mtime
    except OSError:
        raise ConfigError(f"{p}: pipeline configuration not found (set FINDINGS_PIPELINE_CONFIG)") from None
    return _load_cached(str(p), mtime)


def projects_file_path(cfg: PipelineConfig) -> Path:
    """Where ``cfg``'s ``project_settings.file`` is (a relative path: beside the pipeline configuration file)."""
    base = cfg.source.parent if cfg.source else DEFAULT_CONFIG_PATH.parent
    return base / cfg.project_settings.file


def load_projects_file(cfg: PipelineConfig | None = None, path: str | Path | None = None) -> ProjectsFile:
    """The validated projects file: ``path``, else the one ``cfg`` (else the pipeline configuration found) names."""
    return load_yaml_model(path if path is not None else projects_file_path(cfg or load_pipeline_config()),
                           ProjectsFile)
