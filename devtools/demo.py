"""The demo: ``make demo`` (after ``make venv``) runs this file.

It starts the findings API emulator with generated data and an Airflow with every component (API server,
scheduler, DAG processor, triggerer; LocalExecutor on SQLite) in ``.demo/airflow-home`` through the same launcher
as the e2e tests (``devtools/stack.py``), provisions the connections (environment variables) and the
``findings_api`` pool, prints the UI address and the login, and runs the pipeline in the order it is designed for
(:class:`Staging`): ``scan_monitoring`` and ``findings_extraction`` first (triggered once); the DAGs that read the
warehouse or write to the service only once the first extraction has finished (no scheduled run races it); the
triage asks for a person's approval (the demo's configuration, ``.demo/pipeline.yaml``, sets its
``approval_threshold`` to ``DEMO_APPROVAL_THRESHOLD``), and ``ticket_creation`` starts once a triage run has
finished. The pipeline's alerts (failed scans, missed deadlines, approvals waiting) are mailed through the
``smtp_default`` connection to a local mail catcher (``devtools/mail_catcher.py``), whose read-only page lists
them. Ctrl-C (or SIGTERM) stops every process it started. A second start reuses ``.demo/airflow-home`` (database,
password, logs).

Options: ``--host`` (default 127.0.0.1), ``--port`` (UI, default 8080 or a free port when taken),
``--emulator-port`` (default 8900 or a free one), ``--findings`` (emulator data volume, default 5000),
``--home``, ``--reset`` (start from an empty home), ``--no-trigger``.
Through make: ``make demo DEMO_ARGS="--port 9090"``.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # python devtools/demo.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from findings_provider.client.timeutil import parse_timestamp
from findings_provider.config import load_pipeline_config, projects_file_path
from findings_provider.names import GOVERNANCE_DAGS

from devtools.environment import REPO, EmulatorOptions
from devtools.mail_catcher import MailCatcher
from devtools.processes import port_is_free, raise_keyboard_interrupt
from devtools.stack import Stack, StackError

DEMO_HOME = REPO / ".demo" / "airflow-home"
#: The pipeline configuration the demo starts from, and the copy it runs with (beside its AIRFLOW_HOME).
SOURCE_CONFIG = REPO / "include" / "pipeline.yaml"
#: A triage that selects more findings than this waits for a person's approval (the generated data selects more).
DEMO_APPROVAL_THRESHOLD = 100
#: Where the demo's alerts are mailed (through ``SMTP_CONN_ID``, which points at the demo's mail catcher).
DEMO_ALERTS_TO = "appsec@example.test"
SMTP_CONN_ID = "smtp_default"
#: The order of the demo: unpaused (and triggered) at the start; once the first extraction finished; once a
#: triage run finished.
TRIGGERED = ("scan_monitoring", "findings_extraction")
AFTER_EXTRACTION = ("autotriage_triage", *GOVERNANCE_DAGS)
AFTER_TRIAGE = ("ticket_creation",)


def write_demo_config(source: Path, target: Path, threshold: int = DEMO_APPROVAL_THRESHOLD) -> Path:
    """``source`` with ``autotriage_triage.approval_threshold`` set to ``threshold`` and the alerts mailed to
    ``DEMO_ALERTS_TO`` through ``SMTP_CONN_ID`` (its only channel), written to ``target`` (the projects file,
    relative to ``source``, made absolute)."""
    config = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    config.setdefault("autotriage_triage", {})["approval_threshold"] = threshold
    config.setdefault("alerts", {})["channels"] = [{"type": "smtp", "conn_id": SMTP_CONN_ID, "to": [DEMO_ALERTS_TO]}]
    projects = projects_file_path(load_pipeline_config(source))  # where the source's projects file is
    config.setdefault("project_settings", {})["file"] = str(projects.resolve())
    target.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Written by make demo from {source.name}: autotriage_triage.approval_threshold is {threshold},\n"
              "# so the demo's first triage waits for a person's approval; the alerts go to the demo's mail catcher\n"
              f"# ({SMTP_CONN_ID} to {DEMO_ALERTS_TO}). Edit include/pipeline.yaml instead.\n")
    target.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return target


class Staging:
    """The demo's order, one :meth:`step` per poll: nothing that reads the warehouse or writes to the service
    runs before the first extraction has finished, and tickets wait for a finished triage."""

    def __init__(self, api: Any, say: Callable[[str], None], ui_url: str) -> None:
        self.api, self.say, self.ui_url = api, say, ui_url
        self.stage = 0
        self.started = datetime.now(timezone.utc)

    def start(self, trigger: bool = True) -> None:
        """Pause the later stages (a reused home may have them unpaused), unpause the first, trigger it."""
        for dag_id in (*AFTER_EXTRACTION, *AFTER_TRIAGE):
            self.api.set_paused(dag_id, True)
        for dag_id in TRIGGERED:
            self.api.set_paused(dag_id, False)
            if trigger:
                run = self.api.trigger(dag_id, note="triggered by make demo")
                self.say(f"triggered {dag_id}: {run['dag_run_id']}")
        self.say(f"unpaused {', '.join(TRIGGERED)}; the other DAGs start once the first extraction has finished")

    def _finished(self, dag_id: str) -> bool:
        """A run of ``dag_id`` succeeded since this demo started (a reused home's earlier runs do not count)."""
        return any(r.get("state") == "success" and (ended := parse_timestamp(r.get("end_date"))) is not None
                   and ended >= self.started for r in self.api.runs(dag_id))

    def step(self) -> None:
        if self.stage == 0 and self._finished("findings_extraction"):
            for dag_id in AFTER_EXTRACTION:
                self.api.set_paused(dag_id, False)
            self.say(f"the first extraction finished: unpaused {', '.join(AFTER_EXTRACTION)}")
            self.say(f"autotriage_triage selects more than {DEMO_APPROVAL_THRESHOLD} findings, so it waits for your "
                     f"approval: {self.ui_url}/plugin/findings#approvals (or Browse > Required Actions); "
                     "ticket_creation starts once a triage run has finished")
            self.stage = 1
        elif self.stage == 1 and self._finished("autotriage_triage"):
            for dag_id in AFTER_TRIAGE:
                self.api.set_paused(dag_id, False)
            self.say(f"a triage run finished: unpaused {', '.join(AFTER_TRIAGE)}")
            self.stage = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the demo: emulator + Airflow, until Ctrl-C.")
    parser.add_argument("--home", type=Path, default=DEMO_HOME, help=f"AIRFLOW_HOME (default {DEMO_HOME})")
    parser.add_argument("--host", default="127.0.0.1", help="address the UI listens on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8080, help="UI / API server port (a free one if taken)")
    parser.add_argument("--emulator-port", type=int, default=8900, help="emulator port (a free one if taken)")
    parser.add_argument("--findings", type=int, default=5000, help="findings the emulator generates")
    parser.add_argument("--reset", action="store_true", help="delete the demo's AIRFLOW_HOME first")
    parser.add_argument("--no-trigger", action="store_true", help="do not trigger the pipeline")
    args = parser.parse_args(argv)

    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[demo {time.monotonic() - t0:5.1f}s] {msg}", flush=True)

    if args.reset and args.home.exists():
        say(f"removing {args.home}")
        shutil.rmtree(args.home)
    port = args.port if port_is_free(args.port, args.host) else None
    if port is None:
        say(f"port {args.port} is taken: using a free port for the UI")
    emulator_port = args.emulator_port if port_is_free(args.emulator_port) else None
    if emulator_port is None:
        say(f"port {args.emulator_port} is taken: using a free port for the emulator")

    config = write_demo_config(SOURCE_CONFIG, args.home.parent / "pipeline.yaml")
    mail = MailCatcher(web=True)  # on free loopback ports; threads of this process, started below
    stack = Stack(
        args.home,
        api_host=args.host,
        api_port=port,
        emulator=EmulatorOptions(port=emulator_port, findings=args.findings),
        connections_in_db=True,  # listed in Admin > Connections, with a working Test button
        progress=say,
        startup_timeout=300,
        extra_env={"FINDINGS_PIPELINE_CONFIG": str(config),
                   f"AIRFLOW_CONN_{SMTP_CONN_ID.upper()}": mail.connection_json()},
    )
    # Ctrl-C, SIGTERM and a closed terminal all stop the demo (SIGINT explicitly: a shell that starts the demo in
    # the background leaves SIGINT ignored, and Python then installs no handler of its own)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_keyboard_interrupt)
    try:
        mail.start()
        say(f"mail catcher: SMTP on {mail.host}:{mail.port}, messages at {mail.web_url}")
        say(f"AIRFLOW_HOME {stack.home} (kept between starts; --reset to start afresh)")
        stack.start()
        staging = Staging(stack.api, say, stack.ui_url)
        staging.start(trigger=not args.no_trigger)
        banner(stack, time.monotonic() - t0, config, mail)
        while True:
            stack.check_alive()
            staging.step()
            time.sleep(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        print(flush=True)
        say("stopping every process of the demo")
        return 0
    except StackError as exc:
        say(f"ERROR: {exc}")
        return 1
    finally:
        stack.stop()
        mail.stop()


def banner(stack: Stack, seconds: float, config: Path, mail: MailCatcher) -> None:
    assert stack.emulator is not None
    lines = [
        "",
        f"Airflow UI:   {stack.ui_url}   (ready {seconds:.0f}s after the start)",
        f"Login:        user {stack.username}   password {stack.password}",
        f"              (simple auth manager; the password is kept in {stack.home / 'stack-state.json'})",
        f"Emulator:     {stack.emulator.url}/api/v1   token {stack.emulator.token}   "
        f"(request log: {stack.emulator.url}/_emulator/requests)",
        f"Warehouse:    {stack.warehouse_sqlite_path}",
        f"Dashboard:    {stack.ui_url}/plugin/findings   (Browse > Findings; its widget on the home page; a "
        "tab on each DAG and run)",
        f"Reports:      {stack.home / 'reports'} (and on the dashboard)",
        f"Mail:         {mail.web_url}   (the alerts mailed to {DEMO_ALERTS_TO} through {SMTP_CONN_ID}, "
        f"SMTP {mail.host}:{mail.port})",
        f"Logs:         {stack.log_dir} (components), {stack.home / 'logs'} (tasks)",
        f"Config:       {config} (include/pipeline.yaml with the triage's approval threshold at "
        f"{DEMO_APPROVAL_THRESHOLD}, alerts to the mail catcher)",
        "",
        "The pipeline: scan_monitoring and findings_extraction run first; once the first extraction has finished,",
        "triage and the governance DAGs start, and the triage waits for your approval (the overview's Approvals",
        "waiting, or Browse > Required Actions); once a triage run has finished, ticket_creation starts. The",
        "emulator's generated scans include failed and never-finished ones: scan_monitoring alerts about them",
        "and stays green. Every alert (failed scans, the approval waiting) is on the Mail page above.",
        "",
        "Press Ctrl-C to stop every process of the demo.",
        "",
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
