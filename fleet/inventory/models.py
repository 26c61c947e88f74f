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
    m = node.model
    bus = m.buses[minor % len(m.buses)]
    return {
        "addressingMode": {"string": m.addressing_mode},
        "architecture": {"string": m.architecture},
        "brand": {"string": m.brand},
        "cudaComputeCapability": {"version": m.cuda_compute_capability},
        "cudaDriverVersion": {"version": m.cuda_driver_version},
        "driverVersion": {"version": m.driver_version},
        "productName": {"string": m.product_name},
        "resource.kubernetes.io/numaNode": {"int": 0 if minor < max(node.gpus // 2, 1) else 1},
        "resource.kubernetes.io/pciBusID": {"string": f"{node.ordinal:04x}:{bus:02x}:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci{node.ordinal:04x}:{bus & 0xF0:02x}"},
    }


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


def devices(node: NodeSpec) -> list[dict[str, Any]]:
    """All devices the driver announces for a node: MIG devices of MIG GPUs, whole GPUs otherwise."""
    out: list[dict[str, Any]] = []
    for minor in range(node.gpus):
        out.extend(_mig_devices(node, minor) if minor < node.mig_gpus else [_full_gpu(node, minor)])
    return out


def by_product_name() -> dict[str, GpuModel]:
    """The table keyed by the ``productName`` the driver publishes (what a GPUNodePool declares)."""
    return {m.product_name: m for m in MODELS.values()}


def mig_layout(model: GpuModel, profiles: dict[str, int]) -> tuple[tuple[tuple[str, int], ...], list[str]]:
    """Place ``profiles`` (MIG devices per GPU) on one GPU as mig-parted would: largest first, lowest start.

    Returns the layout and the profile instances that do not fit (unknown to the model or out of slices).
    """
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
    "DRIVER",
    "MIG_LAYOUT",
    "MODELS",
    "GpuModel",
    "MigProfile",
    "NodeSpec",
    "by_product_name",
    "devices",
    "mig_layout",
    "model_from_nvml",
]
