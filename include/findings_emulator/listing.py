"""Findings pages: the ordered ids of a filtered listing are computed once and cached, pages are slices.

Offset pagination over a million findings would otherwise walk the index from the start for every page.
Any change to findings clears the cache, so a listing always reflects the current data, as a live query would.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict

from sqlalchemy import Connection, select

from . import schema
from .selection import FindingFilters, conditions, dedup_condition


class FindingListing:
    """Ordered finding ids per filter set (a small LRU), and page bodies fetched by id."""

    def __init__(self, capacity: int = 8) -> None:
        self._cache: OrderedDict[FindingFilters, array[int]] = OrderedDict()
        self._capacity = capacity

    def invalidate(self) -> None:
        """Forget every cached listing; call inside the transaction that changes findings."""
        self._cache.clear()

    def ordered_ids(self, connection: Connection, filters: FindingFilters) -> array[int]:
        """Ids matching ``filters``, newest ``relevant_since`` first, then by id."""
        ids = self._cache.get(filters)
        if ids is None:
            t = schema.findings.c
            where = conditions(filters)
            if filters.dedup and filters.issue_type != "secrets":  # secrets count on every branch
                where.append(dedup_condition(filters))
            query = select(t.id).where(*where).order_by(t.relevant_since.desc(), t.id)
            ids = array("q", connection.execute(query).scalars())
            self._cache[filters] = ids
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(filters)
        return ids

    def page(self, connection: Connection, filters: FindingFilters, page: int, page_size: int) -> list[bytes]:
        """The stored JSON of the findings on one page (offset ``page * page_size``)."""
        ids = self.ordered_ids(connection, filters)[page * page_size: (page + 1) * page_size].tolist()
        return bodies(connection, ids)


def bodies(connection: Connection, ids: list[int]) -> list[bytes]:
    """Stored JSON of the findings ``ids``, in the order given (unknown ids are left out)."""
    if not ids:
        return []
    b = schema.finding_bodies.c
    found = {row.id: row.body for row in connection.execute(select(b.id, b.body).where(b.id.in_(ids)))}
    return [found[i] for i in ids if i in found]
