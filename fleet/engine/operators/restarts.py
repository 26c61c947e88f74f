"""Which GPU components an operator upgrade restarts: the old and new render compared section by section.

The GPU Operator's chart does not deploy the driver, the device plugin or the DRA kubelet plugin
itself: it renders custom resources from which the operator's controller deploys them. In chart
v26.7.0 these are

| object | section | deploys |
|---|---|---|
| ``ClusterPolicy`` (``clusterPolicy.deployCR``) | ``spec.driver`` | the driver |
| | ``spec.devicePlugin`` | the device plugin |
| | ``spec.daemonsets``, ``spec.hostPaths`` | every daemonset it deploys (both above) |
| ``NVIDIADriver`` (``driver.nvidiaDriverCRD``) | ``spec`` | the driver |
| ``GPUCluster`` (``gpuCluster.deployCR``) | ``spec.draDriver`` | the DRA kubelet plugin |
| | ``spec.daemonsets``, ``spec.hostPaths`` | its daemonsets (the DRA kubelet plugin among them) |

A section whose fields differ between the release's stored manifest (``helm get manifest``, what
the operator acts on now) and the new render restarts what it deploys: a values change, or a chart
version whose defaults change an image. Both sides are helm's render, without the API server's
defaults, so only what the chart or the values changed differs. A section disabled (``enabled:
false``) on both sides restarts nothing; a component's object that appears or vanishes counts as
changed. Everything else a chart renders (the operator's own Deployment, RBAC, NFD) is safe. What the
operator's code picks by default for a field the render leaves empty is not seen here.

Pure, but for ``disruption``'s inputs: the stage reads the manifest, the render, the slices and the
claims only when the release is about to change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.engine import disruptions

DRIVER = "the driver"
DEVICE_PLUGIN = "the device plugin"
KUBELET_PLUGIN = "the DRA kubelet plugin"
ORDER = (DRIVER, DEVICE_PLUGIN, KUBELET_PLUGIN)
SHARED = ("daemonsets", "hostPaths")
SECTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "ClusterPolicy": {"driver": (DRIVER,), "devicePlugin": (DEVICE_PLUGIN,)},
    "NVIDIADriver": {"": (DRIVER,)},
    "GPUCluster": {"draDriver": (KUBELET_PLUGIN,)},
}
"""Per kind, the spec section ("" the whole spec) and what the operator deploys from it."""
GPU_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True)
class FieldChange:
    kind: str
    path: str
    before: object
    after: object

    def __str__(self) -> str:
        return f"{self.kind} {self.path} {_text(self.before)} → {_text(self.after)}"


@dataclass(frozen=True)
class Restart:
    """What an upgrade restarts, and the rendered fields that say so."""

    components: tuple[str, ...]
    fields: tuple[FieldChange, ...]

    def reason(self) -> str:
        shown = "; ".join(str(f) for f in self.fields[: disruptions.SHOWN])
        more = len(self.fields) - disruptions.SHOWN
        if more > 0:
            shown += f" and {more} more field(s)"
        return f"restarts {_joined(self.components)} ({shown})"


def _joined(items: tuple[str, ...]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _text(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str | int | float | bool):
        return str(value)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def _by_kind(objects: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The component objects of a render, by kind (the chart renders at most one of each)."""
    return {str(o.get("kind")): o for o in objects if o and str(o.get("kind")) in SECTIONS}


def _leaves(before: object, after: object, path: str) -> Iterator[tuple[str, object, object]]:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted(set(before) | set(after)):
            yield from _leaves(before.get(key), after.get(key), f"{path}.{key}")
    elif isinstance(before, Mapping) and after is None:
        yield from _leaves(before, {}, path)
    elif isinstance(after, Mapping) and before is None:
        yield from _leaves({}, after, path)
    elif before != after:
        yield path, before, after


def _enabled(section: object) -> bool:
    return isinstance(section, Mapping) and section.get("enabled", True) is not False


def restarted(*, before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]) -> Restart | None:
    """What going from render ``before`` to render ``after`` restarts (None: nothing of the three)."""
    old, new = _by_kind(before), _by_kind(after)
    components: set[str] = set()
    fields: list[FieldChange] = []
    for kind, sections in SECTIONS.items():
        if kind not in old and kind not in new:
            continue
        old_spec = (old.get(kind) or {}).get("spec") or {}
        new_spec = (new.get(kind) or {}).get("spec") or {}
        live: set[str] = set()
        for section, deployed in sections.items():
            a, b = (old_spec, new_spec) if not section else (old_spec.get(section), new_spec.get(section))
            on = _enabled(a if a is not None else {}) if kind in old else False
            on = on or (_enabled(b if b is not None else {}) if kind in new else False)
            if not on:
                continue
            live.update(deployed)
            path = f"spec.{section}" if section else "spec"
            found = [FieldChange(kind, p, x, y) for p, x, y in _leaves(a, b, path)]
            if found or (kind in old) != (kind in new):
                components.update(deployed)
                fields += found
        for section in () if "" in sections else SHARED:  # a whole-spec section holds them already
            pairs = _leaves(old_spec.get(section), new_spec.get(section), f"spec.{section}")
            found = [FieldChange(kind, p, x, y) for p, x, y in pairs]
            if found and live:
                components.update(live)
                fields += found
    if not components:
        return None
    return Restart(components=tuple(c for c in ORDER if c in components), fields=tuple(fields))


def gpu_nodes(slices: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes publishing the NVIDIA DRA driver's devices: where its daemonsets run."""
    return frozenset(
        str(spec["nodeName"])
        for spec in ((s.get("spec") or {}) for s in slices)
        if spec.get("driver") == GPU_DRIVER and spec.get("nodeName")
    )


def disruption(
    restart: Restart, *, slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]
) -> disruptions.Disruption:
    """The release entry's ``Disruption``: the GPU nodes and every claim holding the driver's devices."""
    held = sorted(
        disruptions.claim_name(c)
        for c in claims
        if any(
            r.get("driver") == GPU_DRIVER for r in (disruptions.allocation(c).get("devices") or {}).get("results") or ()
        )
    )
    return disruptions.Disruption(reason=restart.reason(), nodes=gpu_nodes(slices), claims=tuple(held))


__all__ = ["FieldChange", "Restart", "disruption", "gpu_nodes", "restarted"]
