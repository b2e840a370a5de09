"""Fill the database with a freshly generated deployment."""

from __future__ import annotations

import logging
import time

import orjson
from sqlalchemy import Connection, insert

from . import schema
from .config import EmulatorConfig
from .generator.findings import FindingFactory
from .generator.world import World, generate_world, render_rule
from .rows import FindingRow
from .store import Database

log = logging.getLogger(__name__)

CODE_SHARE = 0.7
_INSERT_FINDING = (f"INSERT INTO findings ({', '.join(FindingRow._fields)}) "
                   f"VALUES ({', '.join('?' * len(FindingRow._fields))})")
_INSERT_BODY = "INSERT INTO finding_bodies (id, body) VALUES (?, ?)"


def split_findings(total: int) -> tuple[int, int]:
    """How many of ``total`` findings are code (sast) and how many supply-chain (sca)."""
    sast = round(total * CODE_SHARE)
    return sast, total - sast


def _insert_world(connection: Connection, world: World) -> None:
    latest: dict[int, float] = {}
    for scan in world.scans:
        latest[scan["repository_id"]] = max(latest.get(scan["repository_id"], 0.0), scan["started_at"])
    connection.execute(insert(schema.repositories), [
        {"id": r.id, "name": r.name, "url": r.url, "primary_branch": r.primary_branch,
         "default_branch": r.default_branch, "visibility": r.visibility, "tags": orjson.dumps(r.tags).decode(),
         "diff_scan": r.diff_scan, "full_scan": r.full_scan, "has_dependency_path_scan": r.has_dependency_path_scan,
         "created_at": r.created_at, "latest_scan_at": latest.get(r.id)}
        for r in world.repositories
    ])
    if world.scans:
        connection.execute(insert(schema.scans), [
            {**scan, "meta": orjson.dumps(scan["meta"]).decode()} for scan in world.scans
        ])
    connection.execute(insert(schema.policies), [
        {"id": p.id, "name": p.name, "slug": p.slug, "is_default": p.is_default, "product_type": p.product_type}
        for p in world.policies
    ])
    connection.execute(insert(schema.rules), [
        {"policy_id": policy_id, "id": rule.id, "path": rule.path, "mode": mode,
         "last_change_at": body["lastChangeAt"], "last_change_by": rule.last_change_by,
         "body": orjson.dumps(body).decode()}
        for rule in world.rules
        for policy_id, mode in rule.modes.items()
        for body in (render_rule(rule, policy_id),)
    ])
    if world.dependencies:
        connection.execute(insert(schema.dependencies), [
            {**dep, "licenses": "|" + "|".join(dep["licenses"]) + "|"} for dep in world.dependencies
        ])


def populate(database: Database, config: EmulatorConfig, now: float | None = None) -> dict[str, float]:
    """Regenerate all state from ``config``; returns timings in seconds and counts."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    sast, sca = split_findings(config.findings)
    world = generate_world(seed=config.seed, repositories=config.repositories, scans=config.scans,
                           rules=config.rules, dependencies=config.dependencies, now=now,
                           scan_duration=config.scan_duration)
    factory = FindingFactory(world, config.seed, config.dialect)
    with database.transaction() as connection:
        database.recreate_tables(connection)
        _insert_world(connection, world)
        raw = database.raw(connection)
        for issue_type, count in (("sast", sast), ("sca", sca), ("secrets", config.secrets),
                                  ("ai_sast", config.ai_findings)):
            for rows, bodies in factory.batches(issue_type, count):
                raw.executemany(_INSERT_FINDING, rows)
                raw.executemany(_INSERT_BODY, bodies)
        loaded = time.perf_counter()
        database.create_indexes(connection)
    finished = time.perf_counter()
    timings = {"generate_and_insert_s": loaded - started, "index_s": finished - loaded,
               "total_s": finished - started, "findings": config.findings, "secrets": config.secrets}
    log.info("generated %d findings and %d secrets in %.1f s (indexes %.1f s)", config.findings,
             config.secrets, finished - started, finished - loaded)
    return timings
