"""Simulated NVIDIA GPU nodes: Nodes and ResourceSlices around the devices of the GPU model table.

The sandbox has no GPUs and no kubelet, so nobody would publish devices. fleet
does what the NVIDIA DRA kubelet plugin (``gpu.nvidia.com``) does on a real
node: one pool per node named after it, all devices in one slice; and, for a
health event its NVML monitor reports (an XID error, a lost GPU), the device
taints it republishes (``health_taint``, ``republished``; kubernetes-sigs/
dra-driver-nvidia-gpu ``cmd/gpu-kubelet-plugin/device_health.go``). The devices
themselves come from the pure GPU model table, ``fleet.inventory.models``, which
``fleetctl validate`` also uses to build a cluster's devices from its
GPUNodePools — one table, so the sandbox and validate agree. The names are
re-exported here for the sandbox's callers.

Everything here is pure: it builds dicts; ``fleet.sandbox.clusters`` applies them.
"""

from __future__ import annotations

import copy
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


TAINT_XID = f"{DRIVER}/xid"
TAINT_GPU_LOST = f"{DRIVER}/gpu-lost"
TAINT_UNMONITORED = f"{DRIVER}/unmonitored"
HEALTH_EVENTS = {"xid": TAINT_XID, "gpu-lost": TAINT_GPU_LOST, "unmonitored": TAINT_UNMONITORED}
"""The driver's health events (NVMLDeviceHealthCheck) and the taint key each one publishes."""
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs the driver counts as application errors (``xidsToSkip``): their taint has effect None."""


def health_taint(event: str, *, xid: int | None = None) -> dict[str, str]:
    """The device taint the NVIDIA DRA driver publishes for a health event (``healthEventToTaint``).

    ``xid``: ``gpu.nvidia.com/xid`` with the XID as value, NoSchedule for a fatal XID and None
    for an application error (a scheduler preview, nothing kept away); ``gpu-lost``: NoSchedule,
    on every device of the node; ``unmonitored`` (NVML cannot watch the GPU): None, on every
    device of the GPU. The driver never sets NoExecute: evicting is an administrator's
    DeviceTaintRule.
    """
    if event == "xid":
        if xid is None or xid < 0:
            raise ValueError("an xid event needs the XID, a number")
        effect = "None" if xid in APPLICATION_XIDS else "NoSchedule"
        return {"key": TAINT_XID, "value": str(xid), "effect": effect}
    if event == "gpu-lost":
        return {"key": TAINT_GPU_LOST, "effect": "NoSchedule"}
    if event == "unmonitored":
        return {"key": TAINT_UNMONITORED, "effect": "None"}
    raise ValueError(f"unknown health event {event!r}: one of {', '.join(HEALTH_EVENTS)}")


def health_devices(names: list[str], *, event: str, device: str | None) -> set[str]:
    """The devices one event taints: the device (xid), the GPU's devices (unmonitored), the node's (gpu-lost).

    A GPU's devices are ``gpu-<minor>`` and its MIG devices and placements, ``gpu-<minor>-mig-...``.
    """
    if event == "gpu-lost" or device is None:
        return set(names)
    if event == "unmonitored":
        gpu = "-".join(device.split("-")[:2])
        return {n for n in names if n == gpu or n.startswith(f"{gpu}-")}
    return {device} & set(names)


def republished(
    slices: list[dict[str, Any]], *, devices: set[str], taint: dict[str, str] | None, key: str
) -> list[dict[str, Any]]:
    """The node's slices the driver updates for a health event: ``taint`` on ``devices`` (or ``key``
    removed from them when ``taint`` is None), as server-side apply bodies.

    The driver keeps one taint per key (a newer XID replaces the older one's value) and
    republishes its whole pool through the kubelet plugin's ResourceSlice controller
    (k8s.io/dynamic-resource-allocation ``resourceslice``), which updates only the slices that
    changed and keeps the pool's generation when that is at most one slice, and otherwise
    bumps it on every slice of the pool. The API server bumps each updated slice's
    ``metadata.generation``. A slice's ``timeAdded`` is the server's.
    """
    changed: list[int] = []
    bodies: list[dict[str, Any]] = []
    for index, item in enumerate(slices):
        spec = copy.deepcopy(item.get("spec") or {})
        touched = False
        for published in spec.get("devices") or ():
            if published.get("name") not in devices:
                continue
            before = [t for t in published.get("taints") or ()]
            taints = [t for t in before if t.get("key") != key]
            if taint is not None:
                taints.append(dict(taint))
            kept = [{k: v for k, v in t.items() if k != "timeAdded"} for t in taints]
            if kept != [{k: v for k, v in t.items() if k != "timeAdded"} for t in before]:
                touched = True
            if kept:
                published["taints"] = kept
            else:
                published.pop("taints", None)
        meta = item.get("metadata") or {}
        bodies.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {k: meta[k] for k in ("name", "ownerReferences") if k in meta},
                "spec": spec,
            }
        )
        if touched:
            changed.append(index)
    if len(changed) > 1:
        for body in bodies:
            body["spec"]["pool"] = {**body["spec"]["pool"], "generation": body["spec"]["pool"]["generation"] + 1}
        return bodies
    return [bodies[i] for i in changed]


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
    "APPLICATION_XIDS",
    "CONSUMABLE_SHARES",
    "DRIVER",
    "EXTENDED_RESOURCE",
    "GPU_TAINT",
    "HEALTH_EVENTS",
    "MIG_LAYOUT",
    "MIG_STRATEGIES",
    "MODELS",
    "SYSTEM_INSTANCE_TYPE",
    "TAINT_GPU_LOST",
    "TAINT_UNMONITORED",
    "TAINT_XID",
    "GpuModel",
    "MigProfile",
    "NodeSpec",
    "cpu_node_manifest",
    "device_classes",
    "devices",
    "gfd_product",
    "health_devices",
    "health_taint",
    "model_from_nvml",
    "node_manifest",
    "republished",
    "slice_manifest",
    "slice_manifests",
]
