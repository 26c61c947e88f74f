"""Pure: what a DeviceTaintRule takes, and the ``spec.devices`` that makes fleet's engine write it back.

Since 1.35 a rule selects by driver, pool and device name; a GPUMaintenance names devices by node,
name and uuid, and NVIDIA's driver names a node's pool after the node. ``selected`` reads a rule
against the live ResourceSlices: which node publishes its pool, which devices it takes now, or why
a maintenance cannot name them. ``devices`` picks the ``spec.devices`` for a maintenance's rules: a
whole pool is ``nodes: [node]``, devices of one node ``nodes`` and ``devices``, devices of several
nodes ``uuids`` (nodes times devices would take more than the rules do, and a uuid stays with the
GPU). Whichever it picks is only kept when the engine's own expansion (``fleet.engine.maintenances``:
``select``, ``targets``, ``desired``) over the same slices and live rules gives back exactly those
rules, by name, selector and effect: the import never guesses how fleet will read its file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.engine import maintenances as fleet_rules
from fleet.engine.imports.pools import GPU_DRIVER
from fleet.engine.plans import MaintenanceRule, Targets
from fleet.inventory.inventories import ALL_NODES, Inventory, InventoryDevice
from fleet.inventory.targets import UUID_ATTRIBUTE
from fleet.manifests.maintenances import UUID

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Selected:
    """A rule whose devices one node publishes: what it takes now."""

    name: str
    node: str
    whole: bool
    """It selects the pool, not one device."""
    devices: tuple[InventoryDevice, ...]


@dataclass(frozen=True)
class Expansion:
    """What the engine expands a maintenance over: the live devices and DeviceTaintRules."""

    inventory: Inventory
    api: str
    """The cluster's DeviceTaintRule API (``featuregates.maintenance_api``)."""
    rules: Mapping[str, Obj]
    """Every live rule of that API by name, fleet's own included: what the engine sees."""
    cluster: str

    def by_pool(self) -> dict[tuple[str, str], list[InventoryDevice]]:
        out: dict[tuple[str, str], list[InventoryDevice]] = {}
        for d in self.inventory.devices:
            out.setdefault((d.driver, d.pool), []).append(d)
        return out


def selected(rule: Obj, *, by_pool: Mapping[tuple[str, str], list[InventoryDevice]]) -> Selected | str:
    """What ``rule`` takes now, or why a GPUMaintenance cannot name it (an IMPORT.md row's reason)."""
    sel = (rule.get("spec") or {}).get("deviceSelector")
    if sel is None:
        return "it has no deviceSelector, so it selects no device; it stays as it is: delete it"
    driver, pool, device = (str(sel.get(k) or "") for k in ("driver", "pool", "device"))
    which = f"device {device}" if device else "every device"
    if not driver:
        return (
            f"its deviceSelector names no driver, so it takes {which} of pool {pool or '(any)'} whichever driver "
            f"publishes it, and fleet's rules name one; it stays as it is. Add driver: {GPU_DRIVER} to it if that "
            "is what it means, and import again"
        )
    if driver != GPU_DRIVER:
        return (
            f"it takes devices of driver {driver}, and the import maps rules of NVIDIA's GPUs ({GPU_DRIVER}) alone; "
            f"it stays as it is. Write a GPUMaintenance with devices.drivers: [{driver}] by hand if fleet should "
            "carry it"
        )
    if not pool:
        return (
            f"its deviceSelector names no pool, so it takes {which} on every node; a GPUMaintenance names the nodes "
            f"(each node is one pool of {GPU_DRIVER}); it stays as it is. Make it one rule per node (pool), or "
            "write the maintenance by hand, and import again"
        )
    devices = by_pool.get((driver, pool), [])
    if not devices:
        return (
            f"no node publishes pool {pool} (no ResourceSlice of {GPU_DRIVER} names it), so it takes nothing now; "
            "it stays as it is. Delete it, or import again once the node publishes its GPUs"
        )
    nodes = sorted({d.node for d in devices})
    if len(nodes) != 1 or nodes[0] == ALL_NODES or nodes[0].startswith("<"):
        return (
            f"pool {pool} is published for {', '.join(nodes)}, not by one node, and a GPUMaintenance names the "
            "devices by node; it stays as it is"
        )
    chosen = tuple(d for d in devices if not device or d.name == device)
    if not chosen:
        return (
            f"pool {pool} (node {nodes[0]}) publishes no device {device}, so it takes nothing now; it stays as it "
            "is. Delete it, or fix its device and import again"
        )
    return Selected(name=str(rule["metadata"]["name"]), node=nodes[0], whole=not device, devices=chosen)


def devices(
    name: str,
    rules: list[dict[str, Any]],
    found: list[Selected],
    *,
    effect: str,
    direct: bool,
    adopt: bool,
    over: Expansion,
) -> tuple[dict[str, list[str]] | None, str]:
    """The first ``spec.devices`` the engine expands into exactly ``rules``, or None and why none does."""
    nodes = sorted({s.node for s in found})
    candidates: list[dict[str, list[str]]] = []
    if all(s.whole for s in found):
        candidates.append({"nodes": nodes})
    elif len(nodes) == 1 and not any(s.whole for s in found):
        candidates.append({"nodes": nodes, "devices": sorted({d.name for s in found for d in s.devices})})
    uuids = sorted({str(d.device.get("attributes", *UUID_ATTRIBUTE) or "") for s in found for d in s.devices})
    if all(UUID.match(u) for u in uuids):
        candidates.append({"uuids": uuids})
    differs = ""
    for candidate in candidates:
        differs = _differs(rendered(name, candidate, effect=effect, direct=direct, adopt=adopt, over=over), rules)
        if not differs:
            return candidate, ""
    return None, (
        f"fleet would not keep its rules as they are: {differs or 'its devices have no uuid to name them by'}; "
        "it stays as it is. Write the GPUMaintenance by hand (or delete the rules) if fleet should carry it"
    )


def rendered(
    name: str, devices: Mapping[str, list[str]], *, effect: str, direct: bool, adopt: bool, over: Expansion
) -> list[dict[str, Any]]:
    """The rules the engine writes for the maintenance ``name`` with these ``devices``."""
    rule = MaintenanceRule(
        name=name,
        targets=Targets(
            nodes=tuple(devices.get("nodes", ())),
            devices=tuple(devices.get("devices", ())),
            uuids=tuple(devices.get("uuids", ())),
        ),
        reason=name,
        effect=effect,
        direct=direct,
        api_version=over.api,
        adopt=adopt,
    )
    chosen = fleet_rules.select(rule, over.inventory, pool_nodes={})
    found = fleet_rules.targets(over.inventory, chosen)
    return [d.body for d in fleet_rules.desired(rule, found, live_rules=over.rules, cluster=over.cluster, revision="")]


def _differs(rendered: list[dict[str, Any]], rules: list[dict[str, Any]]) -> str:
    """How the rendered rules differ from the live ones ("" when only fleet's marks and taint would)."""
    live = {str(r["metadata"]["name"]): r for r in rules}
    made = {str(r["metadata"]["name"]): r for r in rendered}
    parts = [f"it would add rule {n} ({_selection(made[n])})" for n in sorted(set(made) - set(live))]
    parts += [f"it would not keep rule {n}" for n in sorted(set(live) - set(made))]
    for n in sorted(set(live) & set(made)):
        if _selection(made[n]) != _selection(live[n]):
            parts.append(f"it would select {_selection(made[n])} by rule {n}")
        if fleet_rules.effect_of(made[n]) != fleet_rules.effect_of(live[n]):
            parts.append(f"it would write rule {n} at {fleet_rules.effect_of(made[n])}")
    return "; ".join(parts)


def _selection(rule: Obj) -> str:
    t = fleet_rules.target_of(rule)
    where = f"driver {t.driver}, pool {t.pool}"
    return f"{where}, device {t.device}" if t.device else where


__all__ = ["Expansion", "Selected", "devices", "rendered", "selected"]
