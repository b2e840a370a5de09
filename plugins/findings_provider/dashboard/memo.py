"""Values the dashboard keeps between requests, per warehouse: the one cache of its views."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from findings_provider.warehouse import Warehouse

_V = TypeVar("_V")


class Memo(Generic[_V]):
    """Values per (warehouse, key): at most ``size`` of them (the oldest goes first), each reused for ``ttl``
    seconds (None: until it is pushed out; put what the value depends on into its key)."""

    def __init__(self, size: int, ttl: float | None = None) -> None:
        self.size = size
        self.ttl = ttl
        self._values: dict[tuple[Hashable, ...], tuple[float, _V]] = {}

    def get(self, warehouse: Warehouse, key: tuple[Hashable, ...], compute: Callable[[], _V]) -> _V:
        """The value kept for ``key`` of ``warehouse``, else ``compute()``'s, kept from now on."""
        full = (id(warehouse.engine), str(warehouse.engine.url), *key)
        kept = self._values.get(full)
        if kept is not None and (self.ttl is None or time.monotonic() - kept[0] < self.ttl):
            return kept[1]
        value = compute()
        self._values.pop(full, None)
        while len(self._values) >= self.size:
            self._values.pop(next(iter(self._values)))
        self._values[full] = (time.monotonic(), value)
        return value
