"""The log of API requests the emulator received, for tests to assert on (never headers, never tokens)."""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any


class RequestLog:
    """A bounded, thread-safe list of request records, each numbered by ``seq`` from 1."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> int:
        """Append ``entry`` (method, path, operation, query, body, status, ...) and return its ``seq``."""
        with self._lock:
            seq = next(self._seq)
            self._entries.append({"seq": seq, **entry})
            return seq

    def since(self, seq: int | None = None) -> list[dict[str, Any]]:
        """Records with a ``seq`` greater than ``seq`` (all records when ``None``)."""
        with self._lock:
            return [e for e in self._entries if seq is None or e["seq"] > seq]

    def clear(self) -> None:
        """Forget every record (numbering continues)."""
        with self._lock:
            self._entries.clear()
