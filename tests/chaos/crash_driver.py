"""Child process of the crash tests: one pipeline step through the product code, the way its operator runs it.

    python crash_driver.py STEP CONFIG_JSON

STEP is ``extract``, ``triage`` or ``tickets``. CONFIG_JSON names the emulator, the token and the warehouse, and
optionally ``die_after``: a client operation and a count; after that many responses of that operation the
process SIGKILLs itself (the crash lands after the server answered, before the warehouse recorded the answer).
The parent may also SIGKILL it from outside at any time. Prints ``DONE <json>`` when the step completes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import timedelta
from typing import Any

from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.config import load_pipeline_config
from findings_provider.pipeline import extraction, tickets, triage
from findings_provider.warehouse import Warehouse, make_engine


def die_after(client: FindingsClient, operation: str, count: int) -> None:
    """SIGKILL this process right after the ``count``-th successful ``operation`` call returns."""
    original = getattr(client, operation)
    calls = {"n": 0}

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] >= count:
            print(f"KILLING after {operation} #{calls['n']}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(client, operation, wrapped)


def main(step: str, config: dict[str, Any]) -> dict[str, Any]:
    client = FindingsClient(config["base_url"], config["token"], deployment_id=config["deployment_id"],
                            deployment_slug=config["deployment_slug"], timeout=config.get("timeout", 30.0),
                            retry_policy=RetryPolicy(max_retries=config.get("max_retries", 3), backoff_base=0.05,
                                                     backoff_max=0.2))
    if config.get("die_after"):
        die_after(client, *config["die_after"])
    warehouse = Warehouse(make_engine(config["warehouse"]))
    warehouse.create_all()
    run_id = config.get("run_id", "crash")
    pipeline = load_pipeline_config()
    with client:
        if step == "extract":
            return extraction.run_extraction(client, warehouse, ["sast", "sca"], page_size=config.get("page_size", 100),
                                             overlap=timedelta(minutes=config.get("overlap_minutes", 60)))
        if step == "triage":
            plans = triage.plan_triage(warehouse, pipeline.autotriage_triage.policies,
                                       chunk_size=config.get("chunk_size", 10))
            action_ids = triage.record_plan(warehouse, plans, dry_run=False, dag_id="autotriage_triage",
                                            run_id=run_id)
            return triage.execute_plan(client, warehouse, action_ids, pipeline.autotriage_triage.policies)
        if step == "tickets":
            return tickets.run_tickets(client, warehouse, pipeline.ticket_creation.policies,
                                       tickets_per_call=config.get("tickets_per_call", 3), run_id=run_id)
    raise SystemExit(f"unknown step {step!r}")


if __name__ == "__main__":
    outcome = main(sys.argv[1], json.loads(sys.argv[2]))
    print("DONE " + json.dumps(outcome, default=str), flush=True)
