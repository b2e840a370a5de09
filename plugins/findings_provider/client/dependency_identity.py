"""Canonical identity and values of a dependency, shared by the client's models and the warehouse's rows.

The reference gives a dependency an ``id``; the real service gives none (api-notes, "Dependencies"). Where there is
no ``id`` the dependency is keyed by what identifies it there, in this order::

    {repository id}|{lockfile path}|{ecosystem}|{package name}|{version}

e.g. ``123456|go.mod|gomod|github.com/pkg/errors|v0.9.1``. The lockfile path is ``lockfilePath`` or
``definedAt.path``; the ecosystem is lower-cased; a missing part is empty. In each part ``%`` is written ``%25`` and
``|`` is written ``%7C``, so the five parts can always be told apart and no two dependencies share a key. A
dependency without a repository id or a package name has no key (it cannot be told apart from others). Entries that
share a key (the same package and version listed twice in one lockfile) are one dependency: the last one received
wins in the warehouse. Line numbers are left out on purpose: they move with every edit of the lockfile.
"""

from __future__ import annotations

from typing import Any

from findings_provider.client.vocabulary import Transitivity

SEPARATOR = "|"

#: Transitivity as the findings send it (lower case); the dependencies endpoint sends ``DIRECT``,
#: ``TRANSITIVE``, ``UNKNOWN_TRANSITIVITY``.
_TRANSITIVITY = {t.value: t.value for t in Transitivity} | {"unknown_transitivity": Transitivity.UNKNOWN.value}


def _part(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return text.replace("%", "%25").replace(SEPARATOR, "%7C")


def dependency_key(repository_id: Any, lockfile_path: Any, ecosystem: Any, name: Any, version: Any) -> str | None:
    """The canonical key of a dependency without an ``id`` (format in the module docstring), or None."""
    if repository_id in (None, "") or isinstance(repository_id, bool) or not name:
        return None
    if isinstance(ecosystem, str):
        ecosystem = ecosystem.lower()
    return SEPARATOR.join(_part(v) for v in (repository_id, lockfile_path, ecosystem, name, version))


def canonical_transitivity(value: Any) -> Any:
    """``direct``, ``transitive`` or ``unknown`` from either case (``TRANSITIVITY_`` prefix tolerated); another
    value is kept as lower-case text (never an error); None stays None."""
    if value is None:
        return None
    text = str(value).strip().lower().removeprefix("transitivity_")
    return _TRANSITIVITY.get(text, text)


def licence_list(value: Any) -> list[str]:
    """Licences as a list of strings: a list as it is (blanks dropped), one string as a one-item list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, str) else str(v) for v in value if v is not None and str(v).strip()]
    return [str(value)]
