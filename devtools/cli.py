"""Start a real local Airflow stack (every component) and the emulator by hand, and keep it up until Ctrl-C.

    python devtools/cli.py --home /tmp/af          # --help for the options

The demo (``make demo``, ``devtools/demo.py``) and the end-to-end tests use the same launcher (``devtools/stack.py``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``devtools`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from findings_provider.names import PIPELINE_DAGS

from devtools.environment import CELERY, DAGS_FOLDER, LOCAL, EmulatorOptions
from devtools.processes import raise_keyboard_interrupt
from devtools.stack import Stack


def main(argv: list[str] | None = None) -> int:
    """Start a stack by hand and keep it up until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--home", required=True, help="AIRFLOW_HOME (created if missing)")
    parser.add_argument("--port", type=int, default=None, help="API server / UI port (default: a free one)")
    parser.add_argument("--executor", choices=[LOCAL, CELERY], default=LOCAL)
    parser.add_argument("--metadata-db-url", default=None)
    parser.add_argument("--warehouse-url", default=None)
    parser.add_argument("--broker-url", default=None)
    parser.add_argument("--workers", type=int, default=2, help="celery workers")
    parser.add_argument("--emulator-port", type=int, default=None)
    parser.add_argument("--findings", type=int, default=None, help="emulator data volume")
    parser.add_argument("--no-emulator", action="store_true")
    parser.add_argument("--dags-folder", default=str(DAGS_FOLDER))
    parser.add_argument("--expect", default=",".join(PIPELINE_DAGS),
                        help="comma-separated DAG ids to wait for ('' for none)")
    parser.add_argument("--fast", action="store_true", help="short DAG processor/scheduler intervals")
    args = parser.parse_args(argv)

    stack = Stack(
        args.home,
        dags_folder=args.dags_folder,
        expected_dags=[d for d in args.expect.split(",") if d],
        fast=args.fast,
        executor=args.executor,
        metadata_db_url=args.metadata_db_url,
        warehouse_url=args.warehouse_url,
        broker_url=args.broker_url,
        celery_workers=args.workers,
        api_port=args.port,
        emulator=None if args.no_emulator else EmulatorOptions(port=args.emulator_port, findings=args.findings),
        progress=lambda m: print(f"[stack] {m}", flush=True),
    )
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    with contextlib.suppress(KeyboardInterrupt), stack:
        print(f"UI {stack.ui_url}  user {stack.username}  password {stack.password}", flush=True)
        while True:
            stack.check_alive()
            time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
