"""The demo: ``make demo`` (after ``make venv``) runs this file.

It starts the findings API emulator with generated data and an Airflow with every component (API server,
scheduler, DAG processor, triggerer; LocalExecutor on SQLite) in ``.demo/airflow-home`` through the same launcher
as the e2e tests (``devtools/stack.py``), provisions the connections (environment variables) and the
``findings_api`` pool, unpauses the seven DAGs, triggers ``scan_monitoring`` and ``findings_extraction`` once (the
Asset chain then runs triage and tickets), prints the UI address and the login, and waits. Ctrl-C (or SIGTERM)
stops every process it started. A second start reuses ``.demo/airflow-home`` (database, password, logs).

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
from pathlib import Path

if __package__ in (None, ""):  # python devtools/demo.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from findings_provider.names import PIPELINE_DAGS

from devtools.environment import REPO, EmulatorOptions
from devtools.processes import port_is_free, raise_keyboard_interrupt
from devtools.stack import Stack, StackError

DEMO_HOME = REPO / ".demo" / "airflow-home"
TRIGGERED = ("scan_monitoring", "findings_extraction")


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

    stack = Stack(
        args.home,
        api_host=args.host,
        api_port=port,
        emulator=EmulatorOptions(port=emulator_port, findings=args.findings),
        connections_in_db=True,  # listed in Admin > Connections, with a working Test button
        progress=say,
        startup_timeout=300,
    )
    # Ctrl-C, SIGTERM and a closed terminal all stop the demo (SIGINT explicitly: a shell that starts the demo in
    # the background leaves SIGINT ignored, and Python then installs no handler of its own)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_keyboard_interrupt)
    try:
        say(f"AIRFLOW_HOME {stack.home} (kept between starts; --reset to start afresh)")
        stack.start()
        for dag_id in PIPELINE_DAGS:
            stack.api.set_paused(dag_id, False)
        say(f"unpaused {len(PIPELINE_DAGS)} DAGs")
        if not args.no_trigger:
            for dag_id in TRIGGERED:
                run = stack.api.trigger(dag_id, note="triggered by make demo")
                say(f"triggered {dag_id}: {run['dag_run_id']}")
        banner(stack, time.monotonic() - t0)
        while True:
            stack.check_alive()
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


def banner(stack: Stack, seconds: float) -> None:
    assert stack.emulator is not None
    lines = [
        "",
        f"Airflow UI:   {stack.ui_url}   (ready {seconds:.0f}s after the start)",
        f"Login:        user {stack.username}   password {stack.password}",
        f"              (simple auth manager; the password is kept in {stack.home / 'stack-state.json'})",
        f"Emulator:     {stack.emulator.url}/api/v1   token {stack.emulator.token}   "
        f"(request log: {stack.emulator.url}/_emulator/requests)",
        f"Warehouse:    {stack.warehouse_sqlite_path}",
        f"Dashboard:    {stack.ui_url}/plugin/findings   (Browse > Findings; the pages alone at "
        f"{stack.ui_url}/findings-dashboard/)",
        f"Reports:      {stack.home / 'reports'} (and on the dashboard)",
        f"Logs:         {stack.log_dir} (components), {stack.home / 'logs'} (tasks)",
        "",
        "The pipeline: scan_monitoring and findings_extraction were triggered; the Asset chain then runs",
        "autotriage_triage and ticket_creation. The emulator's generated scans include failed and never-finished",
        "ones: scan_monitoring alerts about them (logged, as no alert channel is configured) and stays green.",
        "",
        "Press Ctrl-C to stop every process of the demo.",
        "",
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
