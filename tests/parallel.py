"""How the tests are placed on pytest-xdist workers, and what a worker sends back for the run's summary.

The tests are handed to the workers a module at a time, so that a module-scoped fixture (an emulator, a DAG runner,
a stack) is set up once; the modules that start Airflow stacks share one worker (run side by side, they starve each
other of the machine's cores); the long modules go out first, so that no worker starts one when the others are done.
``tests/conftest.py`` wires this in. (xdist's own ``loadgroup`` cannot do it on pytest 9.2: it renames node ids.)
"""

from __future__ import annotations

from typing import Any

import pytest

#: Modules that run on one worker, one after the other, in collection order: the tests that start real Airflow stacks
#: (the e2e stack is a session fixture shared by three of them; test_required_actions.py changes the emulator's
#: findings after the pipeline run that test_pipeline.py asserts on, so it comes after it).
SHARED_WORKER = {
    "tests/compose/test_compose_stack.py": "airflow-stacks",
    "tests/e2e/test_pipeline.py": "airflow-stacks",
    "tests/e2e/test_browser_ui.py": "airflow-stacks",
    "tests/e2e/test_celery.py": "airflow-stacks",
    "tests/e2e/test_required_actions.py": "airflow-stacks",
}
#: The markers of the long modules, longest first: their tests are handed out before the rest.
LONG_FIRST = ("compose", "e2e", "chaos", "bench", "install", "multiday", "integration")


def group_of(nodeid: str) -> str:
    """The unit of work that the test ``nodeid`` belongs to: its module, or the group :data:`SHARED_WORKER` names."""
    module = nodeid.split("::", 1)[0]
    return SHARED_WORKER.get(module, module)


def rank(item: pytest.Item) -> int:
    """Where ``item``'s module goes in the order the modules are handed out (:data:`LONG_FIRST`)."""
    for position, marker in enumerate(LONG_FIRST):
        if item.get_closest_marker(marker) is not None:
            return position
    return len(LONG_FIRST)


def make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling with :func:`group_of` as the scope, in the order the workers collected."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return ModuleScheduling(config, log)


#: The run's summary sections: title -> key -> value, added up over every worker that sent one (in-process, this
#: session's own). ``tests/conftest.py`` prints them at the end of the run.
SUMMARIES: dict[str, dict[str, float]] = {}


def send_summary(config: pytest.Config, title: str, values: dict[str, Any]) -> None:
    """Add ``values`` to the summary section ``title``: in an xdist worker by handing them to the controller (its
    :data:`SUMMARIES` adds up the workers'), in-process to this session's :data:`SUMMARIES`."""
    if not values:
        return
    output = getattr(config, "workeroutput", None)
    if output is None:
        add_summaries(SUMMARIES, {"summaries": {title: values}})
    else:
        output.setdefault("summaries", {})[title] = dict(values)


def add_summaries(into: dict[str, dict[str, float]], workeroutput: dict[str, Any]) -> None:
    """Add the summary sections of a finished worker (its ``workeroutput``) to ``into``."""
    for title, values in workeroutput.get("summaries", {}).items():
        section = into.setdefault(title, {})
        for key, value in values.items():
            section[key] = section.get(key, 0) + value


def summary_lines(values: dict[str, float]) -> list[str]:
    """A summary section's lines: seconds for a float (a timing), ``key: n`` for a count."""
    return [f"{value:7.1f}s  {key}" if isinstance(value, float) else f"{key}: {value}" for key, value in values.items()]
