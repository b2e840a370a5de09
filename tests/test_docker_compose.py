"""docker-compose.yaml, checked by parsing (no Docker engine on the CI machines).

The production-like stack must have every component with a health check, build the project's image on the
official Airflow image, mount dags/, plugins/ and include/, run CeleryExecutor on PostgreSQL and Redis, and use the
same connection ids, environment forms and pool as the rest of the project (the project's fixed public names,
include/pipeline.yaml).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "docker" / "Dockerfile"

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
    "airflow-worker": "celery worker",
}
LONG_RUNNING = {*AIRFLOW_SERVICES, "postgres", "redis", "findings-emulator"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str] | None = None) -> Any:
    """Compose's ``${VAR:-default}`` substitution (``$$`` stays a literal ``$``), with ``env`` or the defaults."""
    env = env or {}
    if isinstance(value, str):
        text = value.replace("$$", "\0")
        text = _VAR.sub(lambda m: env.get(m.group(1), m.group(2) or ""), text)
        return text.replace("\0", "$")
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


@pytest.fixture(scope="module")
def pipeline_config() -> Any:
    from findings_provider.config import load_pipeline_config

    return load_pipeline_config(REPO / "include" / "pipeline.yaml")


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def command_of(service: dict[str, Any]) -> str:
    cmd = service.get("command", "")
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def required_airflow_version() -> str:
    match = re.search(r"^apache-airflow==([0-9.]+)\s*$", (REPO / "requirements.txt").read_text(), re.M)
    assert match, "requirements.txt pins apache-airflow"
    return match.group(1)


def test_every_component_is_a_service(services: dict[str, Any]) -> None:
    assert {*AIRFLOW_SERVICES, "airflow-init", "postgres", "redis", "findings-emulator"} <= set(services)


@pytest.mark.parametrize("name", sorted(LONG_RUNNING))
def test_long_running_services_have_health_checks(services: dict[str, Any], name: str) -> None:
    check = services[name].get("healthcheck")
    assert check, f"{name} has no healthcheck"
    test = check["test"]
    assert isinstance(test, list)
    assert test[0] in ("CMD", "CMD-SHELL")
    assert len(test) > 1
    assert check.get("interval")
    assert check.get("retries")


@pytest.mark.parametrize(("name", "command"), sorted(AIRFLOW_SERVICES.items()))
def test_airflow_components_run_their_command_on_the_project_image(
    services: dict[str, Any], name: str, command: str
) -> None:
    service = services[name]
    assert command_of(service) == command
    assert service["image"].startswith("findings-airflow:")
    assert service["build"] == {"context": ".", "dockerfile": "docker/Dockerfile"}
    depends = service.get("depends_on") or {}
    assert depends["postgres"]["condition"] == "service_healthy"
    assert depends["redis"]["condition"] == "service_healthy"
    assert depends["airflow-init"]["condition"] == "service_completed_successfully"


def test_health_checks_probe_each_component(services: dict[str, Any]) -> None:
    def probe(name: str) -> str:
        return " ".join(services[name]["healthcheck"]["test"][1:])

    assert "/api/v2/monitor/health" in probe("airflow-apiserver") or "/api/v2/version" in probe("airflow-apiserver")
    assert ":8974/health" in probe("airflow-scheduler")
    assert env_of(services["airflow-scheduler"])["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] == "true"
    assert "--job-type DagProcessorJob" in probe("airflow-dag-processor")
    assert "--job-type TriggererJob" in probe("airflow-triggerer")
    assert "inspect ping" in probe("airflow-worker")
    assert "pg_isready" in probe("postgres")
    assert "redis-cli ping" in probe("redis")
    assert "/_emulator/health" in probe("findings-emulator")
    # compose escapes the container's own variables as $$: after interpolation they are single $
    assert '"$HOSTNAME"' in probe("airflow-triggerer") or "${HOSTNAME}" in probe("airflow-triggerer")


def test_two_celery_workers(services: dict[str, Any]) -> None:
    replicas = (services["airflow-worker"].get("deploy") or {}).get("replicas", 1)
    assert int(replicas) >= 2


@pytest.mark.parametrize("name", sorted({*AIRFLOW_SERVICES, "airflow-init"}))
def test_dags_plugins_and_include_are_mounted(services: dict[str, Any], name: str) -> None:
    mounts = {m.split(":")[0]: m.split(":")[1] for m in services[name]["volumes"] if isinstance(m, str)}
    assert mounts["./dags"] == "/opt/airflow/dags"
    assert mounts["./plugins"] == "/opt/airflow/plugins"
    assert mounts["./include"] == "/opt/airflow/include"
    for folder in ("dags", "plugins", "include"):
        assert (REPO / folder).is_dir()


def test_celery_postgres_redis_settings_are_consistent(services: dict[str, Any]) -> None:
    env = env_of(services["airflow-scheduler"])
    pg = services["postgres"]["environment"]
    user, password, db = pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"postgresql+psycopg2://{user}:{password}@postgres:5432/{db}"
    assert env["AIRFLOW__CELERY__RESULT_BACKEND"] == "db+" + env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert re.fullmatch(r"redis://redis:6379/\d+", env["AIRFLOW__CELERY__BROKER_URL"])
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
    assert "8080" in " ".join(map(str, services["airflow-apiserver"]["ports"]))
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
    assert env["AIRFLOW__CORE__TEST_CONNECTION"] == "Enabled"


def test_every_airflow_container_shares_one_environment(services: dict[str, Any]) -> None:
    """JWT secret, Fernet key, database, broker and connections: the same in every component."""
    keys = ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
            "AIRFLOW__CELERY__BROKER_URL", "AIRFLOW_CONN_FINDINGS_API_DEFAULT",
            "AIRFLOW_CONN_FINDINGS_WAREHOUSE_DEFAULT", "FINDINGS_PIPELINE_CONFIG", "PYTHONPATH")
    seen = {name: {k: env_of(services[name]).get(k) for k in keys} for name in {*AIRFLOW_SERVICES, "airflow-init"}}
    first = next(iter(seen.values()))
    assert all(v == first for v in seen.values()), seen
    assert first["AIRFLOW__API_AUTH__JWT_SECRET"]


def test_connections_follow_the_project_interfaces(services: dict[str, Any], pipeline_config: Any) -> None:
    env = env_of(services["airflow-worker"])
    api_var = "AIRFLOW_CONN_" + pipeline_config.connections.api_conn_id.upper()
    warehouse_var = "AIRFLOW_CONN_" + pipeline_config.connections.warehouse_conn_id.upper()
    assert api_var == "AIRFLOW_CONN_FINDINGS_API_DEFAULT"
    conn = json.loads(env[api_var])
    assert conn["conn_type"] == "findings_api"
    assert conn["host"] == "http://findings-emulator:8900"
    assert conn["password"]
    assert conn["extra"]["deployment_slug"] == "acme"
    assert conn["extra"]["deployment_id"].isdigit()
    assert conn["extra"]["allow_insecure_http"] is True  # plain http to a non-loopback host: the emulator only
    pg = services["postgres"]["environment"]
    assert env[warehouse_var] == (
        f"postgresql://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/findings_warehouse"
    )
    init_sql = next(m for m in services["postgres"]["volumes"] if "postgres-init.sql" in m)
    assert "CREATE DATABASE findings_warehouse" in (REPO / init_sql.split(":")[0]).read_text()
    assert env["FINDINGS_PIPELINE_CONFIG"] == "/opt/airflow/include/pipeline.yaml"
    assert env["FINDINGS_REPORT_DIR"].startswith("/opt/airflow/")


def test_connection_variables_substitute_real_api_settings() -> None:
    raw = yaml.safe_load(COMPOSE.read_text())["x-airflow-common"]["environment"]["AIRFLOW_CONN_FINDINGS_API_DEFAULT"]
    conn = json.loads(interpolate(raw, {
        "FINDINGS_API_URL": "https://findings.example.com", "FINDINGS_API_TOKEN": "t0k3n",
        "FINDINGS_DEPLOYMENT_SLUG": "corp", "FINDINGS_DEPLOYMENT_ID": "42", "FINDINGS_ALLOW_INSECURE_HTTP": "false",
    }))
    assert conn == {"conn_type": "findings_api", "host": "https://findings.example.com", "password": "t0k3n",
                    "extra": {"deployment_slug": "corp", "deployment_id": "42", "allow_insecure_http": False}}


def test_init_job_migrates_and_creates_the_pool(services: dict[str, Any], pipeline_config: Any) -> None:
    script = command_of(services["airflow-init"])
    assert "airflow db migrate" in script
    pool = re.search(r"airflow pools set (\S+) (\d+) .*--include-deferred", script)
    assert pool, script
    assert (pool.group(1), int(pool.group(2))) == (pipeline_config.pool.name, pipeline_config.pool.slots)
    assert "airflow users create" in script
    assert "healthcheck" not in services["airflow-init"]


def test_emulator_is_an_optional_profile(services: dict[str, Any]) -> None:
    emulator = services["findings-emulator"]
    assert emulator["profiles"] == ["emulator"]
    assert not any("profiles" in services[name] for name in AIRFLOW_SERVICES)
    args = emulator["command"]
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert args[args.index("--port") + 1] == "8900"
    assert args[args.index("--token") + 1] == "emulator-token"
    assert "findings_emulator" in " ".join(emulator["entrypoint"])


def test_image_is_the_official_airflow_image_with_the_provider() -> None:
    text = DOCKERFILE.read_text()
    version = required_airflow_version()
    assert re.search(r"^ARG AIRFLOW_VERSION=" + re.escape(version) + r"$", text, re.M)
    assert re.search(r"^ARG PYTHON_VERSION=3\.11$", text, re.M)
    # the official image by default; the compose test builds on a local stand-in through the build argument
    assert re.search(r"^ARG AIRFLOW_BASE_IMAGE=apache/airflow:\$\{AIRFLOW_VERSION\}-python\$\{PYTHON_VERSION\}$",
                     text, re.M)
    assert re.search(r"^FROM \$\{AIRFLOW_BASE_IMAGE\}$", text, re.M)
    assert "--constraint requirements.txt" in text
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in text
    assert ".[postgres,celery,emulator]" in text
    for path in ("requirements.txt", "pyproject.toml", "plugins/", "include/"):
        assert re.search(r"^COPY .*\b" + re.escape(path), text, re.M), path
