"""Published slices that the API server would refuse or the scheduler cannot use: findings, not crashes.

A hand-edited inventory snapshot (or a driver bug) can hold slices that break the
rules partitionable devices and taints come with. The API server refuses some
of them outright; others it accepts and the scheduler then treats the whole pool
as invalid (``validateDeviceCounterConsumption``: "counter ... not found in
counter set") or never allocates the device. Each problem is reported with the
path of the field inside the snapshot, so ``fleetctl validate --inventory`` can
point at the file and line.

The limits are those of ``resource.k8s.io/v1`` in Kubernetes 1.36 and 1.37
(k8s.io/api v0.37.2 ``resource/v1/types.go``): ``ResourceSliceMaxCounterSets`` = 8
counter sets per slice, ``ResourceSliceMaxCountersPerCounterSet`` = 32,
``ResourceSliceMaxDeviceCounterConsumptionsPerDevice`` = 2 consumesCounters
entries per device, ``ResourceSliceMaxCountersPerDeviceCounterConsumption`` = 32,
``DeviceTaintsMaxLength`` = 16 taints per device, ``ResourceSliceMaxDevices`` =
128 devices per slice or ``ResourceSliceMaxDevicesWithAdvancedFeatures`` = 64
when a device uses taints or counters, and ``DeviceTolerationsMaxLength`` = 16
tolerations per request (checked with the claim, :mod:`fleet.inventory.requests`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fleet import cel
from fleet.inventory import capacities

MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2
MAX_COUNTERS_PER_CONSUMPTION = 32
MAX_TAINTS = 16
MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64
MAX_TOLERATIONS = 16
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
TOLERATION_EFFECTS = ("", "NoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("", "Equal", "Exists")

Path = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class Problem:
    """One problem of one published slice; ``path`` starts at the slice (``spec``, ``devices``, 3, ...)."""

    slice: int
    path: Path
    rule: str
    message: str
    hint: str


def _amount(raw: Any) -> int | None:
    try:
        return capacities.nanos(cel.parse_quantity(str((raw or {}).get("value", ""))))
    except cel.QuantityError:
        return None


def problems(slices: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """Every problem of ``slices`` (as the API returns them), in slice and device order."""
    out: list[Problem] = []
    offered: dict[tuple[str, str, str], tuple[int, dict[str, int | None]]] = {}
    for position, item in enumerate(slices):
        spec = item.get("spec") or {}
        pool = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        sets = spec.get("sharedCounters") or []
        if len(sets) > MAX_COUNTER_SETS:
            out.append(
                Problem(
                    position,
                    ("spec", "sharedCounters"),
                    "slice-limit",
                    f"{len(sets)} counter sets in one slice; the API allows {MAX_COUNTER_SETS}",
                    "split the counter sets over several slices of the pool (the NVIDIA driver puts one slice "
                    "per GPU's devices and all counter sets in slice 0, 8 GPUs at most)",
                )
            )
        for index, counter_set in enumerate(sets):
            counters = counter_set.get("counters") or {}
            if len(counters) > MAX_COUNTERS_PER_SET:
                out.append(
                    Problem(
                        position,
                        ("spec", "sharedCounters", index, "counters"),
                        "slice-limit",
                        f"counter set {counter_set.get('name')} has {len(counters)} counters; "
                        f"the API allows {MAX_COUNTERS_PER_SET}",
                        "fewer counters per set",
                    )
                )
            offered[(*pool, str(counter_set.get("name")))] = (
                position,
                {str(k): _amount(v) for k, v in counters.items()},
            )
    for position, item in enumerate(slices):
        spec = item.get("spec") or {}
        pool = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        devices = spec.get("devices") or []
        advanced = any(d.get("taints") or d.get("consumesCounters") for d in devices)
        limit = MAX_DEVICES_ADVANCED if advanced else MAX_DEVICES
        if len(devices) > limit:
            out.append(
                Problem(
                    position,
                    ("spec", "devices"),
                    "slice-limit",
                    f"{len(devices)} devices in one slice; the API allows {limit}"
                    + (" when a device has taints or consumes counters" if advanced else ""),
                    "split the devices over several slices of the pool (resourceSliceCount)",
                )
            )
        for index, device in enumerate(devices):
            out += _device(position, index, device, pool, offered)
    return out


def _device(
    position: int,
    index: int,
    device: Mapping[str, Any],
    pool: tuple[str, str],
    offered: Mapping[tuple[str, str, str], tuple[int, dict[str, int | None]]],
) -> list[Problem]:
    out: list[Problem] = []
    name = device.get("name", f"#{index}")
    base: Path = ("spec", "devices", index)
    consumes = device.get("consumesCounters") or []
    if len(consumes) > MAX_CONSUMPTIONS_PER_DEVICE:
        out.append(
            Problem(
                position,
                (*base, "consumesCounters"),
                "slice-limit",
                f"device {name} has {len(consumes)} consumesCounters entries; the API allows "
                f"{MAX_CONSUMPTIONS_PER_DEVICE}",
                "consume from at most two counter sets per device",
            )
        )
    for entry, consumption in enumerate(consumes):
        counter_set = str(consumption.get("counterSet"))
        counters = consumption.get("counters") or {}
        where: Path = (*base, "consumesCounters", entry)
        if len(counters) > MAX_COUNTERS_PER_CONSUMPTION:
            out.append(
                Problem(
                    position,
                    (*where, "counters"),
                    "slice-limit",
                    f"device {name} consumes {len(counters)} counters from one set; the API allows "
                    f"{MAX_COUNTERS_PER_CONSUMPTION}",
                    "fewer counters",
                )
            )
        found = offered.get((*pool, counter_set))
        if found is None:
            out.append(
                Problem(
                    position,
                    (*where, "counterSet"),
                    "counter-unknown",
                    f"device {name} consumes from counter set {counter_set!r}, which no slice of pool "
                    f"{pool[1]} defines: the scheduler treats the whole pool as invalid",
                    "define the counter set in the pool's sharedCounters (the driver names it "
                    "gpu-<minor>-counter-set) or fix counterSet",
                )
            )
            continue
        _, available = found
        for counter, raw in counters.items():
            if counter not in available:
                out.append(
                    Problem(
                        position,
                        (*where, "counters", str(counter)),
                        "counter-unknown",
                        f"device {name} consumes counter {counter!r}, which counter set {counter_set} does not "
                        "have: the scheduler treats the whole pool as invalid",
                        f"counters of {counter_set}: {', '.join(sorted(available)[:12])}",
                    )
                )
                continue
            amount, limit = _amount(raw), available[counter]
            if amount is not None and limit is not None and amount > limit:
                out.append(
                    Problem(
                        position,
                        (*where, "counters", str(counter), "value"),
                        "counter-exceeded",
                        f"device {name} consumes {capacities.show(amount)} of counter {counter}, more than "
                        f"counter set {counter_set} has ({capacities.show(limit)}): it can never be allocated",
                        "lower the consumption or raise the counter set's value",
                    )
                )
    taints = device.get("taints") or []
    if len(taints) > MAX_TAINTS:
        out.append(
            Problem(
                position,
                (*base, "taints"),
                "slice-limit",
                f"device {name} has {len(taints)} taints; the API allows {MAX_TAINTS}",
                "one taint per key (the driver replaces a key's value)",
            )
        )
    for entry, taint in enumerate(taints):
        if taint.get("effect") not in TAINT_EFFECTS:
            out.append(
                Problem(
                    position,
                    (*base, "taints", entry, "effect"),
                    "taint-effect",
                    f"device {name}: taint {taint.get('key')} has effect {taint.get('effect')!r}",
                    f"device taint effects: {', '.join(TAINT_EFFECTS)}",
                )
            )
    return out


__all__ = [
    "MAX_CONSUMPTIONS_PER_DEVICE",
    "MAX_COUNTER_SETS",
    "MAX_TAINTS",
    "MAX_TOLERATIONS",
    "TAINT_EFFECTS",
    "TOLERATION_EFFECTS",
    "Problem",
    "problems",
]
