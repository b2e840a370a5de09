"""``parallel.py``: how the tests are placed on pytest-xdist workers, and what the workers send back."""

from __future__ import annotations

from pathlib import Path

import parallel
import pytest
from parallel import SHARED_WORKER, add_summaries, group_of, send_summary, summary_lines

TESTS = Path(__file__).resolve().parent


def test_every_module_sharing_the_stack_worker_exists_and_uses_a_stack() -> None:
    # a renamed module would silently leave the group: its stack would start beside the others
    for module in SHARED_WORKER:
        path = TESTS.parent / module
        assert path.is_file(), module
        text = path.read_text()
        assert "stack" in text, module
        assert "pytest.mark.e2e" in text or "pytest.mark.compose" in text, module


def test_the_stack_modules_are_one_unit_and_every_other_module_its_own() -> None:
    stacks = {group_of(f"{module}::test_x[a]") for module in SHARED_WORKER}
    assert len(stacks) == 1
    assert group_of("tests/dags/test_real_dialect_dags.py::test_a") == "tests/dags/test_real_dialect_dags.py"
    assert group_of("tests/dags/test_real_dialect_dags.py::test_b[x::y]") == group_of(
        "tests/dags/test_real_dialect_dags.py::test_a")
    assert group_of("tests/a/test_one.py::t") != group_of("tests/a/test_two.py::t")


class _Config:
    def __init__(self, workeroutput: dict | None) -> None:
        if workeroutput is not None:
            self.workeroutput = workeroutput


def test_summaries_of_the_workers_are_added_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "SUMMARIES", {})
    first: dict = {}
    second: dict = {}
    send_summary(_Config(first), "tally", {"runs": 2, "faults": 1})  # type: ignore[arg-type]
    send_summary(_Config(second), "tally", {"runs": 3})  # type: ignore[arg-type]
    send_summary(_Config(second), "timings", {"start": 1.5})  # type: ignore[arg-type]
    send_summary(_Config(second), "empty", {})  # type: ignore[arg-type]  # no section for nothing
    assert parallel.SUMMARIES == {}  # a worker keeps nothing itself: the controller adds up
    for output in (first, second, {}):  # the last worker sent nothing
        add_summaries(parallel.SUMMARIES, output)
    assert parallel.SUMMARIES == {"tally": {"runs": 5, "faults": 1}, "timings": {"start": 1.5}}
    assert summary_lines(parallel.SUMMARIES["tally"]) == ["runs: 5", "faults: 1"]
    assert summary_lines(parallel.SUMMARIES["timings"]) == ["    1.5s  start"]


def test_in_process_a_summary_is_kept_for_this_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "SUMMARIES", {"tally": {"runs": 1}})
    send_summary(_Config(None), "tally", {"runs": 2, "kills": 1})  # type: ignore[arg-type]
    assert parallel.SUMMARIES == {"tally": {"runs": 3, "kills": 1}}
