"""The two distributions built from this repository, read from their project files (fast: nothing is built; the
``install`` tests build and install the wheels).

``findings-airflow`` (pyproject.toml) is what the pipelines need: the provider, the DAGs and their configuration.
``findings-emulator`` (include/pyproject.toml) is the local emulator of the API, which the provider's ``emulator``
extra asks for at the same version. Nothing the base install runs imports the emulator.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import findings_emulator
import findings_provider
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROVIDER = tomllib.loads((REPO / "pyproject.toml").read_text())
EMULATOR = tomllib.loads((REPO / "include" / "pyproject.toml").read_text())
#: The distribution of each top-level module the emulator imports (starlette: FastAPI's own, pinned by it).
DISTRIBUTION_OF = {"fastapi": "fastapi", "starlette": "fastapi", "uvicorn": "uvicorn", "sqlalchemy": "sqlalchemy",
                   "pydantic": "pydantic", "orjson": "orjson", "httpx": "httpx"}


def imported_top_levels(folder: Path) -> set[str]:
    """The top-level names of every absolute import in the Python files under ``folder``."""
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return names


def test_the_provider_distribution_carries_no_emulator() -> None:
    found = PROVIDER["tool"]["setuptools"]["packages"]["find"]
    assert found["where"] == ["plugins"]
    assert found["include"] == ["findings_provider*"]
    assert "findings-emulator" not in PROVIDER["project"].get("scripts", {})
    dependencies = {canonicalize_name(Requirement(r).name) for r in PROVIDER["project"]["dependencies"]}
    assert "uvicorn" not in dependencies
    assert "findings-emulator" not in dependencies


def test_the_emulator_extra_is_the_emulator_distribution_at_its_version() -> None:
    [extra] = (Requirement(r) for r in PROVIDER["project"]["optional-dependencies"]["emulator"])
    assert canonicalize_name(extra.name) == canonicalize_name(EMULATOR["project"]["name"]) == "findings-emulator"
    assert str(extra.specifier) == f"=={findings_emulator.__version__}"
    assert findings_emulator.__version__ == PROVIDER["project"]["version"] == findings_provider.__version__


def test_the_emulator_distribution_declares_what_it_imports_and_its_command() -> None:
    project = EMULATOR["project"]
    assert project["scripts"] == {"findings-emulator": "findings_emulator.cli:main"}
    assert EMULATOR["tool"]["setuptools"]["packages"]["find"]["include"] == ["findings_emulator*"]
    declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    package = Path(findings_emulator.__file__).parent
    third_party = imported_top_levels(package) - set(sys.stdlib_module_names) - {"findings_emulator"}
    assert third_party <= set(DISTRIBUTION_OF), third_party - set(DISTRIBUTION_OF)
    assert {DISTRIBUTION_OF[name] for name in third_party} == declared
    assert "findings_provider" not in imported_top_levels(package)


def test_nothing_the_base_install_runs_imports_the_emulator() -> None:
    for folder in (REPO / "plugins" / "findings_provider", REPO / "dags"):
        assert "findings_emulator" not in imported_top_levels(folder), folder
