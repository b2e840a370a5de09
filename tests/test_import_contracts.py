"""The import contracts of ``make lint`` (``[tool.importlinter]`` in pyproject.toml) hold, and each one fails on the
import it forbids: an upward import, a circle between two modules of a package, Airflow below the hooks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROVIDER = ROOT / "plugins" / "findings_provider"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(tmp_path: Path, module: str | None = None, line: str = "") -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over a copy of the provider in which ``module`` (a path under the package) got ``line``."""
    copy = tmp_path / "findings_provider"
    shutil.copytree(PROVIDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if module is not None:
        with open(copy / module, "a") as source:
            source.write(f"\n{line}\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([str(LINT_IMPORTS), "--config", "pyproject.toml", "--no-cache"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_provider_keeps_every_contract(tmp_path: Path) -> None:
    result = lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("client/limits.py", "from findings_provider.operators import base", "Layers"),
    ("warehouse/schema.py", "from findings_provider.pipeline import summary", "Layers"),
    ("pipeline/alert.py", "from findings_provider.hooks import findings_api", "Layers"),
    ("governance/common.py", "import airflow.sdk", "Nothing below the hooks imports Airflow"),
    ("names.py", "from findings_provider import dashboard", "No circle"),
], ids=["client-imports-operators", "warehouse-imports-pipeline", "pipeline-imports-hooks", "airflow-in-governance",
        "names-dashboard-circle"])
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    result = lint_imports(tmp_path, module, line)
    assert result.returncode != 0, result.stdout[-3000:]
    broken_section = result.stdout.split("Broken contracts", 1)[-1]
    assert broken in broken_section, result.stdout[-3000:]
    assert module.removesuffix(".py").replace("/", ".") in broken_section, result.stdout[-3000:]


#: What a DAG file's parse must not import: it pays for the wiring (the operator classes, the pipeline
#: configuration), not for what only a running task uses. Third-party modules that the provider's own modules or
#: the DAG file must not import while the file is parsed (Airflow loads SQLAlchemy and httpx itself; an import
#: statement executed by the provider still counts) ...
HEAVY_LIBRARIES = ("sqlalchemy", "httpx", "orjson", "alembic", "psycopg2", "pandas", "matplotlib", "multiprocessing",
                   "concurrent.futures.process")
#: ... and the provider's modules that must not be loaded: the warehouse (SQLAlchemy tables, row building), the
#: HTTP client and its pydantic models, the triggers (the async client), the pipelines' work.
LAZY_PROVIDER_MODULES = ("findings_provider.warehouse", "findings_provider.client.client",
                         "findings_provider.client.models", "findings_provider.client.requests",
                         "findings_provider.triggers", "findings_provider.pipeline.extraction",
                         "findings_provider.pipeline.tickets", "findings_provider.pipeline.triage",
                         "findings_provider.pipeline.scans", "findings_provider.governance.sbom",
                         "findings_provider.governance.dependency_inventory")
DAG_FILES = sorted(p for p in (ROOT / "dags").glob("*.py") if not p.name.startswith("_"))

#: Parses one DAG file as the DAG processor does (its ``airflow.*`` imports loaded first), recording every import
#: statement that a provider module or the DAG file executes, and the provider modules loaded.
PARSE_RECORDING_IMPORTS = """
import builtins, importlib, json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.utils.file import iter_airflow_imports
path = sys.argv[1]
for module in iter_airflow_imports(path):
    try:
        importlib.import_module(module)
    except Exception:
        pass
imported, original = [], builtins.__import__
def recording(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if level == 0 and importer.startswith(("findings_provider", "unusual_prefix_")):
        imported.append([importer, name])
    return original(name, globals, locals, fromlist, level)
builtins.__import__ = recording
bag = DagBag(dag_folder=path)
builtins.__import__ = original
print("PARSE " + json.dumps({"errors": {str(k): v for k, v in bag.import_errors.items()}, "imported": imported,
                             "modules": sorted(m for m in sys.modules if m.startswith("findings_provider"))}))
"""


def parse_imports(dag_file: Path, plugins: Path = ROOT / "plugins") -> dict[str, Any]:
    """What parsing ``dag_file`` in a fresh interpreter imported: the heavy libraries each provider module (or the
    DAG file) asked for, and the lazy provider modules loaded; with the provider found in ``plugins``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(ROOT / "include")]),
           "FINDINGS_PIPELINE_CONFIG": str(ROOT / "include" / "pipeline.yaml")}
    out = subprocess.run([sys.executable, "-c", PARSE_RECORDING_IMPORTS, str(dag_file)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=180, check=True).stdout
    result = json.loads(next(line for line in out.splitlines() if line.startswith("PARSE "))[6:])
    assert result["errors"] == {}, result["errors"]
    heavy = sorted({f"{name} <- {importer.split('_', 3)[-1] if importer.startswith('unusual') else importer}"
                    for importer, name in result["imported"]
                    if any(name == lib or name.startswith(f"{lib}.") for lib in HEAVY_LIBRARIES)})
    lazy = sorted(m for m in result["modules"]
                  if any(m == lazy or m.startswith(f"{lazy}.") for lazy in LAZY_PROVIDER_MODULES))
    return {"heavy": heavy, "lazy": lazy}


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=lambda p: p.stem)
def test_a_dag_files_parse_imports_only_the_wiring(dag_file: Path) -> None:
    assert parse_imports(dag_file) == {"heavy": [], "lazy": []}


@pytest.mark.parametrize(("module", "line", "dag", "kind", "found"), [
    ("operators/tickets.py", "import sqlalchemy", "ticket_creation", "heavy",
     "sqlalchemy <- findings_provider.operators.tickets"),
    ("client/__init__.py", "from findings_provider.client.client import FindingsClient", "scan_monitoring", "lazy",
     "findings_provider.client.client"),
], ids=["sqlalchemy-in-an-operator", "eager-client-package"])
def test_a_heavy_import_at_module_level_is_found(tmp_path: Path, module: str, line: str, dag: str, kind: str,
                                                 found: str) -> None:
    """The check above fails on a copy of the provider in which ``module`` got ``line`` (at module level)."""
    copy = tmp_path / "findings_provider"
    shutil.copytree(PROVIDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / module, "a") as source:
        source.write(f"\n{line}\n")
    assert found in parse_imports(ROOT / "dags" / f"{dag}.py", plugins=tmp_path)[kind]
