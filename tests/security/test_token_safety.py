"""The API token appears nowhere: every DAG is run on its success path and on failure paths where the server
answers 401 and 500 with a body echoing the request's headers (``Authorization: Bearer <token>`` included:
emulator fault kinds ``401_echo`` / ``500_echo``), including the deferred scan sensor's trigger; then every
place the runs wrote to is scanned for the token and for any 12-character piece of it, in every form a text can
hold it (raw, repr-escaped as text and as bytes, percent-encoded, JSON-escaped):

- task logs and everything else under the runs' AIRFLOW_HOME (``logs/``, the metadata database file byte for
  byte: XComs, rendered template fields, trigger rows, task instance notes, ...);
- the XCom values and rendered template fields once more, decoded from the metadata database;
- the warehouse files (every table, including the error texts of ``triage_actions`` and ``ticket_actions``);
- the report files (``FINDINGS_REPORT_DIR``);
- everything the runs printed (stdout and stderr), and this process's captured output;
- the emulator's request log and its own log.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from chaos.dagrun import DAGS, Stack, dag_stack
from chaos.harness import TOKEN, settle, start_emulator, tally
from findings_emulator.faults import OPERATIONS
from findings_emulator.testing import EmulatorProcess
from findings_provider.client import RetryPolicy
from findings_provider.hooks.findings_api import FindingsApiHook
from findings_provider.names import PIPELINE_DAGS
from findings_provider.pipeline import extraction
from fixtures import client_of, connection_env, make_warehouse

pytestmark = pytest.mark.integration
ALL_DAGS = sorted(p.stem for p in DAGS.glob("*.py") if not p.name.startswith("_"))
ECHO_KINDS = ("401_echo", "500_echo")


def token_forms(token: str) -> set[str]:
    """The token as a text may hold it: raw, repr-escaped (``str`` and ``bytes``), percent-encoded, JSON-escaped."""
    return {
        token,
        repr(token)[1:-1],
        repr(token.encode())[2:-1],
        quote(token, safe=""),
        json.dumps(token)[1:-1],
        json.dumps(token, ensure_ascii=False)[1:-1],
    }


def token_pieces(token: str, size: int = 12) -> frozenset[str]:
    """Every ``size``-character piece of every form of ``token`` (a whole form when it is shorter)."""
    return frozenset(form[i : i + size] for form in token_forms(token) for i in range(max(1, len(form) - size + 1)))


PIECES = token_pieces(TOKEN)


def leaks(data: bytes | str, pieces: frozenset[str] = PIECES) -> list[str]:
    """The pieces of the token found in ``data`` (bytes read both as UTF-8 and as latin-1)."""
    texts = [data.decode("utf-8", "replace"), data.decode("latin-1")] if isinstance(data, bytes) else [data]
    return sorted(piece for piece in pieces if any(piece in text for text in texts))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("token-safety")
    with start_emulator(findings=200, extra_args=("--log-level", "debug")) as emu, \
            dag_stack(work, emu, config={"scan_monitoring": {"sensor_poke_interval": 0.3}}, suite="token_safety") as st:
        yield st


def preload(emu: EmulatorProcess, path: Path) -> None:
    warehouse = make_warehouse(path)
    with client_of(emu, retry_policy=RetryPolicy(max_retries=0, rng=random.Random(0))) as client:
        extraction.run_extraction(client, warehouse, ["sast", "sca"])
    warehouse.engine.dispose()


def test_the_token_appears_nowhere_after_every_dag_ran_and_failed(stack: Stack, capfd: pytest.CaptureFixture) -> None:
    emu = stack.emulator
    conn = stack.connect(max_retries=1)
    runs: dict[str, list[str]] = {}

    # 1. success paths: every DAG, in pipeline order, against a clean emulator
    emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=1)
    for dag_id in PIPELINE_DAGS:
        result = stack.run(dag_id, env=conn, retries=0)
        assert not result.error, result.message
        runs.setdefault(dag_id, []).append(str(result.state))
    assert runs["findings_extraction"] == ["success"]
    assert runs["ticket_creation"] == ["success"]

    # 2. failure paths: every operation answers 401 or 500 with the request's headers echoed, on a warehouse
    #    holding fresh selections so that triage and ticket creation send requests too
    for kind in ECHO_KINDS:
        emu.reset()
        warehouse = stack.work / f"warehouse-{kind}.db"
        preload(emu, warehouse)
        env = {**conn, **connection_env(warehouse=warehouse)}
        for dag_id in ALL_DAGS:
            emu.clear_faults()
            # the writes re-read their findings first: the findings listing answers, so that the write itself
            # meets the echo too
            spared = ("findings",) if dag_id in ("autotriage_triage", "ticket_creation") else ()
            for operation in OPERATIONS:
                if operation not in spared:
                    emu.add_fault(operation=operation, probability=1.0, kinds=[kind])
            result = stack.run(dag_id, env=env, retries=0)
            assert not result.error, result.message
            runs.setdefault(dag_id, []).append(str(result.state))
            tally("token_safety.failure_runs")
        echoed = [e for e in emu.requests() if e["fault"] == kind]
        assert len(echoed) >= len(ALL_DAGS), "the echo fault did not answer the DAGs' requests"
        assert {e["operation"] for e in echoed} >= {"findings", "triage", "tickets", "scans_search"}
        settle(emu)

    # 3. the deferred sensor's trigger (async client) meets the echo while search succeeds
    for kind in ECHO_KINDS:
        emu.reset()
        emu.create_scan(status="SCAN_STATUS_RUNNING", finish_after=30)
        emu.add_fault(operation="scan_get", probability=1.0, kinds=[kind])
        result = stack.run("scan_monitoring", env=conn, retries=0)
        assert not result.error, result.message
        assert any(t.startswith("wait_for_scan") and s == "failed" for t, s in result.tis.items()), result.tis
        assert any(e["fault"] == kind for e in emu.requests()), "the trigger never met the echo"
        runs["scan_monitoring"].append(str(result.state))
        settle(emu)

    # 4. the hook's connection test with an echoing 401 (its message is what the UI shows)
    emu.add_fault(operation="*", probability=1.0, kinds=["401_echo"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_FINDINGS_API_DEFAULT", conn["AIRFLOW_CONN_FINDINGS_API_DEFAULT"])
        ok, message = FindingsApiHook().test_connection()
    assert not ok
    assert "401" in message
    emu.clear_faults()

    for dag_id, states in runs.items():
        assert "failed" in states, f"{dag_id} never failed: its failure path was not exercised ({states})"
    tally("token_safety.dag_runs", sum(len(s) for s in runs.values()))
    tally("token_safety.dags", len(runs))

    # --- the scan ---------------------------------------------------------------------------------------------
    found: dict[str, list[str]] = {}
    scanned = 0

    def scan(name: str, data: bytes | str) -> None:
        nonlocal scanned
        scanned += 1
        pieces = leaks(data)
        if pieces:
            found[name] = pieces

    files = [p for p in stack.work.rglob("*") if p.is_file() and p.name not in ("runner.py",)]
    assert any(p.name == "airflow.db" for p in files)
    assert any(p.suffix == ".html" for p in files), "no report was written"
    for path in files:
        scan(str(path.relative_to(stack.work)), path.read_bytes())
    for number, output in enumerate(stack.outputs):
        scan(f"run output #{number}", output)
    scan("emulator request log", json.dumps(emu.requests()))
    scan("emulator log", emu.log_path.read_bytes())
    scan("hook test_connection message", message)
    out, err = capfd.readouterr()
    scan("test stdout", out)
    scan("test stderr", err)

    with sqlite3.connect(stack.home / "airflow.db") as db:
        xcoms = [str(row) for row in db.execute("SELECT dag_id, task_id, key, value FROM xcom")]
        rendered = [str(row) for row in db.execute("SELECT dag_id, task_id, rendered_fields FROM "
                                                   "rendered_task_instance_fields")]
        triggers = [str(row) for row in db.execute("SELECT kwargs FROM trigger")]
        notes = [str(row) for row in db.execute("SELECT next_kwargs, rendered_map_index FROM task_instance")]
    assert xcoms, "no XCom to scan in the metadata database"
    assert rendered, "no rendered template field to scan in the metadata database"
    for name, rows in (("xcom", xcoms), ("rendered fields", rendered), ("triggers", triggers), ("tis", notes)):
        for row in rows:
            scan(f"metadata {name}", row)
    for path in stack.work.glob("warehouse*.db"):
        with sqlite3.connect(path) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                for row in db.execute(f"SELECT * FROM {table}"):
                    scan(f"{path.name}:{table}", str(row))
        errors = sqlite3.connect(path).execute(
            "SELECT count(*) FROM triage_actions WHERE error IS NOT NULL").fetchone()[0]
        tally("token_safety.warehouse_error_rows", errors)
    tally("token_safety.items_scanned", scanned)
    assert not found, f"the token leaked into: {found}"


def test_the_scan_would_see_a_leak(tmp_path: Path) -> None:
    """The scanner itself: a token cut anywhere (an excerpt ending inside it) is still found."""
    assert leaks(f"Authorization: Bearer {TOKEN}")
    assert leaks(TOKEN[:14].encode())
    assert leaks(TOKEN[-13:])
    assert not leaks("Bearer ***")
    # a token that escaping and encoding change is found in each of its forms, whole or cut
    special = 'fp-"chaos"\\T0KEN/é+7c1e9b2a5d'
    pieces = token_pieces(special)
    found_in: dict[str, str | bytes] = {
        "percent-encoded": f"GET /x?token={quote(special, safe='')}&page=2",
        "JSON-escaped": json.dumps({"headers": {"Authorization": f"Bearer {special}"}}),
        "JSON-escaped, UTF-8": json.dumps({"a": special}, ensure_ascii=False).encode(),
        "repr": repr({"password": special}),
        "bytes repr": f"Illegal header value {('Bearer ' + special).encode()!r}",
        "cut": json.dumps(special)[:18],
    }
    assert {name: bool(leaks(text, pieces)) for name, text in found_in.items()} == dict.fromkeys(found_in, True)
    assert not leaks(json.dumps({"a": "Bearer ***"}), pieces)
