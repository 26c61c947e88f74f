"""Simulated NVIDIA GPUs: Nodes and ResourceSlices exactly as the NVIDIA DRA driver publishes them.

The sandbox has no GPUs and no kubelet, so nobody would publish devices. fleet
does what the NVIDIA DRA kubelet plugin (``gpu.nvidia.com``) does on a real
node: one pool per node named after it, all devices in one slice, the driver's
own attributes unqualified (``productName``) and the standard ones fully
qualified (``resource.kubernetes.io/pciBusID``), versions semver-normalised,
memory as a binary-SI quantity, MIG devices named
``gpu-<minor>-mig-<profile>-<giProfileId>-<start>`` with ``memorySlice<i>``
capacities. Values are those of ``tests/data/resourceslices`` and, for the
H200, of an NVML reading of a real H200 (``model_from_nvml`` derives them, a
test checks the constants against that reading).

Identity differs per device *and* node: UUIDs are name-based (uuid5 of node and
device) and the PCI domain is the node's ordinal, so two H100 nodes never share
a bus id, while reruns produce the same objects (idempotent ``up``).

Everything here is pure: it builds dicts; ``fleet.sandbox.clusters`` applies them.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

DRIVER = "gpu.nvidia.com"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
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


def _mig(name: str, gi: int, slices: int, sm: int, ce: int, dec: int, jpeg: int, ofa: int, mem: str) -> MigProfile:
    return MigProfile(name, gi, slices, sm, ce, dec, 0, jpeg, ofa, mem)


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
                _mig("2g.20gb", 14, 2, 32, 2, 2, 2, 0, "20096Mi"),
                _mig("3g.40gb", 9, 4, 60, 3, 3, 3, 0, "40448Mi"),
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
    """One simulated GPU node: which model, how many GPUs, which of them are in MIG mode."""

    name: str
    ordinal: int
    pool: str
    model: GpuModel
    gpus: int
    mig_gpus: int = 0


def _semver(text: str) -> str:
    """The driver's normalisation: ``580.95.05`` → ``580.95.5``, ``9.0`` → ``9.0.0``."""
    parts = [str(int(p)) for p in text.split(".")]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts[:3])


def model_from_nvml(reading: dict[str, Any], *, key: str = "gpu") -> dict[str, str]:
    """The model-level attribute values the driver derives from an NVML reading (as in fixtures/nvml)."""
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
    for profile_name, start in MIG_LAYOUT:
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


def gfd_product(product_name: str) -> str:
    """GPU feature discovery's label form of a product name (spaces to dashes)."""
    return product_name.replace(" ", "-")


def node_manifest(node: NodeSpec) -> dict[str, Any]:
    """A KWOK-managed Node that looks like a GPU node after NFD and GFD labelled it."""
    m = node.model
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": m.instance_type,
        "type": "kwok",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gfd_product(m.product_name),
        "nvidia.com/gpu.count": str(node.gpus),
        "nvidia.com/mig.capable": "true" if m.mig_profiles else "false",
        "sandbox.fleet.gpufleet.dev/pool": node.pool,
    }
    capacity = {"cpu": "128", "memory": m.node_memory, "pods": "110", "ephemeral-storage": "4Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(GPU_TAINT)]},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def slice_manifest(node: NodeSpec, *, node_uid: str) -> dict[str, Any]:
    """The node's ResourceSlice: one pool named after the node, every device in one slice."""
    prefix = f"00-{DRIVER}-{node.name}-"
    suffix = hashlib.sha256(node.name.encode()).hexdigest()[:5]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": prefix + suffix,
            "generateName": prefix,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node_uid, "controller": True}
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices(node),
        },
    }


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the GPU Operator installs for the DRA driver (state-dra-driver manifests)."""
    out = []
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"), ("vfio.gpu.nvidia.com", "vfio")):
        expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]},
            }
        )
    return out


__all__ = [
    "DRIVER",
    "GPU_TAINT",
    "MIG_LAYOUT",
    "MODELS",
    "GpuModel",
    "MigProfile",
    "NodeSpec",
    "device_classes",
    "devices",
    "gfd_product",
    "model_from_nvml",
    "node_manifest",
    "slice_manifest",
]
