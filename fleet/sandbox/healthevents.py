"""GPU health events played on the sandbox, published the way the NVIDIA DRA driver publishes them.

With its NVMLDeviceHealthCheck gate the driver watches NVML for XID errors and lost GPUs and
answers each event by tainting devices in its ResourceSlices (``fleet.sandbox.gpus.health_taint``:
``gpu.nvidia.com/xid=79:NoSchedule``, ``gpu-lost``, ``unmonitored``), since Kubernetes 1.37 a GA
API (DRADeviceTaints). The sandbox has no GPUs to fail, so :func:`report` plays the event: it
reads the node's slices, lets ``gpus.republished`` decide what the driver would write, and applies
that. Clearing a key plays the driver's start after the GPU was reset or replaced (the driver
itself has no recovery path yet). ``fleetctl sandbox gpu-health`` is the command.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.sandbox import clusters, gpus
from fleet.sandbox.errors import SandboxError


def _slices(sb: clusters.Sandbox, node: str) -> list[dict[str, Any]]:
    listed = sb.kubectl("get", "resourceslices", "--field-selector", f"spec.nodeName={node}", "-o", "json")
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


def report(
    sb: clusters.Sandbox, *, node: str, device: str | None, event: str, xid: int | None = None, clear: bool = False
) -> list[dict[str, Any]]:
    """Publish (or, with ``clear``, withdraw) ``event``'s taint on ``node``; the affected devices afterwards.

    ``device`` is required for ``xid`` and ``unmonitored`` (a GPU, or one of its MIG devices); ``gpu-lost``
    taints every device of the node, as the driver does when NVML reports a lost GPU.
    """
    items = _slices(sb, node)
    names = [str(d.get("name")) for i in items for d in (i.get("spec") or {}).get("devices") or ()]
    if device is None and event != "gpu-lost":
        raise SandboxError(f"a {event} event needs a device", where="fleetctl sandbox gpu-health", hint="name one")
    if device is not None and device not in names:
        raise SandboxError(
            f"node {node} publishes no device {device}",
            where=sb.server,
            hint=f"devices of {node}: {', '.join(sorted(names)[:20]) or 'none (is the node name right?)'}",
        )
    try:
        taint = None if clear else gpus.health_taint(event, xid=xid)
    except ValueError as err:
        raise SandboxError(str(err), where="fleetctl sandbox gpu-health", hint="e.g. --xid 79") from err
    targets = gpus.health_devices(names, event=event, device=device)
    bodies = gpus.republished(items, devices=targets, taint=taint, key=gpus.HEALTH_EVENTS[event])
    if bodies:
        clusters.apply(sb, bodies)
    after = _slices(sb, node) if bodies else items
    return [d for i in after for d in (i.get("spec") or {}).get("devices") or () if d.get("name") in targets]


__all__ = ["report"]
