"""Operators of autotriage: plan bulk triage by policy, ask a person when it is large, execute the plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from findings_provider.client.limits import TRIAGE_LIMIT
from findings_provider.config import TriageConfig, TriagePolicy
from findings_provider.operators.approval import ApprovalBranchOperator, PlanApprovalOperator, responder
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.operators.links import FindingsTriagedLink
from findings_provider.pipeline import approval
from findings_provider.values import as_bool, as_int, as_int_list, as_optional_int

__all__ = ["ApprovalBranchOperator", "BulkTriageOperator", "PlanTriageOperator", "TriageApprovalOperator"]


#: The defaults of pipeline.yaml's ``autotriage_triage``: an argument left out takes its value from here.
_TRIAGE = TriageConfig()


def _chunk_size(value: Any) -> int:
    return as_int(value, "chunk_size", minimum=TRIAGE_LIMIT.minimum, maximum=TRIAGE_LIMIT.maximum)


def _identity(context: Any) -> tuple[str | None, str | None]:
    ti = context.get("ti")
    return getattr(ti, "dag_id", None), context.get("run_id") or getattr(ti, "run_id", None)


class PlanTriageOperator(FindingsBaseOperator):
    """Select findings by the triage policies and record the requests to make as ``planned`` in ``triage_actions``.

    A person must approve the plan first when a policy selects more findings than its cap (``max_findings`` in
    pipeline.yaml, lowered for one run by ``max_findings`` here) or the whole selection exceeds
    ``approval_threshold``; the reasons are recorded with the plan, where the triage task checks them. Returns
    the plan's counts, whether it ``needs_approval`` and the subject and body of the approval request; pushes
    ``action_ids`` (the recorded requests) and ``needs_approval`` under their own XCom keys. In a dry run the
    recorded rows are flagged ``dry_run`` and are never sent.

    :param dry_run: record the plan only (templated).
    :param approval_threshold: above this many selected findings a person approves first; None: never
        (templated; >= 0).
    :param max_findings: lowers every policy's cap for this run; None: the caps of pipeline.yaml (templated;
        >= 1; a larger value than a policy's cap does not raise it).
    :param policies: the triage policies (``autotriage_triage.policies`` of pipeline.yaml: ``TriagePolicy`` models
        or their dicts).
    :param chunk_size: ids per request, 1..3000.
    """

    lineage_writes = ("triage_actions",)

    template_fields: Sequence[str] = (
        *FindingsBaseOperator.template_fields, "is_dry_run", "approval_threshold", "max_findings",
    )
    ui_color = "#fde9d9"

    def __init__(
        self,
        *,
        dry_run: Any = False,
        approval_threshold: Any = None,
        max_findings: Any = None,
        policies: Sequence[TriagePolicy | dict[str, Any]],
        chunk_size: int = _TRIAGE.chunk_size,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.approval_threshold = approval_threshold
        self.max_findings = max_findings
        self.policies = TriagePolicy.coerce_all(policies)
        self.chunk_size = chunk_size

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import triage

        dry_run = as_bool(self.is_dry_run, "dry_run")
        threshold = as_optional_int(self.approval_threshold, "approval_threshold", minimum=0)
        max_findings = as_optional_int(self.max_findings, "max_findings", minimum=1)
        warehouse = self.warehouse_hook.get_warehouse()
        plans = triage.plan_triage(warehouse, self.policies, chunk_size=_chunk_size(self.chunk_size),
                                   max_findings=max_findings)
        reasons = triage.approval_reasons(plans, threshold)
        dag_id, run_id = _identity(context)
        action_ids = triage.record_plan(warehouse, plans, dry_run=dry_run, dag_id=dag_id, run_id=run_id,
                                        reasons=reasons)
        total = sum(len(p.selected) for p in plans)
        needs_approval = bool(reasons)
        subject, body = triage.approval_text(plans, reasons=reasons, dry_run=dry_run)
        self.log.info("plan: %d findings in %d request(s)%s%s", total, len(action_ids),
                      " (dry run)" if dry_run else "",
                      f"; a person approves first: {'; '.join(reasons)}" if needs_approval else "")
        ti = context["ti"]
        ti.xcom_push(key="action_ids", value=action_ids)
        ti.xcom_push(key="needs_approval", value=needs_approval)
        return {
            "selected": total,
            "requests": len(action_ids),
            "dry_run": dry_run,
            "approval_threshold": threshold,
            "needs_approval": needs_approval,
            "approval_reasons": reasons,
            "policies": [p.summary for p in plans],
            "approval_subject": subject,
            "approval_body": body,
        }


class TriageApprovalOperator(PlanApprovalOperator):
    """Ask a person to approve or reject a triage plan in the Airflow UI (Required Actions).

    Approve: the answer is recorded and the triage task runs. Reject: it is skipped and the plan's requests are
    recorded in ``triage_actions`` as failed, "rejected in the approval step".

    :param action_ids: the plan's recorded requests (templated).
    :param warehouse_conn_id: the warehouse connection.
    """

    template_fields: Sequence[str] = (*PlanApprovalOperator.template_fields, "action_ids")

    def __init__(self, *, action_ids: Any = (), **kwargs: Any) -> None:
        super().__init__(kind=approval.TRIAGE, **kwargs)
        self.action_ids = action_ids

    def on_rejected(self, warehouse: Any, result: dict[str, Any]) -> None:
        from findings_provider.pipeline import triage

        for action_id in as_int_list(self.action_ids, "action_ids"):
            warehouse.update_triage_action(
                action_id, status="failed", error=f"{triage.REJECTED} by {responder(result) or 'a person'}"
            )
        self.log.info("triage plan rejected: nothing is triaged")


class BulkTriageOperator(FindingsBaseOperator):
    """Bulk-triage findings by policy, in requests of at most 3000 ids, recording each in ``triage_actions``.

    With ``action_ids`` (a plan recorded by ``PlanTriageOperator``) it executes exactly that plan; without,
    it plans and executes in one go. Every triaged id the service reports (including same-fingerprint
    findings on other refs) is updated in the warehouse. Dry-run plans are never sent. Returns counts.

    :param action_ids: recorded requests to execute (templated); None: plan now.
    :param dry_run: when planning here, only record the plan (templated).
    :param policies: the triage policies (``autotriage_triage.policies`` of pipeline.yaml): the plan's requests
        are re-read by them before they are sent.
    :param chunk_size: ids per request when planning here, 1..3000.
    """

    operator_extra_links = (FindingsTriagedLink(),)

    lineage_reads = ("findings",)
    lineage_writes = ("triage_actions", "findings", "write_ledger", "dropped_findings")

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "action_ids", "is_dry_run")
    ui_color = "#f9d7b5"

    def __init__(
        self,
        *,
        action_ids: Any = None,
        dry_run: Any = False,
        policies: Sequence[TriagePolicy | dict[str, Any]],
        chunk_size: int = _TRIAGE.chunk_size,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.action_ids = action_ids
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.policies = TriagePolicy.coerce_all(policies)
        self.chunk_size = chunk_size

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.pipeline import triage

        warehouse = self.warehouse_hook.get_warehouse()
        policies = self.policies
        dag_id, run_id = _identity(context)
        if self.action_ids is None:
            plans = triage.plan_triage(warehouse, policies, chunk_size=_chunk_size(self.chunk_size))
            over = triage.approval_reasons(plans, None)
            if over:
                raise approval.ApprovalError(
                    "; ".join(over) + ". Nothing was sent: run the plan with an approval step (the "
                    "autotriage_triage DAG asks a person in the UI), or raise the cap in pipeline.yaml"
                )
            action_ids = triage.record_plan(
                warehouse, plans, dry_run=as_bool(self.is_dry_run, "dry_run"), dag_id=dag_id, run_id=run_id
            )
        else:
            action_ids = as_int_list(self.action_ids, "action_ids")
            problem = approval.missing_approval(approval.get_plan(warehouse, approval.TRIAGE, run_id))
            if problem:
                raise approval.ApprovalError(f"not triaging: {problem}")
        counts = triage.execute_plan(self.api_hook.client, warehouse, action_ids, policies)
        self.log.info("bulk triage: %d request(s) sent, %d findings triaged, %d warehouse rows refreshed, %d "
                      "dropped by the fresh re-read (%d requests), %d read back after the write (%d requests)%s",
                      counts["requests"], counts["triaged"], counts["refreshed"], counts["dropped"],
                      counts["reread_requests"], counts["settled"], counts["settle_requests"],
                      f"; {counts['skipped_dry_run']} dry-run request(s) not sent" if counts["skipped_dry_run"] else "")
        return {**counts, "actions": len(action_ids)}
