"""The import contracts of ``make lint`` (``[tool.importlinter]`` in pyproject.toml) hold, and each one fails on the
import it forbids: an upward import, a circle between two modules of a package, Airflow below the hooks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
