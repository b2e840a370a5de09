"""Airflow hook: turns the warehouse connection into a SQLAlchemy engine and a ready :class:`Warehouse`."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from findings_provider.compat import AirflowNotFoundException

if TYPE_CHECKING:  # SQLAlchemy and the warehouse are imported when a task first uses them, not by a DAG's parse
    from sqlalchemy.engine import URL, Engine

    from findings_provider.warehouse import Warehouse

DEFAULT_CONN_ID = "findings_warehouse_default"
FALLBACK_FILE_NAME = "findings_warehouse.db"


def fallback_database_path() -> Path:
    """Return the SQLite file used when the warehouse connection does not exist.

    ``$AIRFLOW_HOME/findings_warehouse.db``, with ``AIRFLOW_HOME`` defaulting to ``~/airflow``.
    """
    airflow_home = os.environ.get("AIRFLOW_HOME") or "~/airflow"
    return Path(airflow_home).expanduser() / FALLBACK_FILE_NAME


class FindingsWarehouseHook(BaseHook):
    """Connect to the findings warehouse: a SQLite file or a PostgreSQL database named by a connection URI.

    :param warehouse_conn_id: id of a connection naming the database by URI (``sqlite:////abs/path/file.db``,
        ``postgresql://user@host:5432/db``). When it does not exist the warehouse is the SQLite file
        ``$AIRFLOW_HOME/findings_warehouse.db``.
    """

    conn_name_attr = "warehouse_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    hook_name = "Findings warehouse"

    def __init__(self, warehouse_conn_id: str = DEFAULT_CONN_ID, *, run_id: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.warehouse_conn_id = warehouse_conn_id
        #: The Airflow run using the warehouse: recorded with the changes of findings it observes.
        self.run_id = run_id

    def get_url(self) -> URL:
        """Return the warehouse's SQLAlchemy URL (the fallback SQLite file when the connection is absent)."""
        from sqlalchemy.engine import URL

        from findings_provider.warehouse import url_from_connection

        try:
            conn = self.get_connection(self.warehouse_conn_id)
        except AirflowNotFoundException:
            path = fallback_database_path()
            self.log.info("No connection %r: the warehouse is the SQLite file %s", self.warehouse_conn_id, path)
            path.parent.mkdir(parents=True, exist_ok=True)
            return URL.create("sqlite", database=str(path))
        return url_from_connection(
            conn.conn_type, conn.host, conn.schema, conn.login, conn.password, conn.port, conn.extra
        )

    @cached_property
    def _engine(self) -> Engine:
        from findings_provider.warehouse import make_engine

        url = self.get_url()
        self.log.info("Warehouse database: %s", url.render_as_string(hide_password=True))
        return make_engine(url)

    def get_engine(self) -> Engine:
        """Return the warehouse engine, created on first use and cached on the hook."""
        return self._engine

    @cached_property
    def _warehouse(self) -> Warehouse:
        from findings_provider.warehouse import Warehouse

        warehouse = Warehouse(self._engine, run_id=self.run_id)
        warehouse.create_all()
        return warehouse

    def get_warehouse(self) -> Warehouse:
        """Return the :class:`Warehouse`, its tables created if missing (once per hook)."""
        return self._warehouse

    def get_conn(self) -> Engine:
        """Return the warehouse engine (BaseHook's generic accessor)."""
        return self.get_engine()
