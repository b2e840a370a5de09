"""`pip install` into a plain Airflow, as the README's "Install into your own Airflow" says: the wheel built from a
copy of the sources, installed with the project's constraints into a fresh virtualenv, used from a directory
outside any checkout with a fresh AIRFLOW_HOME.

Proves: Airflow lists the provider, its connection type and the dashboard plugin (whose import once needed a
dependency the provider did not declare: orjson); the wheel's DAG files load
from where the wheel installed them (``<venv>/share/findings-airflow/dags``) with the configuration installed
beside them, and import nothing from a checkout. Slow (a whole Airflow is installed: about 1-3 minutes with pip's
cache warm), hence its own marker; PyPI must be reachable (it is on this machine and in CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from findings_provider.names import PIPELINE_DAGS

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parents[2]
DAG_IDS = set(PIPELINE_DAGS)
SOURCES = ("pyproject.toml", "README.md", "plugins", "include", "dags")


def run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 900) -> str:
    result = subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, check=False)
    assert result.returncode == 0, f"{args}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A wheel of a copy of the sources, installed into a fresh virtualenv with the project's constraints."""
    work = tmp_path_factory.mktemp("wheel-install")
    source = work / "source"
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(origin, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", work / "dist",
        source, cwd=work)
    (wheel,) = (work / "dist").glob("findings_airflow-*.whl")
    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "pip", "install", "--quiet", "-c", REPO / "constraints.txt", wheel, cwd=work)
    home = work / "airflow-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "FINDINGS_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"})
    return {"venv": venv, "wheel": wheel, "home": home, "cwd": work, "env": env}


def airflow(installed: dict, *args: str) -> str:
    return run(installed["venv"] / "bin" / "airflow", *args, env=installed["env"], cwd=installed["cwd"])


def json_output(text: str) -> list[dict]:
    return json.loads(text[text.index("["):])


def test_airflow_lists_the_provider_its_connection_type_and_the_dashboard(installed: dict) -> None:
    providers = {p["package_name"] for p in json_output(airflow(installed, "providers", "list", "-o", "json"))}
    assert "findings-airflow" in providers
    hooks = json_output(airflow(installed, "providers", "hooks", "-o", "json"))
    assert any(h.get("connection_type") == "findings_api" for h in hooks), hooks
    plugins = {p["name"] for p in json_output(airflow(installed, "plugins", "-o", "json"))}
    assert "findings_dashboard" in plugins


def test_the_wheels_dags_load_from_where_it_installed_them(installed: dict) -> None:
    venv = installed["venv"]
    dags = venv / "share" / "findings-airflow" / "dags"
    assert sorted(p.name for p in dags.glob("*.py")) == sorted(f"{d}.py" for d in DAG_IDS)
    script = (
        "import json, findings_provider, findings_provider.config as c\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag({str(dags)!r})\n"
        "print(json.dumps({'dags': sorted(bag.dag_ids), 'errors': bag.import_errors,\n"
        "                  'package': findings_provider.__file__, 'config': str(c.config_path())}))\n"
    )
    out = json.loads(run(venv / "bin" / "python", "-c", script, env=installed["env"],
                         cwd=installed["cwd"]).strip().splitlines()[-1])
    assert out["errors"] == {}
    assert set(out["dags"]) == DAG_IDS
    assert out["package"].startswith(str(venv))  # nothing imported from a checkout
    assert out["config"] == str(venv / "share" / "findings-airflow" / "include" / "pipeline.yaml")
