"""Answer a Human-in-the-loop approval of a running ``dag.test()`` the way the HITL REST API does.

On Airflow 3.3 ``dag.test()`` parks an ``ApprovalOperator`` task in ``awaiting_input`` until a response is
recorded from outside (the Required Actions UI or the HITL REST API). ``Approver`` does what that API does
(``update_hitl_detail``): it writes the response to the task's ``hitl_detail`` row and resumes the task with
``handle_event_submit``; the operator then resumes in ``execute_complete`` exactly as in production. Airflow 3.2
has no ``awaiting_input`` state: the task is deferred to a trigger that polls its ``hitl_detail`` row, so there
the written response is all the API does too. Used by the
governance DAG tests and by the pipeline DAGs' ``dag.test()`` runner (``chaos/dagrun.py``). Outside a DAG run,
``answer`` drives an approval task's completion handler the way that response resumes it (the operator tests).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any

from present import present

#: Seconds an answered task may stay awaiting input before :class:`Approver` resumes it again.
RESUBMIT_AFTER = 2.0


class Approver(threading.Thread):
    """Answers ``task_id`` of ``dag_id`` with ``choice`` once it waits for input (Reject after ``timeout``)."""

    def __init__(self, dag_id: str, task_id: str, choice: str, timeout: float = 60.0) -> None:
        super().__init__(daemon=True)
        self.dag_id, self.task_id, self.choice, self.timeout = dag_id, task_id, choice, timeout
        self.asked: dict[str, Any] = {}
        self.done = threading.Event()

    def run(self) -> None:
        from airflow._shared.timezones import timezone
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select

        # Airflow 3.3 parks the task in awaiting_input and resumes it on the response; 3.2 defers it to a trigger
        awaiting = getattr(TaskInstanceState, "AWAITING_INPUT", None)
        waiting_state = awaiting or TaskInstanceState.DEFERRED
        deadline = time.monotonic() + self.timeout
        answered: Any = None  # the id of the task instance answered, once it is
        submitted: float | None = None  # when it was last resumed (time.monotonic())
        while not self.done.is_set():
            with create_session() as session:
                query = select(TaskInstance).where(TaskInstance.state == waiting_state)
                if answered is None:
                    query = query.where(TaskInstance.dag_id == self.dag_id, TaskInstance.task_id == self.task_id)
                else:
                    query = query.where(TaskInstance.id == answered)
                ti = session.scalars(query).first()
                detail = None
                if ti is not None:
                    detail = session.scalars(select(HITLDetail).where(HITLDetail.ti_id == ti.id)).one_or_none()
                if detail is not None and answered is None:
                    self.asked = {"subject": detail.subject, "body": detail.body, "options": detail.options}
                    # on timeout answer Reject anyway, so a broken run cannot hang the test session
                    choice = self.choice if time.monotonic() < deadline else "Reject"
                    detail.responded_by = {"id": "test-approver", "name": "Test Approver"}
                    detail.responded_at = timezone.utcnow()
                    detail.chosen_options = [choice]
                    detail.params_input = {}
                    answered = present(ti).id
                    if awaiting is None:
                        return  # 3.2: the trigger reads the response
                # 3.3: resume it, and again if it is still awaiting input after RESUBMIT_AFTER seconds. The task
                # asks for input through the execution API; dag.test() sets the state the run ended in
                # (awaiting_input) on the task instance once the run returns (``_run_task``: ``ti.set_state``), so
                # an answer that lands in between is overwritten and dag.test() would wait for good. A task that
                # resumed is no longer awaiting input.
                if detail is not None and (submitted is None or time.monotonic() - submitted > RESUBMIT_AFTER):
                    handle_event_submit(
                        TriggerEvent(detail.as_resume_event_payload()), task_instance=present(ti), session=session
                    )
                    submitted = time.monotonic()
            time.sleep(0.2)


def run_with_answer(
    dag: Any, task_id: str, choice: str, run_conf: dict[str, Any] | None = None
) -> tuple[Any, Approver]:
    """``dag.test(run_conf)`` with ``task_id`` answered ``choice``; returns the run and the approver."""
    approver = Approver(dag.dag_id, task_id, choice)
    approver.start()
    try:
        run = dag.test(run_conf=run_conf or {})
    finally:
        approver.done.set()
        approver.join(timeout=5)
    return run, approver


def answer(operator: Any, context: dict[str, Any], choice: str, by: str = "alice") -> Any:
    """Resume ``operator`` (an approval task) with the event the Human-in-the-loop trigger sends when a person
    (``by``) answers ``choice``: its completion handler runs as in production. A task marked successful by hand
    never runs it."""
    event = {"chosen_options": [choice], "params_input": {}, "responded_at": datetime.now(timezone.utc),
             "responded_by_user": {"id": "7", "name": by}}
    return operator.execute_complete(context, event)
