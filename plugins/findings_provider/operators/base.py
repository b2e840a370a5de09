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
        try:
            return self.run(context)
        except Exception as exc:
            mapped = fail_fast(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        finally:
            if "api_hook" in self.__dict__:
                self.api_hook.close()

    def run(self, context: Any) -> Any:
        raise NotImplementedError
