"""Coercion of templated operator inputs and connection extras (native or text), with errors naming the value."""

from __future__ import annotations

import json
from typing import Any

from findings_provider.config import ConfigError

_NULLS = ("", "none", "null")


class ParamError(ConfigError):
    """An operator input is invalid; the message names it, the value and what is allowed.

    A ``ConfigError``: no task retry can fix it, so operators fail at once (``AirflowFailException``).
    """


def as_bool(value: Any, name: str) -> bool:
    """A boolean from a bool or its text (``True``, ``false``, ``1``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ParamError(f"{name} = {value!r} is not a boolean; use true or false")


def as_optional_int(value: Any, name: str, *, minimum: int | None = None,
                    maximum: int | None = None) -> int | None:
    """An integer (or None) from an int or its text, at least ``minimum`` and at most ``maximum``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NULLS):
        return None
    if isinstance(value, bool):
        raise ParamError(f"{name} = {value!r} is not an integer")
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise ParamError(f"{name} = {value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ParamError(f"{name} = {number} must be >= {minimum}")
    if maximum is not None and number > maximum:
        raise ParamError(f"{name} = {number} must be <= {maximum}")
    return number


def as_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A required integer from an int or its text, within ``minimum`` and ``maximum``."""
    number = as_optional_int(value, name, minimum=minimum, maximum=maximum)
    if number is None:
        raise ParamError(f"{name} is required (an integer)")
    return number


def as_optional_digits(value: Any, name: str) -> str | None:
    """A numeric id as a string (or None)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NULLS):
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ParamError(f"{name} = {value!r} must be a numeric id (digits only) or null")
    return text


def as_str_list(value: Any, name: str, *, allowed: tuple[str, ...] | None = None) -> list[str]:
    """A list of strings from a list, a JSON list or comma-separated text; each must be ``allowed``."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text.replace("'", '"'))
            except ValueError:
                raise ParamError(f"{name} = {value!r} is not a list") from None
        else:
            value = [v for v in text.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        raise ParamError(f"{name} = {value!r} is not a list")
    items = [str(v).strip() for v in value]
    if allowed is not None:
        bad = [v for v in items if v not in allowed]
        if bad:
            raise ParamError(f"{name}: unknown value(s) {bad}; allowed: {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def as_int_list(value: Any, name: str, *, minimum: int | None = None) -> list[int]:
    """A list of integers (ids) from a list or its JSON text, each at least ``minimum``."""
    items = as_str_list(value, name)
    bad = [v for v in items if not v.lstrip("-").isdigit()]
    if bad:
        raise ParamError(f"{name}: {bad} are not integers")
    numbers = [int(v) for v in items]
    low = [n for n in numbers if minimum is not None and n < minimum]
    if low:
        raise ParamError(f"{name}: {low} must be >= {minimum}")
    return numbers


def as_http_url(value: Any, name: str) -> str:
    """An absolute http(s) URL with a host (a ticket's address in the tracker)."""
    from urllib.parse import urlsplit

    text = value.strip() if isinstance(value, str) else ""
    if value is None or text.lower() in _NULLS:
        raise ParamError(f"{name} is required: the http(s) URL of an existing ticket")
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname or " " in text:
        raise ParamError(f"{name} = {value!r} must be an http(s) URL with a host, such as "
                         "https://tracker.example/browse/SEC-12")
    return text
