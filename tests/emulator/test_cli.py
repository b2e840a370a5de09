"""Command-line switches: flat findings, retired policies, faults, deployment naming, extra tokens, a file
database; and deterministic data for a seed."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from findings_emulator.cli import main
from findings_emulator.testing import EmulatorProcess

from .emulator_helpers import assert_error

SLUG = "globex"
ID = "77"


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulator") / "state.db"


@pytest.fixture(scope="module")
def emulator_options(database: Path) -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) here: every switch of this module, a file database."""
    args = ("--flat-findings", "--retired-policies", "--deployment-id", ID, "--deployment-slug", SLUG,
            "--token", "second-token", "--db", str(database), "--fault", "findings:503,ok",
            "--fault", '{"operation": "scans_search", "schedule": ["429"], "retry_after": 5}')
    return {"findings": 1000, "extra_args": args}


def test_cli_faults_apply_from_the_start(api: httpx.Client, emulator: EmulatorProcess) -> None:
    assert api.get(f"/api/v1/deployments/{SLUG}/findings").status_code == 503
    limited = api.post(f"/api/v1/deployments/{ID}/scans/search", json={})
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "5"


def test_flat_findings_shape(api: httpx.Client) -> None:
    response = api.get(f"/api/v1/deployments/{SLUG}/findings", params={"issue_type": "sca"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"findings"}
    assert len(body["findings"]) == 100
    assert all("reachability" in f for f in body["findings"])


def test_retired_policies_are_410(api: httpx.Client) -> None:
    assert_error(api.get(f"/api/v1/deployments/{ID}/policies"), 410)
    assert_error(api.get(f"/api/v1/deployments/{ID}/policies/2101"), 410)
    body = assert_error(api.put(f"/api/v1/deployments/{ID}/policies/2101",
                                json={"rulePath": "a.b.c", "policyMode": "MODE_BLOCK"}), 410)
    assert "retired" in body["error"]
    assert body["code"] == "DEPLOYMENT_MIGRATED"  # the real service's error code


def test_deployment_naming_and_every_token(emulator: EmulatorProcess) -> None:
    for token in ("test-token", "second-token"):
        response = httpx.get(f"{emulator.base_url}/api/v1/deployments", headers={"Authorization": f"Bearer {token}"})
        assert response.json()["deployments"] == [{"id": ID, "deploymentId": ID, "name": "Globex", "slug": SLUG,
                                                   "deploymentSlug": SLUG}]
    assert (emulator.deployment_id, emulator.deployment_slug) == (ID, SLUG)


def test_file_database_holds_the_data(emulator: EmulatorProcess, database: Path) -> None:
    assert emulator.stats()["counts"]["findings"] == {"sast": 700, "sca": 300, "secrets": 200}
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as connection:
        assert connection.execute("SELECT count(*) FROM finding_bodies").fetchone() == (1200,)


def test_same_seed_same_data(api: httpx.Client, emulator: EmulatorProcess) -> None:
    def snapshot() -> list[tuple[int, str, str, str]]:
        items = api.get(f"/api/v1/deployments/{SLUG}/findings", params={"page_size": 3000}).json()["findings"]
        return sorted((f["id"], f["match_based_id"], f["rule_name"], f["ref"]) for f in items)

    emulator.reset(seed=42)
    first = snapshot()
    emulator.reset(seed=42)
    assert snapshot() == first
    emulator.reset(seed=43)
    assert snapshot() != first


@pytest.mark.parametrize("args", [["--fault", "bogus"], ["--fault", "findings:teapot"], ["--deployment-id", "x1"]])
def test_invalid_command_lines_exit_with_a_message(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
