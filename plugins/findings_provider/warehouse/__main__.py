"""The warehouse's schema by hand: ``python -m findings_provider.warehouse upgrade|current|revision``.

- ``upgrade --url URL [--revision REV]``: what ``Warehouse.create_all`` does on first use (an empty database is
  created, one made before versioning is brought to 0001 and stamped), up to ``REV`` (default ``head``);
- ``current --url URL``: the revision the warehouse is at, and whether that is the head of this version;
- ``revision -m MESSAGE [--autogenerate --url URL]``: a new revision file in ``migrations/versions`` of the
  source tree, numbered after the newest (``alembic revision``; with ``--autogenerate`` prefilled from the
  differences between ``schema.py`` and the database at URL, which must be at head).

URL is a SQLAlchemy URL (``sqlite:////srv/airflow/warehouse.db``, ``postgresql://user@host:5432/db``; the
``postgres://`` of an Airflow connection URI is accepted too).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, make_url

from .url import make_engine
from .versioning import MIGRATIONS, alembic_config, current_revision, head_revisions, upgrade

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (see the module's docstring); return the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "revision":
        return _revision(args.message, args.autogenerate, args.url)
    if args.url is None:
        raise SystemExit(f"{args.command} needs --url (the warehouse's SQLAlchemy URL)")
    engine = make_engine(_warehouse_url(args.url))
    try:
        if args.command == "upgrade":
            reached = upgrade(engine, target=args.revision)
            print(f"warehouse at revision {reached}")
        else:
            with engine.connect() as conn:
                current = current_revision(conn)
            heads = ", ".join(sorted(head_revisions()))
            state = "head" if current in head_revisions() else f"not head: upgrade to {heads}"
            print(f"warehouse at revision {current or 'none (not versioned)'} ({state})")
    finally:
        engine.dispose()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m findings_provider.warehouse",
                                     description="Upgrade or inspect the findings warehouse's schema.")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upgrade", help="bring the warehouse to a revision (default head)")
    up.add_argument("--url", help="the warehouse's SQLAlchemy URL")
    up.add_argument("--revision", default="head", help="target revision (default head)")
    current = commands.add_parser("current", help="print the warehouse's revision")
    current.add_argument("--url", help="the warehouse's SQLAlchemy URL")
    revision = commands.add_parser("revision", help="write a new revision file (developers)")
    revision.add_argument("-m", "--message", required=True, help="what the revision changes")
    revision.add_argument("--autogenerate", action="store_true",
                          help="prefill from the differences between schema.py and the database at --url")
    revision.add_argument("--url", help="the warehouse's SQLAlchemy URL (with --autogenerate)")
    return parser


def _warehouse_url(text: str) -> URL:
    """The SQLAlchemy URL of ``text``, reading Airflow's ``postgres://`` scheme as PostgreSQL."""
    url = make_url(text)
    return url.set(drivername="postgresql") if url.drivername == "postgres" else url


def _revision(message: str, autogenerate: bool, url: str | None) -> int:
    """Write the next numbered revision into the shipped versions directory."""
    script = ScriptDirectory.from_config(alembic_config())
    numbers = [int(r.revision) for r in script.walk_revisions() if r.revision.isdigit()]
    rev_id = f"{max(numbers, default=0) + 1:04d}"
    if not autogenerate:
        command.revision(alembic_config(), message=message, rev_id=rev_id, version_path=str(MIGRATIONS / "versions"))
        return 0
    if url is None:
        raise SystemExit("revision --autogenerate needs --url (a warehouse at head to compare schema.py with)")
    engine = make_engine(_warehouse_url(url))
    try:
        with engine.connect() as conn:
            command.revision(alembic_config(conn), message=message, rev_id=rev_id, autogenerate=True,
                             version_path=str(MIGRATIONS / "versions"))
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
