"""``present(x)``: ``x``, asserted not ``None`` (for tests reading optional fields they know are set)."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    assert value is not None
    return value
