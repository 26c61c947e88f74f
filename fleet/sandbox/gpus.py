"""Simulated NVIDIA GPU nodes: Nodes and ResourceSlices around the devices of the GPU model table.

The sandbox has no GPUs and no kubelet, so nobody would publish devices. fleet
does what the NVIDIA DRA kubelet plugin (``gpu.nvidia.com``) does on a real
node: one pool per node named after it, all devices in one slice. The devices
themselves come from the pure GPU model table, ``fleet.inventory.models``, which
``fleetctl validate`` also uses to build a cluster's devices from its
GPUNodePools — one table, so the sandbox and validate agree. The names are
re-exported here for the sandbox's callers.

Everything here is pure: it builds dicts; ``fleet.sandbox.clusters`` applies them.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fleet.inventory import models
from fleet.inventory.models import (
    CONSUMABLE_SHARES,
    DRIVER,
    MIG_LAYOUT,
    MIG_STRATEGIES,
    MODELS,
    GpuModel,
    MigProfile,
    NodeSpec,
    devices,
    model_from_nvml,
)

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


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


def slice_manifests(node: NodeSpec, *, node_uid: str) -> list[dict[str, Any]]:
    """The node's pool: one pool named after the node, laid out in slices as the driver publishes it.

    Names follow the kubelet plugin's ResourceSlice controller (k8s.io/dynamic-resource-allocation,
    ``encodeIndex``): ``<index>-gpu.nvidia.com-<node>-`` plus a suffix, the index in hex padded to
    at least five digits (``00000-gpu.nvidia.com-gpu-real-01-nzb75`` on the real H100 node of
    tests/data/real-gpu), which is also the order the scheduler reads a pool's slices in.
    """
    specs = models.slice_specs(node)
    width = max(5, len(f"{len(specs) - 1:x}"))
    out = []
    for index, body in enumerate(specs):
        prefix = f"{index:0{width}x}-{DRIVER}-{node.name}-"
        suffix = hashlib.sha256(f"{node.name}/{index}".encode()).hexdigest()[:5] if index else _suffix(node)
        out.append(
            {
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
                    "pool": {"name": node.name, "generation": 1, "resourceSliceCount": len(specs)},
                    **body,
                },
            }
        )
    return out


def _suffix(node: NodeSpec) -> str:
    return hashlib.sha256(node.name.encode()).hexdigest()[:5]


SYSTEM_INSTANCE_TYPE = "m7i.4xlarge"
"""What a CPU node says it is: a general-purpose instance, no accelerator."""


def cpu_node_manifest(*, name: str, pool: str) -> dict[str, Any]:
    """A KWOK-managed Node without GPUs and without taints: where a chart's controllers and hook Jobs run.

    It carries none of the labels NFD and GPU feature discovery put on a GPU node and
    publishes no ResourceSlice, so preflight, inventory and the pools' gates pass it by.
    """
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": SYSTEM_INSTANCE_TYPE,
        "node-role.kubernetes.io/system": "",
        "type": "kwok",
        "sandbox.fleet.gpufleet.dev/pool": pool,
    }
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "500Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def slice_manifest(node: NodeSpec, *, node_uid: str) -> dict[str, Any]:
    """The node's ResourceSlice when the driver publishes one slice (every node without DynamicMIG)."""
    [only] = slice_manifests(node, node_uid=node_uid)
    return only


EXTENDED_RESOURCE = "nvidia.com/gpu"
"""The ``extendedResourceName`` of ``gpu.nvidia.com``: pods asking ``nvidia.com/gpu`` get its devices."""


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the NVIDIA DRA driver installs: the GPU Operator's state-dra-driver set, with
    ``gpu.nvidia.com`` carrying ``extendedResourceName: nvidia.com/gpu`` as the driver's own chart
    writes it on ``resource.k8s.io/v1`` (v25.12.0 on; DRAExtendedResource is on by default from 1.36,
    and the sandbox turns it on in 1.34 and 1.35). The simulated Nodes do not advertise ``nvidia.com/gpu``
    allocatable, as DRA's extended resources need."""
    out = []
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"), ("vfio.gpu.nvidia.com", "vfio")):
        expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if kind == "gpu":
            spec["extendedResourceName"] = EXTENDED_RESOURCE
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return out


__all__ = [
    "CONSUMABLE_SHARES",
    "DRIVER",
    "EXTENDED_RESOURCE",
    "GPU_TAINT",
    "MIG_LAYOUT",
    "MIG_STRATEGIES",
    "MODELS",
    "SYSTEM_INSTANCE_TYPE",
    "GpuModel",
    "MigProfile",
    "NodeSpec",
    "cpu_node_manifest",
    "device_classes",
    "devices",
    "gfd_product",
    "model_from_nvml",
    "node_manifest",
    "slice_manifest",
    "slice_manifests",
]
