"""The cyclic garbage collector in a process that keeps a cluster's worth of objects for months.

The controller holds every watched object, the parsed repository and the last plan:
at 10,000 objects, millions of container objects that live for hours. CPython's
collector re-scans its oldest generation as the heap grows, holding the GIL, so the
event loop stalls. ``settle`` runs often (each settle collects what the last period
allocated, so a short period keeps each pause short) and after each reconcile.
(``pipelines.tune_gc``, which the CLI uses, does not fit here: with its thresholds the young
collections themselves grow long.) The loop lag this leaves is a figure of
``bench/run controller`` (docs/benchmarks.md).

Objects that survived the young collections are moved out of the collector's sight
(``gc.freeze``): reference counting still frees them the moment they are dropped,
only a reference *cycle* among frozen objects would outlive its last use. So
``settle`` collects everything not yet frozen first (cycles that are already dead), and
``sweep`` — once per resync period, when the loop has nothing urgent — unfreezes,
collects everything once, and freezes again: what leaked in between is bounded by
one period. ``frozen()`` is exported as a metric after each sweep, so a growth would show.

``trim`` hands the C allocator's free pages back to the system (glibc's ``malloc_trim``;
nothing elsewhere). Python's small-object allocator releases its arenas by itself when they
empty, but what glibc serves (large dicts and lists, response bodies, file contents) stays
mapped after a peak (``bench/run controller --malloc-stats`` shows what a trim returns). It is
cheap, so the controller trims after each reconcile and sweep.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable


def settle() -> None:
    """Collect what is not frozen yet, then freeze every survivor (called after each reconcile
    and every ``Options.settle_every`` seconds, so a long reconcile's survivors are not
    re-scanned either). A full collection here only scans the objects made since the last
    freeze, so it costs what a young one does, and it also finds cycles that lived through
    the young generations (a reconcile's task groups and streams) before they are frozen."""
    gc.collect()
    gc.freeze()


def sweep() -> None:
    """One full collection over everything, then freeze again (once per resync period)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


_TRIM = _malloc_trim()


def trim() -> bool:
    """Return free memory at the top and inside the C heap to the system; False where that is not glibc."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def frozen() -> int:
    """How many objects are frozen (this walks the whole frozen list, so call it once per sweep)."""
    return gc.get_freeze_count()


__all__ = ["frozen", "settle", "sweep", "trim"]
