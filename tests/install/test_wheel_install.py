"""`pip install` into a plain Airflow, as the README's "Install into your own Airflow" says: the wheel built from a
copy of the sources, installed with the project's constraints into a fresh virtualenv, used from a directory
outside any checkout with a fresh AIRFLOW_HOME.

Proves: Airflow lists the provider, its connection type and the dashboard plugin (whose import once needed a
dependency the provider did not declare: orjson); the wheel's DAG files load
from where the wheel installed them (``<venv>/share/findings-airflow/dags``) with the configuration installed
beside them, and import nothing from a checkout; a user's own DAG runs the provider's operators with their inputs
as arguments, with no pipeline configuration anywhere. Slow (a whole Airflow is installed: about 1-3 minutes with pip's
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
from findings_provider.warehouse import make_engine
from findings_provider.warehouse.schema import findings, triage_actions
from fixtures import client_of, connection_env, running_emulator, sqlite_url
from sqlalchemy import func, select

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


#: The README's DAG of one's own ("Use the operators in your own DAGs"), run as it is written there.
README_DAG = "A DAG of your own with a triage policy written inline"


def readme_dag() -> str:
    """The Python block that follows :data:`README_DAG` in the README, and a line that runs it with ``dag.test()``."""
    text = (REPO / "README.md").read_text()
    block = text[text.index(README_DAG):]
    code = block[block.index("```python\n") + len("```python\n"):]
    return code[:code.index("```")] + '\nif __name__ == "__main__":\n    print("STATE", dag.test().state)\n'


def test_a_users_own_dag_runs_the_operators_with_no_pipeline_configuration(installed: dict, tmp_path: Path) -> None:
    venv = installed["venv"]
    shutil.rmtree(venv / "share" / "findings-airflow" / "include")  # the configuration the wheel installed: gone
    dag_file = installed["home"] / "dags" / "my_findings.py"  # the user's DAGs folder ([core] dags_folder)
    dag_file.parent.mkdir(exist_ok=True)
    dag_file.write_text(readme_dag())
    warehouse = tmp_path / "warehouse.db"
    airflow(installed, "db", "migrate")  # dag.test() records its run in Airflow's metadata database
    with running_emulator(findings=400) as emulator:
        env = {**installed["env"], **connection_env(emulator=emulator, warehouse=warehouse),
               # a read of the pipeline configuration while a task runs fails the task: nothing may need one
               "FINDINGS_PIPELINE_CONFIG": str(tmp_path / "no-such-dir" / "pipeline.yaml"),
               "FINDINGS_REPORT_DIR": str(tmp_path / "reports")}
        out = run(venv / "bin" / "python", dag_file, env=env, cwd=installed["cwd"])
        with client_of(emulator) as client:
            listed = sum(1 for _ in client.items(client.list_findings, "sast"))
    assert "STATE success" in out, out[-3000:]
    engine = make_engine(sqlite_url(warehouse))
    try:
        with engine.connect() as conn:
            stored = conn.execute(select(func.count()).select_from(findings)
                                  .where(findings.c.issue_type == "sast")).scalar_one()
            plans = conn.execute(select(triage_actions)).mappings().all()
    finally:
        engine.dispose()
    assert stored == listed > 0
    assert plans
    assert all(p["dry_run"] and p["status"] == "planned" and p["dag_id"] == "my_findings" for p in plans)
    assert sum(len(p["issue_ids"]) for p in plans) > 0
    assert all(len(p["issue_ids"]) <= 50 for p in plans)  # the chunk_size given
