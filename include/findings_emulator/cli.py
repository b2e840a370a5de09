"""Command line: ``findings-emulator [options]`` generates the data, then serves the API until stopped."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from .app import create_app
from .config import EmulatorConfig
from .faults import parse_fault
from .state import Emulator

log = logging.getLogger("findings_emulator")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its defaults are those of :class:`EmulatorConfig`)."""
    d = EmulatorConfig()
    p = argparse.ArgumentParser(prog="findings-emulator", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--host", default=d.host, help="address to listen on")
    p.add_argument("--port", type=int, default=d.port, help="port to listen on")
    p.add_argument("--token", action="append", dest="tokens", metavar="TOKEN",
                   help=f"accepted API token, repeatable (default: {d.tokens[0]})")
    p.add_argument("--no-web-api-token", action="append", dest="no_web_api_tokens", metavar="TOKEN",
                   default=[], help="a token without Web API access (answered 404 everywhere), repeatable")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the generated data")
    p.add_argument("--findings", type=int, default=d.findings, help="code + supply-chain findings (70%% / 30%%)")
    p.add_argument("--repositories", type=int, default=d.repositories, help="repositories (= projects)")
    p.add_argument("--scans", type=int, default=d.scans, help="scans")
    p.add_argument("--rules", type=int, default=d.rules, help="code rules (in the policies and findings)")
    p.add_argument("--dependencies", type=int, default=d.dependencies, help="dependencies in the inventory")
    p.add_argument("--secrets", type=int, default=d.secrets, help="secrets findings")
    p.add_argument("--ai-findings", type=int, default=d.ai_findings,
                   help="AI-detected code findings (issue_type ai_sast), besides --findings")
    p.add_argument("--deployment-id", default=d.deployment_id, help="numeric id of the served deployment")
    p.add_argument("--deployment-slug", default=d.deployment_slug, help="slug of the served deployment")
    p.add_argument("--db", default=None, metavar="PATH", help="SQLite file (default: in memory); regenerated")
    p.add_argument("--scan-duration", type=float, default=d.scan_duration, metavar="SECONDS",
                   help="how long a running scan takes to finish")
    p.add_argument("--flat-findings", action="store_true",
                   help="answer findings as a flat top-level {\"findings\": [...]}")
    p.add_argument("--dialect", choices=["reference", "real"], default=d.dialect,
                   help="wire format: the API reference's or the real service's")
    p.add_argument("--sbom-polls", type=int, default=d.sbom_polls, metavar="N",
                   help="SBOM export jobs finish on their N-th poll (the polls before answer in progress)")
    p.add_argument("--sbom-url-ttl", type=float, default=d.sbom_url_ttl, metavar="SECONDS",
                   help="how long a finished SBOM export's download link works")
    p.add_argument("--retired-policies", action="store_true", help="policy endpoints answer 410 Gone")
    p.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="fault rule: the admin route's JSON, or OPERATION:KIND,KIND,... (e.g. findings:429,ok,503)")
    p.add_argument("--log-level", default=d.log_level, choices=["debug", "info", "warning", "error"])
    return p


def config_from_args(args: argparse.Namespace) -> EmulatorConfig:
    """Turn parsed arguments into settings; ``ValueError`` for an invalid fault or setting."""
    faults = tuple(parse_fault(text) for text in args.fault)
    return EmulatorConfig(
        host=args.host, port=args.port, tokens=tuple(args.tokens or EmulatorConfig.tokens),
        no_web_api_tokens=tuple(args.no_web_api_tokens), seed=args.seed, findings=args.findings,
        repositories=args.repositories, scans=args.scans, rules=args.rules, dependencies=args.dependencies,
        secrets=args.secrets, ai_findings=args.ai_findings, deployment_id=args.deployment_id,
        deployment_slug=args.deployment_slug,
        db=args.db, scan_duration=args.scan_duration, flat_findings=args.flat_findings,
        retired_policies=args.retired_policies, dialect=args.dialect, sbom_polls=args.sbom_polls,
        sbom_url_ttl=args.sbom_url_ttl, faults=faults, log_level=args.log_level,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv``, generate the data and serve until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except (ValueError, ValidationError) as exc:
        parser.error(str(exc))
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    emulator = Emulator(config)
    log.info("serving deployment %s (%s) on http://%s:%d with %d token(s)", config.deployment_slug,
             config.deployment_id, config.host, config.port, len(config.tokens))
    server = uvicorn.Server(uvicorn.Config(
        create_app(emulator), host=config.host, port=config.port, log_level=config.log_level,
        access_log=config.log_level == "debug", proxy_headers=False, server_header=False,
    ))
    try:
        server.run()
    finally:
        emulator.close()
