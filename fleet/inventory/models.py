"""The GPU model table: every device of a known NVIDIA GPU model, exactly as the DRA driver publishes it.

One table for two users. The sandbox publishes these devices on its simulated
nodes (``fleet.sandbox.gpus`` adds Nodes and ResourceSlice objects around them),
and ``fleetctl validate`` builds each cluster's devices from the repository's
GPUNodePools with it when CI has no cluster (:mod:`fleet.policy.declarations`),
so what validate predicts from a pool is what the sandbox — and the real
driver — would publish for it.

What the driver publishes (``gpu.nvidia.com``, as in the NVIDIA DRA
driver's ``deviceinfo.go``/``mig.go``): one device per whole GPU named
``gpu-<minor>``, or the MIG devices of a GPU in MIG mode named
``gpu-<minor>-mig-<profile>-<giProfileId>-<start>``; the driver's own attributes
unqualified (``productName``), the standard ones fully qualified
(``resource.kubernetes.io/pciBusID``); versions semver-normalised (``580.95.05``
→ ``580.95.5``); memory a binary-SI quantity (``81559Mi``); MIG capacities as
plain counts plus ``memorySlice<i>`` for each memory slice of the placement.

Identity differs per device *and* node: UUIDs are name-based (uuid5 of node and
device) and the PCI domain is the node's ordinal, so two nodes never share a bus
id, while reruns produce the same objects. Pure: it builds dicts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

DRIVER = "gpu.nvidia.com"
_UUID_NS = uuid.UUID("6f1e0b8e-2a51-4c4e-9d51-6a0c3f1f7e10")


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile as ``nvidia-smi mig -lgip`` lists it."""

    name: str  # "1g.10gb"
    gi_id: int
    slices: int  # memory slices a placement spans
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    memory: str  # quantity
    starts: tuple[int, ...] = ()
    """Placement starts (memory slice index) ``nvidia-smi mig -lgipp`` lists for the profile."""


@dataclass(frozen=True)
class GpuModel:
    """Model-level values every device of one GPU model publishes."""

    key: str
    product_name: str
    architecture: str
    cuda_compute_capability: str
    driver_version: str
    cuda_driver_version: str
    memory: str
    buses: tuple[int, ...]
    instance_type: str
    brand: str = "Nvidia"
    addressing_mode: str = "None"
    node_memory: str = "2Ti"
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)


_STARTS = {1: (0, 1, 2, 3, 4, 5, 6), 2: (0, 2, 4), 4: (0, 4), 8: (0,)}


def _mig(
    name: str,
    gi: int,
    slices: int,
    sm: int,
    ce: int,
    dec: int,
    jpeg: int,
    ofa: int,
    mem: str,
    *,
    starts: tuple[int, ...] = (),
) -> MigProfile:
    return MigProfile(name, gi, slices, sm, ce, dec, 0, jpeg, ofa, mem, starts or _STARTS[slices])


_DGX_BUSES = (0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF)

MODELS: dict[str, GpuModel] = {
    "h100": GpuModel(
        key="h100",
        instance_type="p5.48xlarge",
        product_name="NVIDIA H100 80GB HBM3",
        architecture="Hopper",
        cuda_compute_capability="9.0.0",
        driver_version="580.95.5",
        cuda_driver_version="13.0.0",
        memory="81559Mi",
        buses=_DGX_BUSES,
        mig_profiles={
            p.name: p
            for p in (
                _mig("1g.10gb", 19, 1, 16, 1, 1, 1, 0, "9984Mi"),
                _mig("1g.10gb+me", 20, 1, 16, 1, 1, 1, 1, "9984Mi", starts=(0, 1, 2, 3, 4, 5, 6)),
                _mig("1g.20gb", 15, 2, 26, 1, 1, 1, 0, "20096Mi", starts=(0, 2, 4, 6)),
                _mig("2g.20gb", 14, 2, 32, 2, 2, 2, 0, "20096Mi"),
                _mig("3g.40gb", 9, 4, 60, 3, 3, 3, 0, "40448Mi"),
                _mig("4g.40gb", 5, 4, 64, 4, 4, 4, 0, "40448Mi", starts=(0,)),
                _mig("7g.80gb", 0, 8, 132, 8, 7, 7, 1, "81152Mi"),
            )
        },
    ),
    "a100": GpuModel(
        key="a100",
        instance_type="p4de.24xlarge",
        product_name="NVIDIA A100-SXM4-80GB",
        architecture="Ampere",
        cuda_compute_capability="8.0.0",
        driver_version="570.172.8",
        cuda_driver_version="12.8.0",
        memory="80Gi",
        buses=(0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD),
        node_memory="1Ti",
        mig_profiles={
            p.name: p
            for p in (
                _mig("1g.10gb", 19, 1, 14, 1, 0, 0, 0, "9728Mi"),
                _mig("2g.20gb", 14, 2, 28, 2, 1, 0, 0, "19968Mi"),
                _mig("3g.40gb", 9, 4, 42, 3, 2, 0, 0, "40192Mi"),
                _mig("4g.40gb", 5, 4, 56, 4, 2, 0, 0, "40192Mi", starts=(0,)),
                _mig("7g.80gb", 0, 8, 98, 7, 5, 1, 1, "81152Mi"),
            )
        },
    ),
    # A small inference GPU, so that memory selectors have something to exclude: nvidia-smi
    # reports 23034 MiB total on an L4 (PCIe, Ada Lovelace, compute capability 8.9).
    "l4": GpuModel(
        key="l4",
        instance_type="g6.12xlarge",
        product_name="NVIDIA L4",
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9.0",
        driver_version="580.95.5",
        cuda_driver_version="13.0.0",
        memory="23034Mi",
        buses=(0x01, 0x02, 0x41, 0x42, 0x81, 0x82, 0xC1, 0xC2),
        node_memory="256Gi",
    ),
    # Model-level values from an NVML reading of a real H200, driver 580.159.04
    # (tests/data/nvml/h200.json); tests/sandbox checks them with model_from_nvml.
    "h200": GpuModel(
        key="h200",
        instance_type="p5en.48xlarge",
        product_name="NVIDIA H200",
        architecture="Hopper",
        cuda_compute_capability="9.0.0",
        driver_version="580.159.4",
        cuda_driver_version="13.0.0",
        memory="143771Mi",
        buses=(0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB),
    ),
}

# Static MIG layout of a MIG-enabled GPU in the sandbox (placement start per instance),
# as mig-parted's "all-balanced" leaves it on a 7-slice GPU.
MIG_LAYOUT: tuple[tuple[str, int], ...] = (("1g.10gb", 0), ("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 4))


MIG_STRATEGIES = ("static", "dynamic")
CONSUMABLE_SHARES = ("", "memory", "unlimited")
"""The driver's ``--consumable-shares`` modes (besides a share count N > 0)."""


@dataclass(frozen=True)
class NodeSpec:
    """One GPU node: which model, how many GPUs, which of them are in MIG mode (and how split)."""

    name: str
    ordinal: int
    pool: str
    model: GpuModel
    gpus: int
    mig_gpus: int = 0
    mig_layout: tuple[tuple[str, int], ...] = MIG_LAYOUT
    """(profile, placement start) of the MIG devices of each MIG GPU."""
    mig_strategy: str = "static"
    """``dynamic``: the driver's DynamicMIG gate — every placement of every profile published as a
    partitionable device consuming its GPU's counter set (KEP-4815), partitions made on demand."""
    consumable_shares: str = ""
    """The driver's ConsumableShares mode: ``memory``, ``unlimited`` or a share count (``"4"``); "" = off."""
    numa: bool = True
    """The kernel reports a NUMA node for the GPUs' PCI devices (a server does; the single-GPU VM of
    tests/data/real-gpu reports none), so the driver publishes ``resource.kubernetes.io/numaNode``."""


def _semver(text: str) -> str:
    """The driver's normalisation: ``580.95.05`` → ``580.95.5``, ``9.0`` → ``9.0.0``."""
    parts = [str(int(p)) for p in text.split(".")]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts[:3])


def model_from_nvml(reading: dict[str, Any], *, key: str = "gpu") -> dict[str, str]:
    """The model-level attribute values the driver derives from an NVML reading (as in tests/data/nvml)."""
    device = reading["devices"][0]
    arch = device["architectureName"].removeprefix("NVML_DEVICE_ARCH_").title()
    brand = device["brandName"].removeprefix("NVML_BRAND_").title()
    cuda = reading["cudaDriverVersion"]
    mib = device["memoryTotalBytes"] // (1024 * 1024)
    return {
        "productName": device["name"],
        "architecture": arch,
        "brand": brand,
        "cudaComputeCapability": _semver(".".join(str(v) for v in device["cudaComputeCapability"])),
        "driverVersion": _semver(reading["driverVersion"]),
        "cudaDriverVersion": _semver(f"{cuda // 1000}.{cuda % 1000 // 10}"),
        "memory": f"{mib}Mi",
    }


def _uuid(prefix: str, *parts: str) -> str:
    return f"{prefix}-{uuid.uuid5(_UUID_NS, '/'.join(parts))}"


def _base_attributes(node: NodeSpec, minor: int) -> dict[str, dict[str, Any]]:
    """The attributes every device of one GPU publishes.

    The driver publishes ``resource.kubernetes.io/numaNode`` only where the kernel reports a NUMA
    node for the GPU's PCI device (``discoverNumaNode``): see ``NodeSpec.numa``.
    """
    m = node.model
    bus = m.buses[minor % len(m.buses)]
    attributes: dict[str, dict[str, Any]] = {
        "addressingMode": {"string": m.addressing_mode},
        "architecture": {"string": m.architecture},
        "brand": {"string": m.brand},
        "cudaComputeCapability": {"version": m.cuda_compute_capability},
        "cudaDriverVersion": {"version": m.cuda_driver_version},
        "driverVersion": {"version": m.driver_version},
        "productName": {"string": m.product_name},
        "resource.kubernetes.io/pciBusID": {"string": f"{node.ordinal:04x}:{bus:02x}:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci{node.ordinal:04x}:{bus & 0xF0:02x}"},
    }
    if node.numa:
        attributes["resource.kubernetes.io/numaNode"] = {"int": 0 if minor < max(node.gpus // 2, 1) else 1}
    return attributes


def _full_gpu(node: NodeSpec, minor: int) -> dict[str, Any]:
    attrs = _base_attributes(node, minor)
    attrs["type"] = {"string": "gpu"}
    attrs["uuid"] = {"string": _uuid("GPU", node.name, str(minor))}
    return {"name": f"gpu-{minor}", "attributes": attrs, "capacity": {"memory": {"value": node.model.memory}}}


def _mig_devices(node: NodeSpec, minor: int) -> list[dict[str, Any]]:
    parent = _uuid("GPU", node.name, str(minor))
    devices = []
    for profile_name, start in node.mig_layout:
        p = node.model.mig_profiles[profile_name]
        attrs = _base_attributes(node, minor)
        attrs["parentUUID"] = {"string": parent}
        attrs["profile"] = {"string": p.name}
        attrs["type"] = {"string": "mig"}
        attrs["uuid"] = {"string": _uuid("MIG", node.name, str(minor), p.name, str(start))}
        capacity = {
            "copyEngines": {"value": str(p.copy_engines)},
            "decoders": {"value": str(p.decoders)},
            "encoders": {"value": str(p.encoders)},
            "jpegEngines": {"value": str(p.jpeg_engines)},
            "memory": {"value": p.memory},
            "multiprocessors": {"value": str(p.multiprocessors)},
            "ofaEngines": {"value": str(p.ofa_engines)},
        }
        for i in range(start, start + p.slices):
            capacity[f"memorySlice{i}"] = {"value": "1"}
        compact = p.name.replace(".", "")
        devices.append(
            {
                "name": f"gpu-{minor}-mig-{compact}-{p.gi_id}-{start}",
                "attributes": attrs,
                "capacity": dict(sorted(capacity.items())),
            }
        )
    return devices


_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def _bytes(text: str) -> int:
    for suffix, exponent in _BINARY:
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) << exponent
    return int(text)


def _binary_si(number: int) -> str:
    """``resource.NewQuantity(n, BinarySI)`` as the API server prints it: ``81152Mi``, ``80Gi``, ``7``."""
    for suffix, exponent in _BINARY:
        if number and number % (1 << exponent) == 0:
            return f"{number >> exponent}{suffix}"
    return str(number)


def _profile_capacity(p: MigProfile) -> dict[str, str]:
    """``CommonCapacitiesMig``: the GPU-instance profile's engines and memory (no memory slices)."""
    return {
        "copyEngines": str(p.copy_engines),
        "decoders": str(p.decoders),
        "encoders": str(p.encoders),
        "jpegEngines": str(p.jpeg_engines),
        "memory": p.memory,
        "multiprocessors": str(p.multiprocessors),
        "ofaEngines": str(p.ofa_engines),
    }


def _counter_name(capacity: str) -> str:
    """``camelToDNSName``: ``copyEngines`` → ``copy-engines``."""
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in capacity)


def _max_capacity(model: GpuModel) -> dict[str, str]:
    """Per capacity, the largest value any MIG profile has (``inspectMigProfilesAndPlacements``)."""
    out: dict[str, str] = {}
    for profile in model.mig_profiles.values():
        for name, value in _profile_capacity(profile).items():
            if name not in out or _bytes(value) > _bytes(out[name]):
                out[name] = value
    return out


def memory_slices(model: GpuModel) -> int:
    """Memory slices of one GPU: the largest placement's size."""
    return max((p.slices for p in model.mig_profiles.values()), default=0)


def counter_set_name(minor: int) -> str:
    return f"gpu-{minor}-counter-set"


def _counters(capacity: dict[str, str], start: int, size: int) -> dict[str, dict[str, str]]:
    counters = {_counter_name(name): {"value": value} for name, value in capacity.items()}
    for i in range(start, start + size):
        counters[f"memory-slice-{i}"] = {"value": "1"}
    return counters


def counter_set(model: GpuModel, minor: int) -> dict[str, Any]:
    """``PartSharedCounterSets``: one counter set per GPU, every capacity dimension plus each memory slice."""
    return {"name": counter_set_name(minor), "counters": _counters(_max_capacity(model), 0, memory_slices(model))}


def _dynamic_devices(node: NodeSpec, minor: int) -> list[dict[str, Any]]:
    """Every placement of every profile as a partitionable device, and the whole GPU (not on Ampere).

    Ampere cannot switch MIG mode without a GPU reset, so the driver needs MIG mode on before it
    starts and then announces no whole GPU there; Hopper switches on demand and announces both.
    """
    m = node.model
    top = _max_capacity(m)
    out: list[dict[str, Any]] = []
    if m.architecture != "Ampere":
        gpu = _full_gpu(node, minor)
        gpu["capacity"] = {name: {"value": value} for name, value in sorted(top.items())}
        everything = _counters(top, 0, memory_slices(m))
        gpu["consumesCounters"] = [{"counterSet": counter_set_name(minor), "counters": everything}]
        out.append(gpu)
    parent = _uuid("GPU", node.name, str(minor))
    for p in m.mig_profiles.values():
        for start in p.starts:
            attrs = _base_attributes(node, minor)
            attrs["parentUUID"] = {"string": parent}
            attrs["profile"] = {"string": p.name}
            attrs["type"] = {"string": "mig"}
            capacity = _profile_capacity(p)
            compact = p.name.replace(".", "").replace("+", "-")
            out.append(
                {
                    "name": f"gpu-{minor}-mig-{compact}-{p.gi_id}-{start}",
                    "attributes": attrs,
                    "capacity": {name: {"value": value} for name, value in sorted(capacity.items())},
                    "consumesCounters": [
                        {"counterSet": counter_set_name(minor), "counters": _counters(capacity, start, p.slices)}
                    ],
                }
            )
    return sorted(out, key=lambda d: str(d["name"]))


def _share(device: dict[str, Any], mode: str) -> dict[str, Any]:
    """``applyConsumableShares``: the device may be allocated to several claims; memory becomes consumable."""
    device["allowMultipleAllocations"] = True
    capacity = device.setdefault("capacity", {})
    if "memory" not in capacity:
        return device
    most = _binary_si(_bytes(capacity["memory"]["value"]) >> 20 << 20)
    if mode == "memory":
        policy = {"default": most, "validRange": {"min": "1Mi", "max": most, "step": "1Mi"}}
    else:
        policy = {"default": "0", "validRange": {"min": "0", "max": most, "step": "1Mi"}}
    capacity["memory"] = {"value": most, "requestPolicy": policy}
    if mode not in ("memory", "unlimited"):
        capacity["shares"] = {
            "value": mode,
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": mode, "step": "1"}},
        }
    device["capacity"] = dict(sorted(capacity.items()))
    return device


def gpu_devices(node: NodeSpec, minor: int) -> list[dict[str, Any]]:
    """The devices of one GPU, as the driver's publishing path for the node's settings announces them."""
    if node.mig_strategy == "dynamic" and node.model.mig_profiles:
        out = _dynamic_devices(node, minor)
    elif minor < node.mig_gpus:
        out = _mig_devices(node, minor)
    else:
        out = [_full_gpu(node, minor)]
    if node.consumable_shares:
        out = [_share(d, node.consumable_shares) for d in out]
    return out


def devices(node: NodeSpec) -> list[dict[str, Any]]:
    """All devices the driver announces for a node: MIG devices of MIG GPUs, whole GPUs otherwise."""
    out: list[dict[str, Any]] = []
    for minor in range(node.gpus):
        out.extend(gpu_devices(node, minor))
    return out


def slice_specs(node: NodeSpec) -> list[dict[str, Any]]:
    """The node's pool as the driver lays it out: ``[{devices}]`` or ``[{sharedCounters}, {devices}...]``.

    Without DynamicMIG every device sits in one slice. With it (Kubernetes >= 1.35, the driver's
    ``generateSplitResourceSlices``) slice 0 carries the counter sets of every GPU and each GPU's
    devices follow in a slice of their own, so no slice exceeds the API's 64 devices per slice
    with counters (``ResourceSliceMaxDevicesWithAdvancedFeatures``) nor 8 counter sets.
    """
    if node.mig_strategy != "dynamic" or not node.model.mig_profiles:
        return [{"devices": devices(node)}]
    counter_sets = [counter_set(node.model, minor) for minor in range(node.gpus)]
    return [{"sharedCounters": counter_sets}, *({"devices": gpu_devices(node, minor)} for minor in range(node.gpus))]


def by_product_name() -> dict[str, GpuModel]:
    """The table keyed by the ``productName`` the driver publishes (what a GPUNodePool declares)."""
    return {m.product_name: m for m in MODELS.values()}


def _placed(
    names: list[str], known: dict[str, MigProfile], *, used: frozenset[int], after: int
) -> list[tuple[str, int]] | None:
    """``names`` placed on the free slices (a depth-first search; instances of one profile in rising starts,
    ``after`` the previous one's), or None when they do not all fit."""
    if not names:
        return []
    profile = known[names[0]]
    for start in profile.starts:
        cells = frozenset(range(start, start + profile.slices))
        if start <= after or used & cells:
            continue
        same = len(names) > 1 and names[1] == names[0]
        rest = _placed(names[1:], known, used=used | cells, after=start if same else -1)
        if rest is not None:
            return [(names[0], start), *rest]
    return None


def mig_layout(model: GpuModel, profiles: dict[str, int]) -> tuple[tuple[tuple[str, int], ...], list[str]]:
    """Place ``profiles`` (MIG devices per GPU) on one GPU as mig-parted would: largest first, lowest start,
    moving an earlier one to a later start where the next would not fit otherwise (NVIDIA's quickstart mix
    of 1g x2, 2g and 3g on an A100 fits only with the 3g at slice 4).

    Returns the layout and the profile instances that do not fit (unknown to the model or out of slices).
    """
    known = model.mig_profiles
    wanted = [
        n
        for n in sorted(profiles, key=lambda n: (-known[n].slices if n in known else 0, n))
        for _ in range(profiles[n])
    ]
    placed = _placed([n for n in wanted if n in known], known, used=frozenset(), after=-1)
    if placed is not None:
        return tuple(sorted(placed, key=lambda item: item[1])), [n for n in wanted if n not in known]
    used: set[int] = set()
    layout: list[tuple[str, int]] = []
    left: list[str] = []
    known = model.mig_profiles
    for name in sorted(profiles, key=lambda n: (-known[n].slices if n in known else 0, n)):
        for _ in range(profiles[name]):
            profile = known.get(name)
            start = next(
                (
                    s
                    for s in (profile.starts if profile else ())
                    if profile is not None and not used & set(range(s, s + profile.slices))
                ),
                None,
            )
            if profile is None or start is None:
                left.append(name)
                continue
            used |= set(range(start, start + profile.slices))
            layout.append((name, start))
    return tuple(sorted(layout, key=lambda item: item[1])), left


__all__ = [
    "CONSUMABLE_SHARES",
    "DRIVER",
    "MIG_LAYOUT",
    "MIG_STRATEGIES",
    "MODELS",
    "GpuModel",
    "MigProfile",
    "NodeSpec",
    "by_product_name",
    "counter_set",
    "counter_set_name",
    "devices",
    "gpu_devices",
    "memory_slices",
    "mig_layout",
    "model_from_nvml",
    "slice_specs",
]
