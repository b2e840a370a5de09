"""Timestamp rendering in the three formats the real service mixes, and parsing of what clients send."""

from __future__ import annotations

from datetime import datetime, timezone

# 2020-11-18 23:28:12.391807+00:00
SPACE_OFFSET = 0
# 2020-11-18T23:28:12.391Z
MILLIS_Z = 1
# 2020-11-18T20:46:25.269650Z
MICROS_Z = 2


def to_millis(epoch: float) -> float:
    """``epoch`` rounded to whole milliseconds, so that every format renders it exactly."""
    return round(epoch * 1000) / 1000


def to_micros(epoch: float) -> float:
    """``epoch`` rounded to whole microseconds, so that a rendered and re-parsed value compares equal."""
    return round(epoch * 1_000_000) / 1_000_000


def render(epoch: float, style: int) -> str:
    """Render epoch seconds as a UTC timestamp string in one of the three styles."""
    moment = datetime.fromtimestamp(epoch, timezone.utc)
    if style == SPACE_OFFSET:
        return moment.isoformat(sep=" ", timespec="microseconds")
    if style == MILLIS_Z:
        return moment.isoformat(timespec="milliseconds")[:-6] + "Z"
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def iso_z(epoch: float) -> str:
    """Render epoch seconds in the form used by scans and projects (``...T...Z``, microseconds)."""
    return render(epoch, MICROS_Z)


def parse_iso(value: str) -> float:
    """Parse an ISO 8601 date-time (``Z`` or offset; naive means UTC) into epoch seconds.

    Raises ``ValueError`` when the text is not a date-time.
    """
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
