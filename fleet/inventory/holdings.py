"""Devices that live claims hold right now: "fits now", not only "fits ever".

A snapshot answers whether a template could *ever* be allocated. Against a
live cluster the next question is whether it can be allocated *now*: the
scheduler only hands out devices no allocated ResourceClaim holds (admin-access
claims aside, which do not take devices). :func:`holdings` reads them from the
claims' ``status.allocation.devices.results``. Removing held devices is not
enough once devices share something: an allocated MIG placement still
consumes its GPU's counters (so other placements of that GPU, and the whole
GPU, may no longer fit), and a shared device (``allowMultipleAllocations``)
stays available to further claims with what is left of its capacity. So
:func:`usage` turns the holdings into the scheduler's allocated state over an
inventory (:class:`fleet.inventory.allocations.Usage`), which ``Checker``
takes as ``usage=``. Pure: plain dicts in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet import cel
from fleet.inventory import capacities
from fleet.inventory.allocations import Usage
from fleet.inventory.inventories import Inventory

DeviceKey = tuple[str, str, str]
"""(driver, pool, device): how an allocation result names a device."""


@dataclass(frozen=True)
class Holding:
    """One allocated claim and the devices it holds."""

    claim: str
    """``namespace/name``."""
    devices: frozenset[DeviceKey]
    shares: tuple[tuple[DeviceKey, tuple[tuple[str, str], ...]], ...] = ()
    """Allocations of shared devices (results with a ``shareID``): device and ``consumedCapacity``."""


def holdings(claims: Iterable[Mapping[str, Any]]) -> list[Holding]:
    """The allocated claims among ``claims`` (ResourceClaim dicts as the API returns them)."""
    out = []
    for claim in claims:
        metadata = claim.get("metadata") or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        held = frozenset(
            (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
            for r in results
            if not r.get("adminAccess")
        )
        shares = tuple(
            (
                (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))),
                tuple(sorted((str(k), str(v)) for k, v in (r.get("consumedCapacity") or {}).items())),
            )
            for r in results
            if r.get("shareID") and not r.get("adminAccess")
        )
        if held:
            out.append(Holding(f"{metadata.get('namespace', '')}/{metadata.get('name', '')}", held, shares))
    return sorted(out, key=lambda h: h.claim)


def without(slices: Iterable[Mapping[str, Any]], taken: frozenset[DeviceKey] | set[DeviceKey]) -> list[dict[str, Any]]:
    """``slices`` with the ``taken`` devices removed (the rest unchanged)."""
    out = []
    for item in slices:
        spec = dict(item.get("spec") or {})
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        spec["devices"] = [d for d in spec.get("devices") or [] if (driver, pool, str(d.get("name"))) not in taken]
        out.append({**item, "spec": spec})
    return out


def _amounts(consumed: tuple[tuple[str, str], ...]) -> dict[str, int]:
    out = {}
    for name, text in consumed:
        try:
            out[name] = capacities.nanos(cel.parse_quantity(text))
        except cel.QuantityError:
            continue
    return out


def usage(inventory: Inventory, held: Iterable[Holding]) -> Usage:
    """The scheduler's allocated state for ``held`` over ``inventory``'s devices.

    A device held whole is taken; a shared one keeps what its allocations consumed
    (``consumedCapacity``); every allocated device consumes its counters once. Devices the
    inventory does not publish (any more) are ignored, as the scheduler ignores them.
    """
    index = {(d.driver, d.pool, d.name): i for i, d in enumerate(inventory.devices)}
    state = Usage()
    for holding in held:
        shared = {key for key, _ in holding.shares}
        for key, consumed_capacity in holding.shares:
            position = index.get(key)
            if position is not None:
                state.hold(inventory, position, _amounts(consumed_capacity))
        for key in sorted(holding.devices - shared):
            position = index.get(key)
            if position is not None:
                state.hold(inventory, position, None)
    return state


__all__ = ["DeviceKey", "Holding", "holdings", "usage", "without"]
