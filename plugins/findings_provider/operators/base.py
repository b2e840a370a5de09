"""Base of the provider's operators: hooks built lazily, unfixable errors fail the task at once."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator

from findings_provider.client import FindingsApiError
from findings_provider.compat import AirflowFailException
from findings_provider.config import ConfigError
from findings_provider.hooks.findings_api import DEFAULT_CONN_ID, FindingsApiHook
from findings_provider.hooks.warehouse import FindingsWarehouseHook
from findings_provider.operators.links import DashboardLink
from findings_provider.pipeline.approval import ApprovalError


def fail_fast(exc: Exception) -> Exception:
    """Turn an error no task retry can fix (auth, validation, retired API, bad config, a missing approval) into
    AirflowFailException."""
    if isinstance(exc, (ConfigError, ApprovalError)) or (
        isinstance(exc, FindingsApiError) and not exc.retryable_by_task
    ):
        return AirflowFailException(f"{type(exc).__name__}: {exc}")
    return exc


class FindingsBaseOperator(BaseOperator):
    """Shared plumbing: ``findings_conn_id``/``warehouse_conn_id``, lazy hooks, fail-fast error mapping.

    Subclasses implement ``run(context)`` instead of ``execute``.
    """

    template_fields: Sequence[str] = ("findings_conn_id", "warehouse_conn_id")
    #: For OpenLineage: the API operations (``client.endpoints`` names) this operator reads, and the warehouse
    #: tables it writes (see ``get_openlineage_facets_on_complete``).
    lineage_reads: tuple[str, ...] = ()
    lineage_writes: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        findings_conn_id: str = DEFAULT_CONN_ID,
        warehouse_conn_id: str = FindingsWarehouseHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.findings_conn_id = findings_conn_id
        self.warehouse_conn_id = warehouse_conn_id

    @cached_property
    def api_hook(self) -> FindingsApiHook:
        return FindingsApiHook(findings_conn_id=self.findings_conn_id)

    @cached_property
    def warehouse_hook(self) -> FindingsWarehouseHook:
        return FindingsWarehouseHook(warehouse_conn_id=self.warehouse_conn_id)

    def execute(self, context: Any) -> Any:
        self.warehouse_hook.run_id = context.get("run_id")
        for link in self.operator_extra_links:
            if isinstance(link, DashboardLink):
                link.persist(context, link.target(context))
        try:
            return self.run(context)
        except Exception as exc:
            mapped = fail_fast(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        finally:
            if "api_hook" in self.__dict__:
                if "client" in self.api_hook.__dict__:  # the service as this run resolved it, for lineage
                    client = self.api_hook.client
                    self._api_used = (client.base_url, client.deployment_id, client.deployment_slug)
                self.api_hook.close()

    def run(self, context: Any) -> Any:
        raise NotImplementedError

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The run's lineage for Airflow's OpenLineage provider (called only when it is installed): inputs the API
        operations of ``lineage_reads`` on the connection's service, outputs the tables of ``lineage_writes`` on
        the warehouse database the connection names (see :mod:`findings_provider.lineage`)."""
        from findings_provider.lineage import api_dataset_name, operator_lineage, warehouse_dataset_name

        inputs = []
        if self.lineage_reads:
            used = getattr(self, "_api_used", None)
            if used is None:  # the run made no request: the service the connection names
                client = self.api_hook.client
                used = (client.base_url, client.deployment_id, client.deployment_slug)
                self.api_hook.close()
            base_url, deployment_id, deployment_slug = used
            inputs = [api_dataset_name(base_url, operation, deployment_id=deployment_id,
                                       deployment_slug=deployment_slug) for operation in self.lineage_reads]
        outputs = []
        if self.lineage_writes:
            url = self.warehouse_hook.get_url()
            schema = None
            if url.get_backend_name() == "postgresql":
                with self.warehouse_hook.get_engine().connect() as conn:
                    schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
            outputs = [warehouse_dataset_name(url, table, schema) for table in self.lineage_writes]
        return operator_lineage(inputs, outputs)
