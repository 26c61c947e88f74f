"""heaps: survivors leave the collector's sight, yet a cycle among them is reclaimed by the sweep."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.controller import heaps


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process keeps its usual collector


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_freezes_survivors_and_refcounting_still_frees_them() -> None:
    kept = [{"n": i, "items": [i]} for i in range(1000)]
    heaps.settle()
    assert heaps.frozen() >= 1000
    probe = Node()
    heaps.settle()
    gone = weakref.ref(probe)
    del probe  # no cycle: freed at once although frozen
    assert gone() is None
    assert kept[999]["items"] == [999]


def test_a_cycle_frozen_by_settle_is_reclaimed_by_the_sweep() -> None:
    ref = cycle()
    holder = [ref()]
    heaps.settle()  # alive when frozen (a watch stream, say), dropped afterwards
    holder.clear()
    gc.collect()
    assert ref() is not None, "a frozen cycle is out of the collector's sight"
    heaps.sweep()
    assert ref() is None


def test_settle_collects_young_cycles_before_freezing() -> None:
    ref = cycle()
    heaps.settle()
    assert ref() is None


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_trim_returns_the_c_heaps_free_pages() -> None:
    """Memory freed inside glibc's heap (not at its top) stays resident until trimmed."""
    chunks = [bytes(4096) for _ in range(25_000)]  # about 100 MiB, each served by malloc
    pin = bytes(4096)  # allocated last: the heap's top stays in use
    chunks.clear()
    before = _rss_mib()
    if not heaps.trim():
        pytest.skip("not glibc: nothing to trim")
    after = _rss_mib()
    assert before - after > 50, (before, after)
    assert pin
