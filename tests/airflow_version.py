"""What the suite expects differently on the Airflow versions it runs on: 3.3 (``make test``) and 3.2, the lowest
the provider declares (``make test-lowest``, run by ``make test`` too). One place, so a test states its
expectation once and the difference is named, never silently tolerated.
"""

from __future__ import annotations

import functools
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


def share_the_in_process_execution_api() -> None:
    """One in-process Execution API per process for ``dag.test()``, as 3.3's task SDK has it.

    ``dag.test()`` runs each task against an Execution API app in the same process. 3.3 builds that app once per
    process (``functools.lru_cache`` on ``supervisor.in_process_api_server``); 3.2 builds a new one for every task
    (Cadwyn's versioned routers and their pydantic schemas: seconds of CPU) and starts an event-loop thread
    for each that it never stops. Called before the suites' ``dag.test()`` runs, it caches 3.2's the same way, so a
    DAG run's CPU on 3.2 is its tasks' own. On 3.3 it changes nothing. What a task does is unchanged: the app, its
    routes and its overrides are the ones 3.2 builds, made once.
    """
    from airflow.sdk.execution_time import supervisor

    if not hasattr(supervisor.in_process_api_server, "cache_info"):
        supervisor.in_process_api_server = functools.lru_cache(maxsize=1)(supervisor.in_process_api_server)
