"""What the suite expects differently on the Airflow versions it runs on: 3.3 (``make test``) and 3.2, the lowest
the provider declares (``make test-lowest``, run by ``make test`` too). One place, so a test states its
expectation once and the difference is named, never silently tolerated.
"""

from __future__ import annotations

from importlib.metadata import version

from packaging.version import Version

AIRFLOW = Version(version("apache-airflow"))
AIRFLOW_3_3 = AIRFLOW >= Version("3.3.0")


def scheduler_param_error() -> type[Exception]:
    """What the scheduler's copy of a DAG's params raises for a bad run conf.

    3.3 raises ``ParamValidationError``; 3.2's serialized params raise a plain ``ValueError`` with the same message
    (``Invalid input for param <name>: ...``).
    """
    if AIRFLOW_3_3:
        from airflow.sdk.exceptions import ParamValidationError

        return ParamValidationError
    return ValueError


# A cron schedule as the timetable reports it: 3.3 expands presets such as "@daily", 3.2 keeps them as written.
DAILY_CRON = "0 0 * * *" if AIRFLOW_3_3 else "@daily"
