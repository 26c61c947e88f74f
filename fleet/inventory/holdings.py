"""Devices that live claims hold right now: "fits now", not only "fits ever".

A snapshot answers whether a template could *ever* be allocated. Against a
live cluster the next question is whether it can be allocated *now*: the
scheduler only hands out devices no allocated ResourceClaim holds (admin-access
claims aside, which do not take devices). :func:`holdings` reads them from the
claims' ``status.allocation.devices.results``; :func:`without` removes them
from the ResourceSlices, so the same :class:`~fleet.inventory.Inventory` and
``Checker`` answer for what is free. Pure: plain dicts in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DeviceKey = tuple[str, str, str]
"""(driver, pool, device): how an allocation result names a device."""


@dataclass(frozen=True)
class Holding:
    """One allocated claim and the devices it holds."""

    claim: str
    """``namespace/name``."""
    devices: frozenset[DeviceKey]


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
        if held:
            out.append(Holding(f"{metadata.get('namespace', '')}/{metadata.get('name', '')}", held))
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


__all__ = ["DeviceKey", "Holding", "holdings", "without"]
