"""Which devices a GPUMaintenance names, among those an inventory holds: pure.

``select`` is the one reading of a maintenance's ``spec.devices``, shared by the engine (over the live
ResourceSlices, to write DeviceTaintRules) and by ``validate`` (over the live or the declared devices,
to refuse a maintenance that matches nothing, takes a whole pool or overlaps another). ``pools`` and
``nodes`` say where (none: every node), the other fields which devices there: a device is taken when
it passes every field given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from fleet import cel
from fleet.inventory.inventories import Inventory, InventoryDevice

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


def select(filters: Filters, inventory: Inventory, *, pool_nodes: Mapping[str, Iterable[str]]) -> list[int]:
    """Indices of ``inventory.devices`` that ``filters`` take; ``pool_nodes``: GPUNodePool → its nodes.
    Raises ``cel.SelectorCompileError`` for a selector that does not compile."""
    scope: set[str] | None = None
    if filters.pools or filters.nodes:
        scope = set(filters.nodes)
        for pool in filters.pools:
            scope.update(pool_nodes.get(pool, ()))
    names, uuids, keys = set(filters.devices), set(filters.uuids), set(filters.health_taints)
    chosen = [
        i
        for i, d in enumerate(inventory.devices)
        if (scope is None or d.node in scope)
        and (not names or d.name in names)
        and (not uuids or str(d.device.get("attributes", *UUID_ATTRIBUTE)) in uuids)
        and (not keys or tainted(d, keys))
    ]
    if filters.selector and chosen:
        chosen = sorted(passing(inventory, filters.selector, within=set(chosen)))
    return chosen


def tainted(device: InventoryDevice, keys: set[str]) -> bool:
    """The device carries a taint with one of ``keys`` (``*``: any)."""
    found = [str(taint.get("key", "")) for taint in device.taints]
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


__all__ = ["ANY_TAINT", "FLEET_TAINTS", "UUID_ATTRIBUTE", "Filters", "passing", "select", "tainted"]
