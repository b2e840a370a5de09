"""Timestamps of the warehouse: lenient ISO 8601 in, one canonical UTC text form out.

Every timestamp the warehouse stores is written as ``YYYY-MM-DD HH:MM:SS.ffffff+00:00``: always UTC, always
with microseconds and the offset, so the text is fixed-width and sorts chronologically. SQLite stores that
text as is (comparisons between such strings are comparisons of instants); PostgreSQL reads it into
``timestamptz``. Rows are built with the text form directly because it is what both databases take fastest.
"""

from __future__ import annotations

from datetime import datetime, timezone

from findings_provider.client.timeutil import parse_timestamp

_fromisoformat = datetime.fromisoformat


def utc_datetime(value: object) -> datetime | None:
    """An aware UTC datetime from an ISO 8601 string or a datetime; None when it is not a timestamp.

    The parsing is the client's (``parse_timestamp``: every shape the service sends, no offset taken as UTC);
    the warehouse only turns its refusal into NULL, because the original value stays in ``raw``.
    """
    if not isinstance(value, (str, datetime)):
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def utc_text(value: object) -> str | None:
    """Return the canonical UTC text of an ISO 8601 timestamp or datetime; None when it is not one.

    The three shapes the service sends (``2020-11-18 23:28:12.391807+00:00``, ``2020-11-18T23:28:12.391Z``,
    ``2020-11-18T20:46:25.269650Z``) take a fast path: validated by the C parser, then re-sliced.
    """
    if value.__class__ is str:
        try:
            _fromisoformat(value)
        except ValueError:
            return None
        text: str = value
        size = len(text)
        if text[-1] == "Z" and text[10:11] == "T" and text[19:20] == ".":
            if size == 27:
                return f"{text[:10]} {text[11:26]}+00:00"
            if size == 24:
                return f"{text[:10]} {text[11:23]}000+00:00"
        elif size == 32 and text[10] == " " and text[26:] == "+00:00":
            return text
    moment = utc_datetime(value)
    return None if moment is None else moment.isoformat(" ", "microseconds")


def utc_now_text() -> str:
    """Return the current time in the canonical UTC text form."""
    return datetime.now(timezone.utc).isoformat(" ", "microseconds")
