"""Lenient ISO 8601 timestamp parsing: every shape the service sends becomes an aware UTC datetime."""

from __future__ import annotations

from datetime import datetime, timezone

UTC = timezone.utc


def parse_timestamp(value: object) -> datetime | None:
    """Parse a timestamp from the API into an aware UTC ``datetime``.

    Accepts ``2020-11-18 23:28:12.391807+00:00``, ``2020-11-18T23:28:12.391Z``, ``2020-11-18T20:46:25.269650Z``,
    dates without a zone (taken as UTC), epoch seconds (int, float or digit string), ``datetime`` objects and
    ``None``/``""`` (-> ``None``). Raises ``ValueError`` naming the value for anything else.
    """
    try:
        return _parse_timestamp(value)
    except (OverflowError, OSError):  # out of the platform's range: a bad value, not a crash of the caller
        raise ValueError(f"timestamp out of range: {value!r}") from None


def _parse_timestamp(value: object) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    elif isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=UTC)
    elif isinstance(value, str):
        text = value.strip()
        if text.replace(".", "", 1).isdigit():
            return datetime.fromtimestamp(float(text), tz=UTC)
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from None
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def to_epoch_seconds(value: datetime | float | int) -> float:
    """Return epoch seconds for a datetime (naive = UTC) or pass a number through."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    return float(value)


def to_iso(value: datetime | str) -> str:
    """Return an ISO 8601 UTC string (``...Z``) for a datetime; strings are checked and normalised."""
    dt = parse_timestamp(value)
    if dt is None:
        raise ValueError(f"not a timestamp: {value!r}")
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
