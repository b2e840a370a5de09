"""`pip install` into a plain Airflow, as the README's "Install into your own Airflow" says: the wheel built from a
copy of the sources, installed with the project's constraints into a fresh virtualenv, used from a directory
outside any checkout with a fresh AIRFLOW_HOME.

Proves: the wheel carries the provider and not the emulator, which is its own distribution (include/pyproject.toml)
that the ``emulator`` extra asks for; Airflow lists the provider, its connection type and the dashboard plugin (whose
import once needed a dependency the provider did not declare: orjson); the wheel's DAG files load
from where the wheel installed them (``<venv>/share/findings-airflow/dags``) with the configuration installed
beside them, and import nothing from a checkout; a user's own DAG runs the provider's operators with their inputs
as arguments, with no pipeline configuration anywhere. Slow (a whole Airflow is installed: about 1-3 minutes with pip's
cache warm), hence its own marker; PyPI must be reachable (it is on this machine and in CI).
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from findings_provider.names import PIPELINE_DAGS
from findings_provider.warehouse import make_engine
from findings_provider.warehouse.schema import findings, triage_actions
from fixtures import client_of, connection_env, running_emulator, sqlite_url
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
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
        source, source / "include", cwd=work)
    (wheel,) = (work / "dist").glob("findings_airflow-*.whl")
    (emulator_wheel,) = (work / "dist").glob("findings_emulator-*.whl")
    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "pip", "install", "--quiet", "-c", REPO / "constraints.txt", wheel, cwd=work)
    home = work / "airflow-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "FINDINGS_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"})
    return {"venv": venv, "wheel": wheel, "emulator_wheel": emulator_wheel, "dist": work / "dist", "home": home,
            "cwd": work, "env": env}


def airflow(installed: dict, *args: str) -> str:
    return run(installed["venv"] / "bin" / "airflow", *args, env=installed["env"], cwd=installed["cwd"])


def json_output(text: str) -> list[dict]:
    return json.loads(text[text.index("["):])


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def requirements(metadata: email.message.Message, extra: str | None = None) -> dict[str, Requirement]:
    """The ``Requires-Dist`` entries by distribution name: those of ``extra``, or the unconditional ones."""
    found: dict[str, Requirement] = {}
    for line in metadata.get_all("Requires-Dist") or []:
        req = Requirement(line)
        wanted = req.marker is not None and req.marker.evaluate({"extra": extra}) if extra else req.marker is None
        if wanted:
            found[canonicalize_name(req.name)] = req
    return found


def test_the_base_wheel_carries_the_provider_and_not_the_emulator(installed: dict) -> None:
    files = wheel_files(installed["wheel"])
    assert any(f.startswith("findings_provider/") for f in files)
    assert not [f for f in files if "findings_emulator" in f]
    with zipfile.ZipFile(installed["wheel"]) as archive:
        [points] = [n for n in files if n.endswith(".dist-info/entry_points.txt")]
        assert "findings_emulator" not in archive.read(points).decode()  # no findings-emulator command
    venv, env = installed["venv"], installed["env"]
    assert not (venv / "bin" / "findings-emulator").exists()
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import findings_emulator"], env=env,
                           cwd=installed["cwd"], capture_output=True, text=True, timeout=120, check=False)
    assert probe.returncode != 0
    assert "No module named 'findings_emulator'" in probe.stderr
    # nor does the base install pull what only the emulator needs
    assert "uvicorn" not in requirements(wheel_metadata(installed["wheel"]))


def test_the_emulator_extra_is_the_emulator_distribution_with_its_dependencies(installed: dict) -> None:
    provider = wheel_metadata(installed["wheel"])
    emulator = wheel_metadata(installed["emulator_wheel"])
    assert "emulator" in (provider.get_all("Provides-Extra") or [])
    [extra] = requirements(provider, "emulator").values()
    assert canonicalize_name(extra.name) == "findings-emulator"
    assert str(extra.specifier) == f"=={emulator['Version']}"  # the emulator released with this provider
    assert emulator["Version"] == provider["Version"]
    assert {"fastapi", "uvicorn", "sqlalchemy", "pydantic", "orjson", "httpx"} <= set(requirements(emulator))
    files = wheel_files(installed["emulator_wheel"])
    assert "findings_emulator/cli.py" in files
    assert not [f for f in files if f.startswith("findings_provider/") or f.endswith((".yaml", "dags/"))]
    with zipfile.ZipFile(installed["emulator_wheel"]) as archive:
        [points] = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "findings-emulator = findings_emulator.cli:main" in archive.read(points).decode()


def test_pip_resolves_the_emulator_extra_to_the_emulator_distribution(installed: dict, tmp_path: Path) -> None:
    """``pip install findings-airflow[emulator]`` where both wheels are published (here: a folder of the two
    wheels) adds the emulator to the base install (a dry run: the base install stays without it), and the
    emulator then runs from its command and as ``python -m findings_emulator``."""
    venv, env = installed["venv"], installed["env"]
    report = tmp_path / "report.json"
    run(venv / "bin" / "pip", "install", "--quiet", "--dry-run", "--report", report, "--find-links",
        installed["dist"], "-c", REPO / "constraints.txt", f"{installed['wheel']}[emulator]", env=env,
        cwd=installed["cwd"])
    added = {i["metadata"]["name"]: i for i in json.loads(report.read_text())["install"]}
    assert "findings-emulator" in added
    assert added["findings-emulator"]["download_info"]["url"].endswith(installed["emulator_wheel"].name)
    # the emulator's other dependencies come with the base install (Airflow's API server needs them too)
    assert set(added) <= {"findings-airflow", "findings-emulator"}, set(added)
    target = tmp_path / "emulator"
    run(venv / "bin" / "pip", "install", "--quiet", "--no-deps", "--target", target, installed["emulator_wheel"],
        env=env, cwd=installed["cwd"])
    with_emulator = {**env, "PYTHONPATH": str(target)}
    assert "--findings" in run(venv / "bin" / "python", "-m", "findings_emulator", "--help", env=with_emulator,
                               cwd=installed["cwd"])
    assert "--findings" in run(target / "bin" / "findings-emulator", "--help", env=with_emulator,
                               cwd=installed["cwd"])


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
