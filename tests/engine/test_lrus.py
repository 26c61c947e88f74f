"""lrus.LRU: the bounded mapping every long-lived cache is made of."""

from __future__ import annotations

import pytest

from fleet.lrus import LRU


def test_adding_past_the_limit_drops_the_least_recently_used() -> None:
    cache: LRU[str, int] = LRU(2)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1  # a is now the most recent
    cache["c"] = 3
    assert list(cache) == ["a", "c"]
    assert cache.evicted == 1
    assert "b" not in cache and cache.get("b") is None


def test_retain_sweeps_in_one_pass_and_the_limit_is_checked() -> None:
    cache: LRU[int, int] = LRU(10)
    for i in range(10):
        cache[i] = i
    cache.retain(lambda k: k % 2 == 0)
    assert sorted(cache) == [0, 2, 4, 6, 8]
    del cache[0]
    assert len(cache) == 4
    with pytest.raises(ValueError, match="at least one entry"):
        LRU(0)
