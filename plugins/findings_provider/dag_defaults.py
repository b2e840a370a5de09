"""Defaults shared by every pipeline DAG: owner, retries with exponential backoff, the API pool."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

API_POOL = "findings_api"
OWNER = "appsec"


def default_args(**overrides: Any) -> dict[str, Any]:
    """``default_args`` for a pipeline DAG: every task retries with exponential backoff and uses the API pool.

    Task-level retries handle longer outages; the client's own retries handle short ones. Errors no retry can fix
    fail at once (``AirflowFailException``) and skip the remaining retries.
    """
    args: dict[str, Any] = {
        "owner": OWNER,
        "retries": 3,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=15),
        "pool": API_POOL,
    }
    args.update(overrides)
    return args
