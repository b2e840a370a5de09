"""The approval step of a write: branch to it when the plan needs a person, ask, and record the answer.

The answer is recorded in the warehouse (``pipeline.approval``) by the approval task's completion handler; the
write task checks that record itself, so a task marked successful by hand is not consent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import BaseBranchOperator

from findings_provider.compat import DownstreamTasksSkipped
from findings_provider.hooks.warehouse import FindingsWarehouseHook
from findings_provider.pipeline import approval
from findings_provider.values import as_bool


class ApprovalBranchOperator(BaseBranchOperator):
    """Continue with ``approval_task_id`` when ``needs_approval`` is true, else straight to ``proceed_task_id``.

    :param needs_approval: templated (typically the plan task's XCom of that name).
    """

    template_fields: Sequence[str] = ("needs_approval",)

    def __init__(self, *, needs_approval: Any, approval_task_id: str, proceed_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.needs_approval = needs_approval
        self.approval_task_id = approval_task_id
        self.proceed_task_id = proceed_task_id

    def choose_branch(self, context: Any) -> str:
        if as_bool(self.needs_approval, "needs_approval"):
            self.log.info("the plan needs a person's approval: asking")
            return self.approval_task_id
        self.log.info("no approval needed")
        return self.proceed_task_id


def responder(result: dict[str, Any]) -> str | None:
    """Who answered a Human-in-the-loop request (a name, or None)."""
    user = result.get("responded_by_user")
    return user.get("name") if isinstance(user, dict) else user


class PlanApprovalOperator(ApprovalOperator):
    """Ask a person to approve or reject a write's plan in the Airflow UI (Required Actions); record the answer.

    :param kind: which write's plan (one of ``findings_provider.pipeline.approval.KINDS``: ``triage``, ``tickets``,
        ``policies``).
    :param warehouse_conn_id: the warehouse connection, where the answer is recorded.
    """

    def __init__(
        self,
        *,
        kind: str,
        warehouse_conn_id: str = FindingsWarehouseHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if kind not in approval.KINDS:
            raise ValueError(f"kind {kind!r}: expected one of {', '.join(map(repr, approval.KINDS))}")
        self.kind = kind
        self.warehouse_conn_id = warehouse_conn_id

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        try:
            result = super().execute_complete(context, event)
        except DownstreamTasksSkipped:
            # after a Reject, Airflow 3 skips the write by raising this: the rejection is recorded first
            self._record(context, event, approved=False)
            raise
        self._record(context, result, approved=result["chosen_options"][0] == self.APPROVE)
        return result

    def _record(self, context: Any, answer: dict[str, Any], *, approved: bool) -> None:
        warehouse = FindingsWarehouseHook(warehouse_conn_id=self.warehouse_conn_id).get_warehouse()
        approval.record_decision(warehouse, self.kind, context.get("run_id"), approved=approved,
                                 by=responder(answer))
        if not approved:
            self.on_rejected(warehouse, answer)
        self.log.info("%s plan %s by %s", self.kind, "approved" if approved else "rejected",
                      responder(answer) or "a person")

    def on_rejected(self, warehouse: Any, result: dict[str, Any]) -> None:
        """What a rejection leaves behind besides the recorded answer (nothing here)."""
