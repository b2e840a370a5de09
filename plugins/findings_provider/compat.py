"""Airflow names the provider imports from one place.

Since the provider requires Airflow 3.2 (the lowest version its suite runs on, ``make test-lowest``), every one of
them comes from the task SDK; a name that moves in a later release gets its fallback here, and only here.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import AssetOrTimeSchedule, BaseBranchOperator, CronTriggerTimetable, conf
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowNotFoundException,
    AirflowSensorTimeout,
    AirflowSkipException,
    DownstreamTasksSkipped,
    ParamValidationError,
    TaskDeferred,
)

__all__ = ["AirflowException", "AirflowFailException", "AirflowNotFoundException", "AirflowSensorTimeout",
           "AirflowSkipException", "AssetOrTimeSchedule", "BaseBranchOperator", "CronTriggerTimetable",
           "DownstreamTasksSkipped", "ParamValidationError", "TaskDeferred", "deadline_alert", "default_deferrable"]


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable``: whether an operator that can defer does so unless told."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)


def deadline_alert(*, name: str, **kwargs: Any) -> Any:
    """A ``DeadlineAlert`` (``kwargs``: reference, interval, callback) named ``name`` where Airflow names them
    (3.3; 3.2's has no name). Imported when called: DAG files build one at parse time, and only when they use one."""
    import inspect

    from airflow.sdk.definitions.deadline import DeadlineAlert

    if "name" in inspect.signature(DeadlineAlert).parameters:
        kwargs["name"] = name
    return DeadlineAlert(**kwargs)
