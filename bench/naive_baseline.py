"""The naive baseline: what a first script against the API typically looks like.

100-item pages, the standard library's ``json``, one SQLAlchemy ORM object added and committed per finding,
``raw`` re-encoded with ``json.dumps``. It shares nothing with the product but the database settings (SQLite in
WAL mode with ``synchronous=NORMAL``, as the product's engine), so the comparison isolates the code's approach.
The warehouse is emptied first (untimed); the load is a first load (``session.add``).

    python bench/naive_baseline.py --base-url http://127.0.0.1:8900 --token T --slug acme \
        --database-url sqlite:////tmp/naive.db --out result.json
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from datetime import datetime, timezone
from typing import Any

from common import (
    NAIVE_PAGE_SIZE,
    checkpoint,
    current_rss_mb,
    emulator_arguments,
    peak_rss_mb,
    reset_database,
    write_json,
)
from extract_product import count_requests, emulator_requests


def build_model() -> Any:
    """The ORM class of the naive ``findings`` table (the same columns and indexes as the product's)."""
    from sqlalchemy import BigInteger, Column, DateTime, Index, Text
    from sqlalchemy.orm import declarative_base

    base = declarative_base()

    class Finding(base):  # type: ignore[misc, valid-type]
        __tablename__ = "findings"
        issue_type = Column(Text, primary_key=True)
        id = Column(BigInteger, primary_key=True, autoincrement=False)
        repository_name = Column(Text)
        ref = Column(Text)
        rule_name = Column(Text)
        severity = Column(Text)
        confidence = Column(Text)
        status = Column(Text)
        triage_state = Column(Text)
        triage_reason = Column(Text)
        autotriage_verdict = Column(Text)
        reachability = Column(Text)
        match_based_id = Column(Text)
        relevant_since = Column(Text)
        external_ticket_id = Column(BigInteger)
        first_seen_scan_id = Column(BigInteger)
        raw = Column(Text, nullable=False)
        synced_at = Column(DateTime(timezone=True), nullable=False)
        __table_args__ = (
            Index("ix_naive_type_status", "issue_type", "status"),
            Index("ix_naive_type_verdict", "issue_type", "autotriage_verdict"),
            Index("ix_naive_external_ticket", "external_ticket_id"),
        )

    return base, Finding


def make_engine(url: str, sqlite_tuned: bool) -> Any:
    from sqlalchemy import create_engine, event

    engine = create_engine(url)
    if url.startswith("sqlite") and sqlite_tuned:
        def pragmas(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.execute("PRAGMA journal_mode = WAL")
            dbapi_connection.execute("PRAGMA synchronous = NORMAL")

        event.listen(engine, "connect", pragmas)
    return engine


def to_finding(model: Any, issue_type: str, item: dict[str, Any]) -> Any:
    """One ORM object from one finding, the way a first script maps it."""
    ticket = item.get("external_ticket") or (item.get("usage") or {}).get("external_ticket") or {}
    rule = item.get("rule") or {}
    repository = item.get("repository") or {}
    autotriage = ((item.get("assistant") or {}).get("autotriage") or {})
    return model(
        issue_type=issue_type,
        id=int(item["id"]),
        repository_name=repository.get("name") if isinstance(repository, dict) else repository,
        ref=item.get("ref"),
        rule_name=item.get("rule_name") or (rule.get("name") if isinstance(rule, dict) else None),
        severity=item.get("severity"),
        confidence=item.get("confidence"),
        status=item.get("status"),
        triage_state=item.get("triage_state"),
        triage_reason=item.get("triage_reason"),
        autotriage_verdict=autotriage.get("verdict"),
        reachability=item.get("reachability"),
        match_based_id=item.get("match_based_id"),
        relevant_since=item.get("relevant_since"),
        external_ticket_id=ticket.get("id"),
        first_seen_scan_id=item.get("first_seen_scan_id"),
        raw=json.dumps(item),
        synced_at=datetime.now(timezone.utc),
    )


def page_items(body: dict[str, Any], issue_type: str) -> list[dict[str, Any]]:
    if "findings" in body:
        return list(body["findings"])
    return list(body["sastFindings" if issue_type == "sast" else "scaFindings"]["findings"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    emulator_arguments(parser, deployment_id=False)
    parser.add_argument("--issue-types", default="sast,sca")
    parser.add_argument("--page-size", type=int, default=NAIVE_PAGE_SIZE)
    parser.add_argument("--sqlite-defaults", action="store_true",
                        help="SQLite's default journal (rollback, synchronous=FULL) instead of the product's WAL")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    reset_database(args.database_url)
    checkpoint(args.database_url)
    started = time.perf_counter()
    import httpx
    from sqlalchemy.orm import Session

    import_s = time.perf_counter() - started
    gc.collect()
    rss_after_import = current_rss_mb()
    admin = httpx.Client(base_url=args.base_url, timeout=60.0)
    admin.delete("/_emulator/requests").raise_for_status()

    started = time.perf_counter()
    cpu_started = time.process_time()
    base, model = build_model()
    engine = make_engine(args.database_url, sqlite_tuned=not args.sqlite_defaults)
    base.metadata.create_all(engine)
    total = 0
    per_type: dict[str, int] = {}
    with httpx.Client(base_url=args.base_url, headers={"Authorization": f"Bearer {args.token}"},
                      timeout=60.0) as client, Session(engine) as session:
        for issue_type in args.issue_types.split(","):
            page = 0
            count = 0
            while True:
                response = client.get(f"/api/v1/deployments/{args.slug}/findings",
                                      params={"issue_type": issue_type, "page": page, "page_size": args.page_size})
                response.raise_for_status()
                items = page_items(json.loads(response.text), issue_type)
                for item in items:
                    session.add(to_finding(model, issue_type, item))
                    session.commit()
                count += len(items)
                if len(items) < args.page_size:
                    break
                page += 1
            per_type[issue_type] = count
            total += count
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    peak = peak_rss_mb()
    requests = count_requests(emulator_requests(admin))
    admin.close()
    engine.dispose()
    write_json(args.out, {
        "mode": "naive",
        "database": args.database_url.split(":", 1)[0],
        "findings": total,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "findings_per_s": total / seconds,
        "requests": requests,
        "per_issue_type": {k: {"unique": v} for k, v in per_type.items()},
        "peak_rss_mb": peak,
        "rss_after_import_mb": rss_after_import,
        "import_s": import_s,
    })


if __name__ == "__main__":
    main()
