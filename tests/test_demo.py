"""The demo's order (``devtools/demo.py``): nothing that reads the warehouse or writes to the service runs before
the first extraction has finished, tickets wait for a finished triage, the triage asks for approval, and the
alerts go to the demo's mail catcher."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from findings_provider.config import PipelineConfig, load_pipeline_config, load_projects_file
from findings_provider.names import PIPELINE_DAGS

from devtools.demo import (
    AFTER_EXTRACTION,
    AFTER_TRIAGE,
    DEMO_APPROVAL_THRESHOLD,
    SMTP_CONN_ID,
    SOURCE_CONFIG,
    TRIGGERED,
    Staging,
    write_demo_config,
)


class FakeApi:
    """Airflow's REST API as the demo uses it: pause switches, triggers, and the runs a test says exist."""

    def __init__(self) -> None:
        self.paused: dict[str, bool] = dict.fromkeys(PIPELINE_DAGS, False)  # a reused home: all unpaused
        self.triggered: list[str] = []
        self.states: dict[str, list[str]] = {}

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.paused[dag_id] = paused

    def trigger(self, dag_id: str, note: str | None = None) -> dict[str, Any]:
        self.triggered.append(dag_id)
        return {"dag_run_id": f"manual__{dag_id}"}

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """Runs in the given states; a finished one ended now, a ``success-before`` one before the demo started."""
        now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
        return [{"state": "success", "end_date": "2026-01-01T00:00:00Z"} if s == "success-before" else
                {"state": s, "end_date": now if s in ("success", "failed") else None}
                for s in self.states.get(dag_id, [])]

    def unpaused(self) -> set[str]:
        return {d for d, p in self.paused.items() if not p}


def test_the_stages_start_in_the_pipelines_order() -> None:
    api, said = FakeApi(), list[str]()
    staging = Staging(api, said.append, "http://ui")
    staging.start()
    assert api.triggered == list(TRIGGERED)
    assert api.unpaused() == set(TRIGGERED)
    assert set(TRIGGERED) | set(AFTER_EXTRACTION) | set(AFTER_TRIAGE) == set(PIPELINE_DAGS)

    api.states["findings_extraction"] = ["success-before", "running"]  # a reused home's run does not count
    staging.step()
    assert api.unpaused() == set(TRIGGERED)  # the extraction is still writing: nothing else runs

    api.states["findings_extraction"] = ["running", "success"]
    staging.step()
    assert api.unpaused() == set(TRIGGERED) | set(AFTER_EXTRACTION)
    assert any("http://ui/plugin/findings#approvals" in line for line in said)

    api.states["autotriage_triage"] = ["running"]  # waiting for its approval
    staging.step()
    assert "ticket_creation" not in api.unpaused()

    api.states["autotriage_triage"] = ["success"]
    staging.step()
    assert api.unpaused() == set(PIPELINE_DAGS)


def test_without_trigger_nothing_is_triggered_but_the_order_holds() -> None:
    api = FakeApi()
    staging = Staging(api, lambda _: None, "http://ui")
    staging.start(trigger=False)
    assert api.triggered == []
    assert api.unpaused() == set(TRIGGERED)


def test_the_demo_config_is_the_projects_with_a_triage_that_asks_for_approval(tmp_path: Path) -> None:
    written = write_demo_config(SOURCE_CONFIG, tmp_path / "demo" / "pipeline.yaml")
    demo = load_pipeline_config(written)
    source = load_pipeline_config(SOURCE_CONFIG)
    assert demo.autotriage_triage.approval_threshold == DEMO_APPROVAL_THRESHOLD
    assert source.autotriage_triage.approval_threshold != DEMO_APPROVAL_THRESHOLD
    strip = {"source", "autotriage_triage", "project_settings", "alerts"}
    assert demo.model_dump(exclude=strip) == source.model_dump(exclude=strip)
    # the alerts go to the demo's mail catcher (tests/test_mail_catcher.py); the rest of the section is the source's
    assert demo.alerts.model_dump(exclude={"channels"}) == source.alerts.model_dump(exclude={"channels"})
    assert [getattr(c, "conn_id", None) for c in demo.alerts.channels] == [SMTP_CONN_ID]
    assert demo.autotriage_triage.model_dump(exclude={"approval_threshold"}) == \
        source.autotriage_triage.model_dump(exclude={"approval_threshold"})
    assert isinstance(demo, PipelineConfig)
    assert load_projects_file(demo) == load_projects_file(source)  # the same projects file, wherever the copy is
    assert demo.project_settings.model_dump(exclude={"file"}) == source.project_settings.model_dump(exclude={"file"})
    assert yaml.safe_load(written.read_text())["autotriage_triage"]["approval_threshold"] == DEMO_APPROVAL_THRESHOLD
