"""What several operator test modules share: the shipped pipeline.yaml's policies (passed to the operators as the DAG
files pass them), a first extraction and the client of the default API connection (a person's answer to an approval
request is ``hitl.answer``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from findings_provider.client import FindingsClient
from findings_provider.config import load_pipeline_config
from findings_provider.hooks.findings_api import FindingsApiHook
from findings_provider.operators.findings import ExtractFindingsOperator
from task_context import make_context

#: The shipped ``include/pipeline.yaml``, read once as a DAG file reads it when it is parsed.
SHIPPED = load_pipeline_config()
#: The shipped write policies and tuning rules, as the DAG files pass them to the operators.
TRIAGE_POLICIES = SHIPPED.autotriage_triage.policies
TICKET_POLICIES = SHIPPED.ticket_creation.policies
TUNING_RULES = SHIPPED.policy_tuning.rules


def extract(types: Any = "['sast', 'sca']") -> dict[str, Any]:
    """Pull findings of ``types`` from the emulator into the warehouse of the default connections."""
    return ExtractFindingsOperator(task_id="extract", issue_types=types).execute(make_context())


@contextmanager
def default_api() -> Iterator[FindingsClient]:
    """The client of the default API connection (the emulator's), as an operator gets it."""
    hook = FindingsApiHook()
    try:
        yield hook.client
    finally:
        hook.close()
