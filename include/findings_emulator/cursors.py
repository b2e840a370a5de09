"""Opaque keyset cursors: the sort key of the last item of a page, base64url-encoded JSON."""

from __future__ import annotations

import base64
import binascii

import orjson

from .errors import invalid


def encode(started: float, item_id: int) -> str:
    """A cursor pointing after the item with sort key (``started``, ``item_id``)."""
    return base64.urlsafe_b64encode(orjson.dumps([started, item_id])).decode().rstrip("=")


def decode(cursor: str) -> tuple[float, int]:
    """The sort key a cursor points after; a 400 naming ``cursor`` if it was not made by :func:`encode`."""
    try:
        started, item_id = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return float(started), int(item_id)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise invalid("cursor", f"{cursor!r} is not a cursor returned by this endpoint") from exc
