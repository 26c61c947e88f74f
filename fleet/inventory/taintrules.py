"""DeviceTaintRules applied to the devices they select, as the scheduler sees them: pure.

KEP-5055: a DeviceTaintRule "has the same effect as if the taint was specified directly in the
ResourceSlice by the DRA driver". The scheduler and the eviction controller merge the rules' taints
into the devices they select (by driver, pool and device name); an inventory built from the slices
alone would call a device under maintenance free, and ``explain`` would miss why a claim stays
pending. ``tainted`` gives the slices with those taints added, each copied only where a rule adds
one, so every reader (inventory, explain, validate against a live cluster) judges what the
scheduler judges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

RULE_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
"""The DeviceTaintRule API per minor, newest first: v1 from 1.37, v1beta2 in 1.36, v1alpha3 before."""


def _selects(selector: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    return all(
        not selector.get(field) or selector.get(field) == value
        for field, value in (("driver", driver), ("pool", pool), ("device", device))
    )


def tainted(slices: Sequence[Mapping[str, Any]], rules: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``slices`` with each rule's taint added to the devices it selects (a rule without a selector
    selects nothing, as the API says)."""
    active: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for rule in rules:
        spec = rule.get("spec") or {}
        selector, taint = spec.get("deviceSelector"), spec.get("taint")
        if isinstance(selector, Mapping) and isinstance(taint, Mapping) and taint:
            active.append((selector, taint))
    if not active:
        return [dict(s) for s in slices]
    out: list[dict[str, Any]] = []
    for item in slices:
        spec = item.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        here = [(sel, taint) for sel, taint in active if _selects(sel, driver, pool, "") or sel.get("device")]
        if not here:
            out.append(dict(item))
            continue
        devices = []
        changed = False
        for device in spec.get("devices") or ():
            name = str(device.get("name", ""))
            added = [dict(taint) for sel, taint in here if _selects(sel, driver, pool, name)]
            if added:
                changed = True
                device = {**device, "taints": [*(device.get("taints") or ()), *added]}
            devices.append(device)
        out.append({**item, "spec": {**spec, "devices": devices}} if changed else dict(item))
    return out


__all__ = ["RULE_VERSIONS", "tainted"]
