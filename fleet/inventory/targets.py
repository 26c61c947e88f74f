"""Which devices a GPUMaintenance names, among those an inventory holds: pure.

``select`` is the one reading of a maintenance's ``spec.devices``, shared by the engine (over the live
ResourceSlices, to write DeviceTaintRules) and by ``validate`` (over the live or the declared devices,
to refuse a maintenance that matches nothing, takes a whole pool or overlaps another). ``pools`` and
``nodes`` say where (none: every node), ``drivers`` whose devices (none: any driver's), the other fields
which devices there: a device is taken when it passes every field given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from fleet import cel
from fleet.inventory.inventories import Inventory, InventoryDevice, node_of

UUID_ATTRIBUTE = ("gpu.nvidia.com", "uuid")
"""Where NVIDIA's driver publishes a device's uuid (``GPU-…``, ``MIG-…``)."""
ANY_TAINT = "*"
"""In ``healthTaints``: any taint the driver put on the device."""
FLEET_TAINTS = "fleet.gpufleet.dev/"
"""The prefix of the taints fleet's own DeviceTaintRules add (a reader may merge them into the slices):
never a health taint, so ``*`` does not take the devices a maintenance already holds."""


class Filters(Protocol):
    """A maintenance's ``spec.devices`` (the manifest's model or the engine's plain copy)."""

    @property
    def pools(self) -> Sequence[str]: ...
    @property
    def nodes(self) -> Sequence[str]: ...
    @property
    def devices(self) -> Sequence[str]: ...
    @property
    def uuids(self) -> Sequence[str]: ...
    @property
    def selector(self) -> str | None: ...
    @property
    def health_taints(self) -> Sequence[str]: ...
    @property
    def drivers(self) -> Sequence[str]: ...


def select(filters: Filters, inventory: Inventory, *, pool_nodes: Mapping[str, Iterable[str]]) -> list[int]:
    """Indices of ``inventory.devices`` that ``filters`` take; ``pool_nodes``: GPUNodePool → its nodes.
    Raises ``cel.SelectorCompileError`` for a selector that does not compile."""
    scope = _scope(filters, pool_nodes)
    names, uuids, keys = set(filters.devices), set(filters.uuids), set(filters.health_taints)
    drivers = set(filters.drivers)
    chosen = [
        i
        for i, d in enumerate(inventory.devices)
        if (scope is None or d.node in scope)
        and (not drivers or d.driver in drivers)
        and (not names or d.name in names)
        and (not uuids or str(d.device.get("attributes", *UUID_ATTRIBUTE)) in uuids)
        and (not keys or tainted(d, keys))
    ]
    if filters.selector and chosen:
        chosen = sorted(passing(inventory, filters.selector, within=set(chosen)))
    return chosen


def candidates(
    filters: Filters, slices: Sequence[Mapping[str, Any]], *, pool_nodes: Mapping[str, Iterable[str]]
) -> Sequence[Mapping[str, Any]]:
    """The slices of every pool in which a device may pass ``filters`` (all of them where only a CEL
    selector or nothing narrows): ``select`` over an inventory of these takes the devices it takes
    over an inventory of all ``slices``, without converting every device of the fleet for CEL.

    Read from the slices as published, a superset of what ``select`` keeps: any generation, and a
    uuid anywhere among a device's attribute values. A pool is kept whole, every slice of it, for
    the inventory reads its newest generation and ``targets`` whether a maintenance takes it whole
    over all its slices."""
    scope = _scope(filters, pool_nodes)
    names, uuids, keys = set(filters.devices), set(filters.uuids), set(filters.health_taints)
    drivers = set(filters.drivers)
    if scope is None and not names and not uuids and not keys:
        return [item for item in slices if not drivers or _pool_of(item.get("spec") or {})[0] in drivers]
    pools: set[tuple[str, str]] = set()
    for item in slices:
        spec = item.get("spec") or {}
        pool = _pool_of(spec)
        if pool in pools or (scope is not None and node_of(spec) not in scope) or (drivers and pool[0] not in drivers):
            continue
        for raw in spec.get("devices") or ():
            if (
                (not names or str(raw.get("name")) in names)
                and (not uuids or _mentions(raw, uuids))
                and (not keys or (raw.get("taints") and _tainted(raw["taints"], keys)))
            ):
                pools.add(pool)
                break
    return [item for item in slices if _pool_of(item.get("spec") or {}) in pools]


def _scope(filters: Filters, pool_nodes: Mapping[str, Iterable[str]]) -> set[str] | None:
    """The nodes ``pools`` and ``nodes`` name (None: every node)."""
    if not (filters.pools or filters.nodes):
        return None
    scope = set(filters.nodes)
    for pool in filters.pools:
        scope.update(pool_nodes.get(pool, ()))
    return scope


def _pool_of(spec: Mapping[str, Any]) -> tuple[str, str]:
    return str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))


def _mentions(device: Mapping[str, Any], uuids: set[str]) -> bool:
    """Some attribute of the slice's ``device`` has one of ``uuids`` as a value (whatever its name)."""
    return any(
        str(value) in uuids
        for attribute in (device.get("attributes") or {}).values()
        if isinstance(attribute, Mapping)
        for value in attribute.values()
    )


def tainted(device: InventoryDevice, keys: set[str]) -> bool:
    """The device carries a taint with one of ``keys`` (``*``: any)."""
    return _tainted(device.taints, keys)


def _tainted(taints: Iterable[Mapping[str, Any]], keys: set[str]) -> bool:
    found = [str(taint.get("key", "")) for taint in taints]
    return any(key in keys or (ANY_TAINT in keys and not key.startswith(FLEET_TAINTS)) for key in found)


def passing(inventory: Inventory, expression: str, *, within: set[int] | None = None) -> set[int]:
    """Devices on which the CEL ``expression`` is true (a runtime error counts as false), evaluated once
    per distinct projection of the devices (``Inventory.groups``)."""
    selector = cel.compile_selector(expression)
    found: set[int] = set()
    for projection, indices in inventory.groups(selector.references).items():
        if within is not None and within.isdisjoint(indices):
            continue
        try:
            ok = selector.evaluate_projection(projection)
        except cel.SelectorRuntimeError:
            ok = False
        if ok:
            found.update(indices if within is None else within.intersection(indices))
    return found


__all__ = ["ANY_TAINT", "FLEET_TAINTS", "UUID_ATTRIBUTE", "Filters", "candidates", "passing", "select", "tainted"]
