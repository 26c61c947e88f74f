"""A mapping that never holds more than its limit: the shape of every cache a long-lived process keeps.

The controller runs for months. A dict used as a cache grows with whatever keys it is
handed (a resourceVersion per status update, a URL per commit), and only the code path
that remembers to sweep it keeps it small: the one that forgets leaks. An ``LRU`` is
bounded by construction: adding past ``limit`` drops the least recently used entry,
whoever calls it. Sweeps still keep a cache to one run's worth; the limit is what holds
when a sweep is missed. ``evicted`` counts what the limit dropped, so a limit too small
for the fleet shows as misses rather than as memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(MutableMapping[K, V]):
    """At most ``limit`` entries; reading or writing one makes it the most recent."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an LRU holds at least one entry, not {limit}")
        self.limit = limit
        self.evicted = 0
        self._data: OrderedDict[K, V] = OrderedDict()

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        """The value (made the most recent), or ``default``: one lookup, no exception."""
        data = self._data
        if key not in data:
            return default
        data.move_to_end(key)
        return data[key]

    def __setitem__(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.limit:
            self._data.popitem(last=False)
            self.evicted += 1

    def __delitem__(self, key: K) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def retain(self, keep: Callable[[K], bool]) -> None:
        """Drop every entry whose key ``keep`` refuses (a sweep), in one pass."""
        for key in [k for k in self._data if not keep(k)]:
            del self._data[key]


__all__ = ["LRU"]
