"""The one fake task context of the operator, sensor and governance tests: what ``execute(context)`` reads.

An operator under test gets ``{"ti": ..., "task_instance": ..., "run_id": ..., "params": {}}``; its task instance
keeps XComs in memory, keyed by (task id, key), so a test can seed what upstream tasks pushed and read what the
operator pushed.
"""

from __future__ import annotations

from typing import Any


class FakeTaskInstance:
    """The task instance an operator sees at run time: ids and an in-memory XCom store."""

    def __init__(self, dag_id: str = "test_dag", run_id: str = "manual__test", *, task_id: str = "task",
                 xcoms: dict[tuple[str, str], Any] | None = None) -> None:
        self.dag_id = dag_id
        self.run_id = run_id
        self.task_id = task_id
        self.map_index = -1
        self.xcoms: dict[tuple[str, str], Any] = dict(xcoms or {})

    @property
    def xcom(self) -> dict[str, Any]:
        """What this task pushed, by key."""
        return {key: value for (task_id, key), value in self.xcoms.items() if task_id == self.task_id}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[(self.task_id, key)] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        return self.xcoms.get((task_ids, key))


def make_context(ti: FakeTaskInstance | str | None = None) -> dict[str, Any]:
    """The context ``execute`` gets, around ``ti`` (a task instance, or the run id of a new one)."""
    if not isinstance(ti, FakeTaskInstance):
        ti = FakeTaskInstance(run_id=ti or "manual__test")
    return {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "params": {}}


def run_operator(operator: Any, ti: FakeTaskInstance) -> Any:
    """Execute an operator as its task would, keep its result as XCom ``return_value``, return it."""
    ti.task_id = operator.task_id
    result = operator.execute(make_context(ti))
    ti.xcoms[(operator.task_id, "return_value")] = result
    return result
