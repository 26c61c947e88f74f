"""Can one claim be allocated on one node, and how many copies fit at once? The allocator's rules.

All devices of a claim come from one node (node-local pools). Requests are
taken in order; for each, its alternatives in order (``firstAvailable``); an
alternative takes ``count`` matching devices, or with ``All`` every matching
device on the node (at least one; every one must be free). Devices are tried
in the scheduler's order (pool, slice name, position in the slice) and
combinations in the order the scheduler's ``allocateOne`` walks them, so the
first solution found is the one the scheduler picks.

A device is free unless another claim holds it — except a device with
``allowMultipleAllocations``, which many claims share until its capacity is
used (:mod:`fleet.inventory.capacities`). Constraints hold across the devices
of the requests they name: ``matchAttribute`` = every device has the
attribute and the same value, ``distinctAttribute`` = every device has it and
the values differ. Partitionable devices (``consumesCounters``, dynamic MIG)
consume their pool's shared counters: what allocated claims already consume
(:class:`Usage`) plus this claim's devices may not exceed a counter set, so
two MIG placements that overlap — or a whole GPU and any of its placements —
never fit at once. A shared device consumes its counters once, when it is
first allocated. Reaching an alternative whose selectors fail on this node
with a runtime error fails the node, as the scheduler's Filter does.

``capacity_on_node`` allocates copy after copy of one claim on a node, each
against what the earlier copies took: the scheduler's answer to N pods with
identical claims. The search is exhaustive but bounded (:data:`MAX_STEPS`);
the caller searches one node per node class (see
:mod:`fleet.inventory.claims`), so a thousand identical nodes are searched once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fleet.cel.devices import parse_qualified_name
from fleet.inventory import capacities
from fleet.inventory.inventories import Inventory
from fleet.inventory.requests import Alternative, ClaimShape

MAX_STEPS = 20_000
MAX_COPIES = 512
"""Copies counted per node at most (a device shared with no capacity asked fits any number)."""
Candidates = Sequence[Sequence[frozenset[int] | None]]  # [request][alternative] -> devices, None = error
CounterKey = tuple[str, str, str, str]
"""(driver, pool, counter set, counter)."""


class SearchLimit(Exception):
    """The search exceeded :data:`MAX_STEPS`; the answer is unknown."""


@dataclasses.dataclass
class Usage:
    """What allocated claims hold: the scheduler's ``AllocatedState`` for fleet's devices.

    ``taken``: devices held whole; ``counters``: counters their devices consume (each allocated
    device once); ``capacity``: per shared device, the capacity its allocations consume.
    """

    taken: set[int] = dataclasses.field(default_factory=set)
    counters: dict[CounterKey, int] = dataclasses.field(default_factory=dict)
    capacity: dict[int, dict[str, int]] = dataclasses.field(default_factory=dict)

    def copy(self) -> Usage:
        return Usage(set(self.taken), dict(self.counters), {k: dict(v) for k, v in self.capacity.items()})

    def hold(self, inventory: Inventory, index: int, consumed: dict[str, int] | None) -> None:
        """Record one allocation of device ``index`` (``consumed``: its capacity share, when shared)."""
        item = inventory.devices[index]
        first = index not in self.taken and index not in self.capacity
        if item.shared:
            held = self.capacity.setdefault(index, {})
            for name, amount in (consumed or {}).items():
                held[name] = held.get(name, 0) + amount
        else:
            self.taken.add(index)
        if first:
            for counter_set, counters in item.consumes:
                for name, amount in counters:
                    key = (item.driver, item.pool, counter_set, name)
                    self.counters[key] = self.counters.get(key, 0) + amount

    def on_node(self, devices: Sequence[int]) -> object:
        """What of this usage concerns a node with ``devices`` (positions, so equal nodes compare equal)."""
        taken = tuple(p for p, i in enumerate(devices) if i in self.taken)
        held = self.capacity
        shared = tuple((p, tuple(sorted(held[i].items()))) for p, i in enumerate(devices) if i in held)
        return (taken, shared)


_MISSING = object()


def _attribute(inventory: Inventory, index: int, qualified: str) -> object:
    device = inventory.devices[index].device
    domain, name = parse_qualified_name(qualified, default_domain="")
    value = device.attributes.get(domain, {}).get(name, _MISSING)
    return value if value is _MISSING else repr(value)


class _Claim:
    """The search for one claim: devices picked so far and what they consume, undone on backtracking."""

    def __init__(self, inventory: Inventory, shape: ClaimShape, candidates: Candidates, usage: Usage) -> None:
        self.inventory = inventory
        self.shape = shape
        self.candidates = candidates
        self.usage = usage
        self.steps = 0
        self.exclusive: set[int] = set()
        self.counters: dict[CounterKey, int] = {}
        self.capacity: dict[int, dict[str, int]] = {}
        self.picks: list[tuple[int, dict[str, int] | None]] = []
        self.values: list[list[object]] = [[] for _ in shape.constraints]
        self.invalid = set(inventory.invalid_pools)

    # -- one device ---------------------------------------------------------------------------

    def _capacity_share(self, alternative: Alternative, index: int) -> tuple[bool, dict[str, int] | None]:
        item = self.inventory.devices[index]
        requests = dict(alternative.capacity)
        if not requests and not item.shared and not any(c.policy for c in item.capacities.values()):
            return True, None
        used = None
        if item.shared:
            used = dict(self.usage.capacity.get(index, {}))
            for name, amount in self.capacity.get(index, {}).items():
                used[name] = used.get(name, 0) + amount
        share = capacities.take(requests, item.capacities, used)
        return share is not None, share if item.shared else None

    def _counters_fit(self, index: int) -> bool:
        item = self.inventory.devices[index]
        if not item.consumes:
            return True
        if item.shared and (index in self.usage.capacity or index in self.capacity):
            return True  # a shared device consumes its counters once
        for counter_set, counters in item.consumes:
            offered = self.inventory.counters.get((item.driver, item.pool, counter_set))
            if offered is None:
                return False
            for name, amount in counters:
                key = (item.driver, item.pool, counter_set, name)
                limit = offered.get(name)
                if limit is None or self.usage.counters.get(key, 0) + self.counters.get(key, 0) + amount > limit:
                    return False
        return True

    def _constraints_fit(self, alternative: Alternative, index: int) -> list[int] | None:
        added: list[int] = []
        for position, constraint in enumerate(self.shape.constraints):
            if not constraint.applies_to(alternative):
                continue
            value = _attribute(self.inventory, index, constraint.attribute)
            seen = self.values[position]
            if (
                value is _MISSING
                or (constraint.distinct and value in seen)
                or (not constraint.distinct and seen and seen[0] != value)
            ):
                for undo in added:
                    self.values[undo].pop()
                return None
            seen.append(value)
            added.append(position)
        return added

    def add(self, alternative: Alternative, index: int) -> list[int] | None:
        """Take device ``index`` for ``alternative``; the constraints touched, or None when it cannot."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise SearchLimit
        item = self.inventory.devices[index]
        if self.invalid and (item.driver, item.pool) in self.invalid:
            return None
        if not item.shared and (index in self.usage.taken or index in self.exclusive):
            return None
        fits, share = self._capacity_share(alternative, index)
        if not fits or not self._counters_fit(index):
            return None
        touched = self._constraints_fit(alternative, index)
        if touched is None:
            return None
        if item.shared:
            if index not in self.usage.capacity and index not in self.capacity:
                self._count(index, +1)
            held = self.capacity.setdefault(index, {})
            for name, amount in (share or {}).items():
                held[name] = held.get(name, 0) + amount
        else:
            self.exclusive.add(index)
            self._count(index, +1)
        self.picks.append((index, share))
        return touched

    def remove(self, index: int, touched: list[int]) -> None:
        _, share = self.picks.pop()
        for position in touched:
            self.values[position].pop()
        item = self.inventory.devices[index]
        if item.shared:
            held = self.capacity[index]
            for name, amount in (share or {}).items():
                held[name] -= amount
            if not any(i == index for i, _ in self.picks):
                del self.capacity[index]
                if index not in self.usage.capacity:
                    self._count(index, -1)
        else:
            self.exclusive.discard(index)
            self._count(index, -1)

    def _count(self, index: int, sign: int) -> None:
        item = self.inventory.devices[index]
        for counter_set, counters in item.consumes:
            for name, amount in counters:
                key = (item.driver, item.pool, counter_set, name)
                self.counters[key] = self.counters.get(key, 0) + sign * amount

    # -- requests -----------------------------------------------------------------------------

    def solve(self, position: int = 0) -> bool:
        if position == len(self.shape.requests):
            return True
        for alternative, devices in zip(self.shape.requests[position], self.candidates[position], strict=True):
            if devices is None:
                return False  # the scheduler stops at a runtime error
            ordered = sorted(devices)
            if alternative.all_devices:
                if self._all(position, alternative, ordered):
                    return True
            elif self._pick(position, alternative, ordered, 0, alternative.count):
                return True
        return False

    def _pick(self, position: int, alternative: Alternative, ordered: list[int], start: int, left: int) -> bool:
        if left == 0:
            return self.solve(position + 1)
        for offset in range(start, len(ordered) - left + 1):
            index = ordered[offset]
            touched = self.add(alternative, index)
            if touched is None:
                continue
            if self._pick(position, alternative, ordered, offset + 1, left - 1):
                return True
            self.remove(index, touched)
        return False

    def _all(self, position: int, alternative: Alternative, ordered: list[int]) -> bool:
        """``All``: every matching device whose capacity suits the request, each of them free."""
        requests = dict(alternative.capacity)
        chosen = [
            i
            for i in ordered
            if capacities.take(requests, self.inventory.devices[i].capacities, self.usage.capacity.get(i)) is not None
        ]
        if not chosen:
            return False
        done: list[tuple[int, list[int]]] = []
        for index in chosen:
            touched = self.add(alternative, index)
            if touched is None:
                break
            done.append((index, touched))
        else:
            if self.solve(position + 1):
                return True
        for index, touched in reversed(done):
            self.remove(index, touched)
        return False


def allocate(
    *, inventory: Inventory, shape: ClaimShape, candidates: Candidates, usage: Usage | None = None
) -> list[tuple[int, dict[str, int] | None]] | None:
    """The devices (and capacity shares) one claim gets on one node, or None. Raises SearchLimit."""
    claim = _Claim(inventory, shape, candidates, usage or Usage())
    return claim.picks if claim.solve() else None


def capacity_on_node(
    *,
    inventory: Inventory,
    shape: ClaimShape,
    candidates: Candidates,
    usage: Usage | None = None,
    limit: int = MAX_COPIES,
) -> int:
    """How many copies of the claim fit on the node at once, each after the earlier ones (at most ``limit``)."""
    state = usage.copy() if usage is not None else Usage()
    copies = 0
    while copies < limit:
        found = allocate(inventory=inventory, shape=shape, candidates=candidates, usage=state)
        if found is None:
            break
        copies += 1
        for index, share in found:
            state.hold(inventory, index, share)
    return copies


__all__ = ["MAX_COPIES", "MAX_STEPS", "SearchLimit", "Usage", "allocate", "capacity_on_node"]
