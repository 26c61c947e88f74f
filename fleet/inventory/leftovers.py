"""What is left of a cluster's devices after live allocations: the ``fleetctl inventory`` view.

"Free" is not "not allocated" once devices share something. A MIG placement of a
dynamic-MIG GPU that nobody holds may still be unusable, because allocated
placements of the same GPU consume the counters it needs (memory slices,
multiprocessors); a whole GPU is blocked by any of its placements and blocks all
of them. A shared device (``allowMultipleAllocations``) stays usable while
capacity is left. A device with a ``NoSchedule``/``NoExecute`` taint is usable
only by requests that tolerate it. This module classifies every device by those
rules — the same :class:`~fleet.inventory.allocations.Usage` the allocator
checks — and summarises counter sets and shared capacities. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fleet.inventory import capacities
from fleet.inventory.allocations import Usage
from fleet.inventory.inventories import Inventory

STATES = ("allocated", "shared", "blocked", "tainted", "free")


@dataclasses.dataclass(frozen=True)
class Counted:
    """One counter of a counter set: how much allocated devices consume of what the pool offers."""

    node: str
    pool: str
    counter_set: str
    counter: str
    used: int
    """Nano-units, as every amount in the inventory (memory slices: slices in use x 1e9)."""
    total: int


def blocking_taints(taints: tuple[Mapping[str, Any], ...]) -> list[Mapping[str, Any]]:
    return [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]


def taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def state(inventory: Inventory, usage: Usage, index: int) -> str:
    """``allocated``, ``shared`` (held, capacity left), ``blocked`` (counters used up), ``tainted`` or ``free``."""
    item = inventory.devices[index]
    if index in usage.taken:
        return "allocated"
    if item.shared and index in usage.capacity:
        left = capacities.take({}, item.capacities, usage.capacity[index]) is not None or any(
            usage.capacity[index].get(name, 0) < c.value for name, c in item.capacities.items()
        )
        return "shared" if left else "allocated"
    for counter_set, counters in item.consumes:
        offered = inventory.counters.get((item.driver, item.pool, counter_set), {})
        for name, amount in counters:
            used = usage.counters.get((item.driver, item.pool, counter_set, name), 0)
            if used + amount > offered.get(name, 0):
                return "blocked"
    if blocking_taints(item.taints):
        return "tainted"
    return "free"


def counted(inventory: Inventory, usage: Usage) -> list[Counted]:
    """Counters of every counter set some allocated device consumes from (memory slices summed)."""
    nodes = {(d.driver, d.pool): d.node for d in inventory.devices}
    out = []
    for (driver, pool, counter_set), offered in sorted(inventory.counters.items()):
        if not any(k[:3] == (driver, pool, counter_set) and v for k, v in usage.counters.items()):
            continue
        slices = [n for n in offered if n.startswith("memory-slice-")]
        used = {n: usage.counters.get((driver, pool, counter_set, n), 0) for n in offered}
        node = nodes.get((driver, pool), pool)
        if slices:
            out.append(
                Counted(
                    node,
                    pool,
                    counter_set,
                    "memory slices",
                    sum(1 for n in slices if used[n]) * capacities.NANO,
                    len(slices) * capacities.NANO,
                )
            )
        for name in sorted(n for n in offered if n not in slices):
            if offered[name]:
                out.append(Counted(node, pool, counter_set, name, used[name], offered[name]))
    return out


__all__ = ["STATES", "Counted", "blocking_taints", "counted", "state", "taint_text"]
