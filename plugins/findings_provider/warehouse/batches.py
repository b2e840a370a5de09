"""Ids in batches for ``IN (...)`` lists: one definition of the batch size every warehouse reader uses."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

#: Ids per ``IN (...)`` list: well under SQLite's bound-parameter limit, and a short statement on PostgreSQL.
IN_LIST_BATCH = 500


def id_batches(ids: Iterable[int | str], size: int = IN_LIST_BATCH) -> Iterator[list[int]]:
    """The distinct ids as integers, ascending, in lists of at most ``size``."""
    todo = sorted({int(i) for i in ids})
    for start in range(0, len(todo), size):
        yield todo[start : start + size]
