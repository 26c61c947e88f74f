"""Where the device requests and CEL selectors of a DRA object sit.

Rules about requests (class allowed, quota, CEL) all need the same walk over
``spec.devices.requests`` (or ``spec.spec.devices...`` for a template), with
the path of each field so findings point at its line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from fleet.manifests import Manifest, Path, maintenances, resources


class Request(NamedTuple):
    """One request alternative: the request itself, or one firstAvailable entry.

    A named tuple, not a frozen dataclass: the rules walk every claim's requests several
    times, and at 10,000 templates a frozen dataclass's per-field ``__setattr__`` showed."""

    name: str
    body: resources.BaseDeviceRequest
    path: Path
    """Path of the ``exactly`` / ``firstAvailable[i]`` mapping."""
    group: int
    """Index of the request (alternatives of one request share it)."""


class Selector(NamedTuple):
    expression: str
    path: Path
    """Path of the ``expression`` string."""


def devices_path(manifest: Manifest) -> Path:
    return ("spec", "spec", "devices") if manifest.kind == "ResourceClaimTemplate" else ("spec", "devices")


def requests(manifest: Manifest) -> Iterator[Request]:
    """Every request alternative of a claim or template (computed once per manifest: many rules ask)."""
    found = manifest.memo.get("requests")
    if found is None:
        found = manifest.memo["requests"] = list(_requests(manifest))
    return iter(found)


def _requests(manifest: Manifest) -> Iterator[Request]:
    model = manifest.model
    if isinstance(model, resources.ResourceClaimTemplate):
        claim = model.spec.spec
    elif isinstance(model, resources.ResourceClaim):
        claim = model.spec
    else:
        return
    base = (*devices_path(manifest), "requests")
    for index, request in enumerate(claim.devices.requests):
        if request.exactly is not None:
            yield Request(request.name, request.exactly, (*base, index, "exactly"), index)
        for sub, alternative in enumerate(request.first_available or []):
            yield Request(
                f"{request.name}/{alternative.name}",
                alternative,
                (*base, index, "firstAvailable", sub),
                index,
            )


def selectors(manifest: Manifest) -> Iterator[Selector]:
    """Every CEL expression of a DeviceClass, claim or GPUMaintenance, with its path."""
    model = manifest.model
    if isinstance(model, resources.DeviceClass):
        for index, selector in enumerate(model.spec.selectors):
            yield Selector(selector.cel.expression, ("spec", "selectors", index, "cel", "expression"))
        return
    if isinstance(model, maintenances.GPUMaintenance):
        if model.spec.devices.selector is not None:
            yield Selector(model.spec.devices.selector, ("spec", "devices", "selector"))
        return
    for request in requests(manifest):
        for index, selector in enumerate(request.body.selectors):
            yield Selector(selector.cel.expression, (*request.path, "selectors", index, "cel", "expression"))


__all__ = ["Request", "Selector", "devices_path", "requests", "selectors"]
