"""The stack's environment: where the project's files are, the connection ids, the pool, the executors, how to
start the emulator, and the pieces of the environment every component shares (see ``Stack.env``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DAGS_FOLDER = REPO / "dags"
PIPELINE_CONFIG = REPO / "include" / "pipeline.yaml"

API_CONN_ID = "findings_api_default"
WAREHOUSE_CONN_ID = "findings_warehouse_default"
POOL_NAME = "findings_api"
POOL_SLOTS = 4
USERNAME = "admin"

LOCAL = "LocalExecutor"
CELERY = "CeleryExecutor"


@dataclass
class EmulatorOptions:
    """How to start the findings API emulator (the ``findings-emulator`` command line)."""

    port: int | None = None  # None: a free port
    host: str = "127.0.0.1"
    token: str = "emulator-token"  # noqa: S105 - the emulator's local, throwaway token
    seed: int = 42
    findings: int | None = None  # None: the emulator's default volume
    deployment_slug: str = "acme"
    deployment_id: str = "1"
    extra_args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def warehouse_fields(url: str) -> tuple[str, dict[str, Any]]:
    """The connection fields Airflow itself parses from the warehouse URI (SQLite path in ``schema``)."""
    from urllib.parse import urlsplit

    if url.startswith("sqlite:///"):
        return "sqlite", {"schema": url[len("sqlite:///") :]}
    parts = urlsplit(url)
    return "postgres", {"host": parts.hostname, "port": parts.port, "login": parts.username,
                        "password": parts.password, "schema": parts.path.lstrip("/")}


def fernet_key() -> str:
    """A new Fernet key for the metadata database's encrypted fields."""
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()
