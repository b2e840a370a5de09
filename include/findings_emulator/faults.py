"""Fault injection rules: per operation, a fixed schedule or a seeded probability of misbehaving."""

from __future__ import annotations

import itertools
import random
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

OPERATIONS = (
    "deployments", "dependencies", "dependency_repositories", "scans_search", "scan_get", "policies_list",
    "policy_rules", "policy_update", "tickets", "findings", "projects", "managed_scan", "triage", "tags_add",
    "tags_remove", "secrets", "ping", "project_get", "project_update", "project_delete", "lockfiles",
    "sbom_export", "sbom_status", "sbom_download", "tickets_link", "tickets_unlink", "ticket_delete",
)
#: Kinds that carry the request out completely (changes included), then answer wrongly.
ACT_KINDS = ("drop_after", "truncate", "act_500", "act_html", "act_wrong_shape", "act_redirect", "act_slow",
             "act_drip")
ACTIONS = ("ok", "drop", "latency", *ACT_KINDS)


ECHO = "_echo"


def _check_kind(kind: str) -> str:
    status = kind.removesuffix(ECHO)
    if kind in ACTIONS or (status.isdigit() and 400 <= int(status) <= 599):
        return kind
    raise ValueError(f"unknown fault kind {kind!r}: use an HTTP status 400-599 (optionally with the suffix "
                     f"{ECHO}: the body echoes the request's headers) or one of {', '.join(ACTIONS)}")


class FaultSpec(BaseModel):
    """What to inject, into which requests, and how often."""

    model_config = ConfigDict(extra="forbid")

    operation: str = "*"
    method: str | None = None
    schedule: list[str] | None = None
    probability: float | None = Field(None, ge=0.0, le=1.0)
    kinds: list[str] | None = None
    seed: int = 1
    retry_after: float | None = Field(1, ge=0)
    latency: float = Field(2.0, ge=0, le=300)
    times: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> FaultSpec:
        if self.operation != "*" and self.operation not in OPERATIONS:
            raise ValueError(f"unknown operation {self.operation!r}: use '*' or one of {', '.join(OPERATIONS)}")
        if (self.schedule is None) == (self.probability is None):
            raise ValueError("give exactly one of schedule (a list of kinds) or probability (with kinds)")
        if self.probability is not None and not self.kinds:
            raise ValueError("probability needs a non-empty kinds list")
        for kind in [*(self.schedule or []), *(self.kinds or [])]:
            _check_kind(kind)
        if self.method is not None:
            self.method = self.method.upper()
        return self


def parse_fault(text: str) -> FaultSpec:
    """Parse a fault given on the command line: the JSON of the admin route, or ``operation:kind,kind,...``."""
    if text.lstrip().startswith("{"):
        return FaultSpec.model_validate(orjson.loads(text))
    operation, sep, schedule = text.partition(":")
    if not sep or not schedule:
        raise ValueError(f"fault {text!r}: expected JSON or OPERATION:KIND,KIND,... (e.g. findings:429,ok,503)")
    return FaultSpec(operation=operation.strip(), schedule=[k.strip() for k in schedule.split(",")])


@dataclass(frozen=True)
class Fault:
    """The misbehaviour chosen for one request."""

    kind: str
    retry_after: float | None
    latency: float

    @property
    def status(self) -> int | None:
        """The HTTP status to answer with, when the fault is an error status."""
        status = self.kind.removesuffix(ECHO)
        return int(status) if status.isdigit() else None

    @property
    def echo(self) -> bool:
        """Whether the error body echoes the request's headers (Authorization included), as some proxies do."""
        return self.kind.endswith(ECHO)


class _Rule:
    def __init__(self, rule_id: int, spec: FaultSpec) -> None:
        self.id = rule_id
        self.spec = spec
        self.pending = deque(spec.schedule or ())
        self.random = random.Random(spec.seed)
        self.injected = 0

    def active(self) -> bool:
        if self.spec.times is not None and self.injected >= self.spec.times:
            return False
        return self.spec.probability is not None or bool(self.pending)

    def matches(self, operation: str, method: str) -> bool:
        return (self.spec.operation in ("*", operation)) and self.spec.method in (None, method)

    def draw(self) -> str:
        if self.spec.schedule is not None:
            kind = self.pending.popleft()
        elif self.random.random() < (self.spec.probability or 0.0):
            kind = self.random.choice(self.spec.kinds or ["ok"])
        else:
            kind = "ok"
        if kind != "ok":
            self.injected += 1
        return kind

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, **self.spec.model_dump(), "remaining": list(self.pending)
                if self.spec.schedule is not None else None, "injected": self.injected}


class FaultBook:
    """The active fault rules; the first active rule matching a request decides its fate."""

    def __init__(self) -> None:
        self._rules: list[_Rule] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, spec: FaultSpec) -> int:
        """Register a rule; returns its id."""
        with self._lock:
            rule = _Rule(next(self._ids), spec)
            self._rules.append(rule)
            return rule.id

    def describe(self) -> list[dict[str, Any]]:
        """All rules with what is left of their schedules."""
        with self._lock:
            return [rule.describe() for rule in self._rules]

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules.clear()

    def next_fault(self, operation: str, method: str) -> Fault | None:
        """The fault for this request, or ``None`` to serve it normally."""
        with self._lock:
            for rule in self._rules:
                if rule.active() and rule.matches(operation, method):
                    kind = rule.draw()
                    if kind == "ok":
                        return None
                    return Fault(kind, rule.spec.retry_after, rule.spec.latency)
        return None
