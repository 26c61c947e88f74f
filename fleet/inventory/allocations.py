"""Can one claim be allocated on one node? A small search with the allocator's rules.

All devices of a claim come from one node (node-local pools). Requests are
taken in order; for each, its alternatives in order (``firstAvailable``); an
alternative takes ``count`` unused matching devices, or with ``All`` every
matching device on the node (at least one, none already taken). Constraints
hold across the devices of the requests they name: ``matchAttribute`` = every
device has the attribute and the same value, ``distinctAttribute`` = every
device has it and the values differ. Partitionable devices may not consume
more of a shared counter than the pool offers. Reaching an alternative whose
selectors fail on this node with a runtime error fails the node, as the
scheduler's Filter does.

The search is exhaustive but bounded (:data:`MAX_STEPS`); the caller searches
one node per node class (see :mod:`fleet.inventory.claims`), so a thousand
identical nodes are searched once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from fleet import cel
from fleet.cel.devices import parse_qualified_name
from fleet.inventory.inventories import Inventory
from fleet.inventory.requests import Alternative, ClaimShape, Constraint

MAX_STEPS = 20_000
Candidates = Sequence[Sequence[frozenset[int] | None]]  # [request][alternative] -> devices, None = error


class SearchLimit(Exception):
    """The search exceeded :data:`MAX_STEPS`; the answer is unknown."""


def _attribute(inventory: Inventory, index: int, qualified: str) -> object:
    device = inventory.devices[index].device
    domain, name = parse_qualified_name(qualified, default_domain="")
    return device.attributes.get(domain, {}).get(name, _MISSING)


_MISSING = object()


def _constraints_hold(
    inventory: Inventory, constraints: Sequence[Constraint], chosen: Sequence[tuple[Alternative, tuple[int, ...]]]
) -> bool:
    for constraint in constraints:
        values = [
            _attribute(inventory, index, constraint.attribute)
            for alternative, devices in chosen
            if constraint.applies_to(alternative)
            for index in devices
        ]
        if any(v is _MISSING for v in values):
            return False
        if constraint.distinct:
            if len(set(map(repr, values))) != len(values):
                return False
        elif len({repr(v) for v in values}) > 1:
            return False
    return True


def _counters_hold(inventory: Inventory, devices: set[int]) -> bool:
    if not inventory.counters:
        return True
    used: dict[tuple[str, str, str, str], cel.Quantity] = {}
    for index in devices:
        item = inventory.devices[index]
        for counter_set, counters in item.consumes:
            for name, value in counters:
                key = (item.driver, item.pool, counter_set, name)
                used[key] = used[key].add(value) if key in used else value
    for (driver, pool, counter_set, name), value in used.items():
        available = inventory.counters.get((driver, pool, counter_set), {}).get(name)
        if available is None or value.compare(available) > 0:
            return False
    return True


def allocate(
    *, inventory: Inventory, shape: ClaimShape, candidates: Candidates, taken: frozenset[int] = frozenset()
) -> tuple[int, ...] | None:
    """Devices for one claim on one node, or None. Raises SearchLimit when undecided."""
    steps = 0
    chosen: list[tuple[Alternative, tuple[int, ...]]] = []

    def solve(position: int, used: frozenset[int]) -> tuple[int, ...] | None:
        nonlocal steps
        steps += 1
        if steps > MAX_STEPS:
            raise SearchLimit
        if position == len(shape.requests):
            return tuple(used - taken) if _counters_hold(inventory, set(used - taken)) else None
        for alternative, devices in zip(shape.requests[position], candidates[position], strict=True):
            if devices is None:
                return None  # the scheduler stops at a runtime error
            free = sorted(devices - used)
            if alternative.all_devices:
                options: Sequence[tuple[int, ...]] = [tuple(free)] if free and len(free) == len(devices) else []
            else:
                options = itertools.combinations(free, alternative.count)  # type: ignore[assignment]
            for option in options:
                chosen.append((alternative, option))
                if _constraints_hold(inventory, shape.constraints, chosen):
                    found = solve(position + 1, used | frozenset(option))
                    if found is not None:
                        chosen.pop()
                        return found
                chosen.pop()
        return None

    return solve(0, taken)


def capacity_on_node(*, inventory: Inventory, shape: ClaimShape, candidates: Candidates, limit: int = 64) -> int:
    """How many copies of the claim fit on the node at once (greedy, at most ``limit``)."""
    taken: frozenset[int] = frozenset()
    copies = 0
    while copies < limit:
        found = allocate(inventory=inventory, shape=shape, candidates=candidates, taken=taken)
        if found is None:
            break
        copies += 1
        taken |= frozenset(found)
    return copies


__all__ = ["MAX_STEPS", "SearchLimit", "allocate", "capacity_on_node"]
