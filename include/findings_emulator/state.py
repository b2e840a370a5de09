"""The running emulator's state: settings, database, listings cache, request log and faults."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Connection

from .config import EmulatorConfig
from .faults import FaultBook
from .listing import FindingListing
from .loader import populate
from .requestlog import RequestLog
from .sbom import SbomJobs
from .store import Database

log = logging.getLogger(__name__)


class Emulator:
    """Everything the routes share. Create it once per process; :meth:`reset` regenerates the data."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.database = Database(config.db)
        self.listing = FindingListing()
        self.requests = RequestLog()
        self.faults = FaultBook()
        self.sbom = SbomJobs(config.sbom_polls, config.sbom_url_ttl)
        self.load_timings: dict[str, float] = populate(self.database, config)
        for spec in config.faults:
            self.faults.add(spec)

    def transaction(self) -> AbstractContextManager[Connection]:
        """A transaction for reading, or for changes that leave findings and rule modes alone."""
        return self.database.transaction()

    @contextmanager
    def change_findings(self) -> Iterator[Connection]:
        """A transaction that changes findings or what their filters read (rule modes): cached listings are
        dropped with it."""
        with self.database.transaction() as connection:
            self.listing.invalidate()
            connection.info["dialect"] = self.config.dialect  # stored bodies are rewritten in this dialect
            yield connection

    def reset(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """Regenerate all data with ``overrides`` applied, clear the request log, every fault and the SBOM jobs
        (their settings back to the configuration's)."""
        config = self.config.with_overrides(overrides)
        with self.change_findings():  # holds the lock: no request sees half-loaded data
            self.load_timings = populate(self.database, config)
            self.config = config
            self.sbom = SbomJobs(config.sbom_polls, config.sbom_url_ttl)
        self.requests.clear()
        self.faults.clear()
        log.info("reset with %s", sorted(overrides))
        return self.load_timings

    def close(self) -> None:
        """Release the database."""
        self.database.close()
