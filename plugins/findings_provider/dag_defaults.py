"""Defaults shared by every pipeline DAG: owner, retries with exponential backoff, the API pool."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict

# The names, defined in ``names.py``, kept importable from here for DAG files written against this module.
from findings_provider.names import (  # noqa: F401
    API_POOL,
    APPROVAL_DAGS,
    FINDINGS_DAGS,
    GOVERNANCE_DAGS,
    OWNER,
    PIPELINE_DAGS,
)


def default_args(alerts: Any = None, **overrides: Any) -> dict[str, Any]:
    """``default_args`` for a pipeline DAG: every task retries with exponential backoff and uses the API pool.

    Task-level retries handle longer outages; the client's own retries handle short ones. Errors no retry can fix
    fail at once (``AirflowFailException``) and skip the remaining retries. A task that fails for good sends a
    ``pipeline_failed`` alert (``FindingsAlertNotifier``) through the channels of ``alerts`` (an ``AlertsConfig``
    or its dict: ``alerts`` of pipeline.yaml; None: logged as unrouted).
    """
    from findings_provider.notifications import FindingsAlertNotifier

    args: dict[str, Any] = {
        "owner": OWNER,
        "retries": 3,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=15),
        "pool": API_POOL,
        "on_failure_callback": [FindingsAlertNotifier("pipeline_failed", alerts=alerts)],
    }
    args.update(overrides)
    return args


START_DATE = datetime(2024, 1, 1, tzinfo=timezone.utc)


def schedule_for(cron: str | None, assets: Any = None) -> Any:
    """A cron schedule, an Asset schedule, or both (``AssetOrTimeSchedule``); ``None`` when neither is set."""
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable

    timetable = CronTriggerTimetable(cron, timezone="UTC") if cron else None
    if timetable is not None and assets is not None:
        return AssetOrTimeSchedule(timetable=timetable, assets=assets)
    return timetable if timetable is not None else assets


def dag_settings(config: Any, dag_id: str, *, schedule: str | None, assets: Any = None) -> dict[str, Any]:
    """The ``DAG(...)`` keyword arguments every pipeline DAG shares (``config``: the loaded pipeline.yaml), its
    ``dag_id`` included, with the Deadline alert that ``alerts.deadlines`` gives it."""
    settings: dict[str, Any] = {
        "dag_id": dag_id,
        "schedule": schedule_for(schedule, assets),
        "start_date": START_DATE,
        "catchup": False,
        "max_active_runs": 1,
        "default_args": default_args(config.alerts, pool=config.pool.name),
        "render_template_as_native_obj": True,
    }
    deadline = deadline_for(config, dag_id)
    if deadline is not None:
        settings["deadline"] = deadline
    return settings


def deadline_for(config: Any, dag_id: str) -> Any:
    """The DAG's Deadline alert (Airflow 3.2+): ``alerts.deadlines.<dag_id>`` minutes after a run was queued, a run
    not finished sends ``deadline_missed`` through the alert channels (``notifications.deadline_missed``, run by
    the triggerer). None when the DAG has no deadline."""
    minutes = config.alerts.deadlines.minutes(dag_id)
    if minutes is None:
        return None
    from airflow.sdk.definitions.callback import AsyncCallback
    from airflow.sdk.definitions.deadline import DeadlineReference

    from findings_provider.alerts import alerts_kwargs
    from findings_provider.compat import deadline_alert

    return deadline_alert(
        name=f"{dag_id} not finished {minutes:g} minutes after it was queued",
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(minutes=minutes),
        callback=AsyncCallback("findings_provider.notifications.deadline_missed",
                               kwargs={"minutes": minutes, "alerts": alerts_kwargs(config.alerts)}),
    )


class ConnIds(TypedDict):
    """The connection keyword arguments every operator of the pipeline takes."""

    findings_conn_id: str
    warehouse_conn_id: str


def conn_ids(config: Any) -> ConnIds:
    """``findings_conn_id`` and ``warehouse_conn_id`` keyword arguments from the loaded pipeline.yaml."""
    return {
        "findings_conn_id": config.connections.api_conn_id,
        "warehouse_conn_id": config.connections.warehouse_conn_id,
    }


def dry_run_param(default: bool, description: str) -> Any:
    """The ``dry_run`` param of a DAG's trigger form (boolean, titled alike in every DAG)."""
    from airflow.sdk import Param

    return Param(default, type="boolean", title="Dry run", description=description)


def cap_param(setting: str) -> Any:
    """The param that lowers every write policy's ``setting`` (``max_findings``, ``max_tickets``) for one run."""
    from airflow.sdk import Param

    return Param(
        None,
        type=["null", "integer"],
        minimum=1,
        title="Cap per policy for this run",
        description=f"Lowers every policy's {setting} for this run; it never raises one (above the file's cap a "
        "person approves).",
    )


def approval_steps(
    config: Any, plan: Any, *, approval_task_id: str, write_task_id: str, operator: Any = None,
    response_timeout: timedelta = timedelta(days=1), **extra: Any
) -> tuple[Any, Any]:
    """The approval pattern of a write: a branch on the plan's ``needs_approval`` and the approval task.

    ``plan`` returns ``approval_subject`` and ``approval_body`` and pushes ``needs_approval``; the approval
    (``operator``, default ``PlanApprovalOperator``; ``extra`` its own arguments, such as ``kind``) records the
    answer, which the write task checks. Unanswered within ``response_timeout`` (a day by default) means Reject:
    nothing is written and the next run asks again.
    """
    from findings_provider.notifications import FindingsAlertNotifier
    from findings_provider.operators.approval import ApprovalBranchOperator, PlanApprovalOperator

    check = ApprovalBranchOperator(
        task_id="check_approval",
        needs_approval=plan.output["needs_approval"],
        approval_task_id=approval_task_id,
        proceed_task_id=write_task_id,
        pool="default_pool",
    )
    approve = (operator or PlanApprovalOperator)(
        task_id=approval_task_id,
        subject=f"{{{{ ti.xcom_pull(task_ids='{plan.task_id}')['approval_subject'] }}}}",
        body=f"{{{{ ti.xcom_pull(task_ids='{plan.task_id}')['approval_body'] }}}}",
        warehouse_conn_id=config.connections.warehouse_conn_id,
        defaults="Reject",
        response_timeout=response_timeout,
        pool="default_pool",
        # someone is told, with a link to the page
        notifiers=[FindingsAlertNotifier("approval_waiting", alerts=config.alerts)],
        **extra,
    )
    return check, approve
