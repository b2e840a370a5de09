"""Names that moved between the Airflow versions the provider supports (3.1 to 3.3): import them from here.

Airflow 3.2 moved the task exceptions into the task SDK (``airflow.sdk.exceptions``); 3.1 has them in
``airflow.exceptions`` only. The SDK's module is tried first, so a newer Airflow never sees a deprecated import.
"""

from __future__ import annotations

try:
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        ParamValidationError,
        TaskDeferred,
    )
except ImportError:  # Airflow 3.1
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        ParamValidationError,
        TaskDeferred,
    )


try:
    from airflow.sdk import BaseBranchOperator
except ImportError:  # Airflow 3.1: the standard provider's
    from airflow.providers.standard.operators.branch import BaseBranchOperator  # type: ignore[no-redef]

try:
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable
except ImportError:  # Airflow 3.1: the timetables
    from airflow.timetables.assets import AssetOrTimeSchedule  # type: ignore[no-redef]
    from airflow.timetables.trigger import CronTriggerTimetable  # type: ignore[no-redef]

__all__ = ["AirflowException", "AirflowFailException", "AirflowNotFoundException", "AirflowSensorTimeout",
           "AssetOrTimeSchedule", "BaseBranchOperator", "CronTriggerTimetable", "ParamValidationError", "TaskDeferred"]
