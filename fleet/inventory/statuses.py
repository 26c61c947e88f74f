"""What drivers and the kubelet say about allocated devices, read from the claims and pods that hold them.

Two reports reach the API, both GA or beta in 1.37, both written by someone other than fleet:

* ``ResourceClaim.status.devices`` (DRAResourceClaimDeviceStatus, GA in 1.37): per allocated
  device (``driver/pool/device``, and ``shareID`` for a shared one), the driver's
  ``conditions`` (``metav1.Condition``), opaque ``data`` and ``networkData``
  (interface, IPs, hardware address). A condition whose status is not ``True`` (``Ready:
  False``) or whose type names a fault is what on-call wants to see.
* ``Pod.status.containerStatuses[].allocatedResourcesStatus`` (ResourceHealthStatus, KEP-4680,
  beta in 1.36 and 1.37): the kubelet's view of each device a container's claims hold, by
  ``claim:<pod claim name>[/<request>]`` (the claim's own name for one the scheduler made for
  extended resources, ``nvidia.com/gpu: 1``), each resource a ``resourceID`` with ``health``
  ``Healthy``, ``Unhealthy`` or ``Unknown`` (and a ``message`` with ResourceHealthStatusMessage).
  The kubelet names a DRA device by its first CDI device id when the driver gave one
  (the NVIDIA driver does), else ``driver/pool/device``; :func:`pod_health` maps it back to the
  allocated device through the claim's allocation results for that request.

Pure: plain objects as the API returns them in, plain data out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.inventory import leftovers

Obj = Mapping[str, Any]
HEALTHY = "Healthy"


@dataclasses.dataclass(frozen=True)
class DeviceStatus:
    """A driver's report on one allocated device (``status.devices`` of the claim holding it)."""

    device: str
    """``driver/pool/device``."""
    claim: str
    """``namespace/name``."""
    conditions: tuple[tuple[str, str, str, str], ...] = ()
    """(type, status, reason, message) of each condition, as the driver wrote them."""
    network: str = ""
    """``interfaceName ips hardwareAddress`` when the driver reports network data."""
    data: bool = False
    """The driver attached opaque ``data``."""

    def texts(self) -> list[str]:
        """One line per condition (and one for network data): ``Ready=False (XidError: ...)``."""
        out = []
        for kind, status, reason, message in self.conditions:
            why = ": ".join(part for part in (reason, message) if part)
            out.append(f"{kind}={status}" + (f" ({why})" if why else ""))
        if self.network:
            out.append(f"network {self.network}")
        return out

    @property
    def troubled(self) -> bool:
        """A condition that is not ``True`` (``Ready=False``, ``Healthy=Unknown``)."""
        return any(status != "True" for _, status, _, _ in self.conditions)


@dataclasses.dataclass(frozen=True)
class Health:
    """The kubelet's health of one device a container uses."""

    container: str
    claim: str
    """``namespace/name`` of the ResourceClaim object ("" when the pod does not say)."""
    request: str
    resource: str
    """The kubelet's ``resourceID`` (a CDI device id, or ``driver/pool/device``)."""
    device: str
    """``driver/pool/device`` it maps to ("" when the allocation does not tell)."""
    health: str
    message: str = ""

    def text(self) -> str:
        what = self.device or self.resource
        request = f" request {self.request}" if self.request else ""
        said = f": {self.message}" if self.message else ""
        return f"{what} is {self.health}{said} (claim {self.claim or '?'}{request}, container {self.container})"


def device_statuses(claims: Sequence[Obj]) -> dict[str, DeviceStatus]:
    """Device id (``driver/pool/device``) → what the driver reports in its claim's ``status.devices``."""
    out: dict[str, DeviceStatus] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        holder = f"{meta.get('namespace')}/{meta.get('name')}"
        for entry in (claim.get("status") or {}).get("devices") or ():
            device = f"{entry.get('driver')}/{entry.get('pool')}/{entry.get('device')}"
            conditions = tuple(
                (
                    str(c.get("type", "")),
                    str(c.get("status", "")),
                    str(c.get("reason") or ""),
                    str(c.get("message") or ""),
                )
                for c in entry.get("conditions") or ()
            )
            network = entry.get("networkData") or {}
            parts = [str(network.get("interfaceName") or ""), *(str(ip) for ip in network.get("ips") or ())]
            parts.append(str(network.get("hardwareAddress") or ""))
            out[device] = DeviceStatus(
                device=device,
                claim=holder,
                conditions=conditions,
                network=" ".join(p for p in parts if p),
                data=entry.get("data") is not None,
            )
    return out


@dataclasses.dataclass(frozen=True)
class Tainted:
    """A device tainted NoSchedule or NoExecute (``key=value:effect`` each): by its driver, in the
    driver's own domain (its health checks: ``gpu.nvidia.com/xid``), and by others (a DeviceTaintRule's
    taint merged into the slice, a maintenance's)."""

    device: str
    driver: tuple[str, ...]
    others: tuple[str, ...] = ()


def published_taints(slices: Sequence[Obj]) -> list[Tainted]:
    """Every published device with a taint that keeps requests without a toleration away."""
    out = []
    for item in slices:
        spec = item.get("spec") or {}
        pool, driver = (spec.get("pool") or {}).get("name"), str(spec.get("driver"))
        for device in spec.get("devices") or ():
            taints = [t for t in device.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")]
            if taints:
                own = tuple(leftovers.taint_text(t) for t in taints if str(t.get("key")).startswith(f"{driver}/"))
                others = tuple(
                    leftovers.taint_text(t) for t in taints if not str(t.get("key")).startswith(f"{driver}/")
                )
                out.append(Tainted(f"{driver}/{pool}/{device.get('name')}", own, others))
    return out


def _claim_objects(pod: Obj) -> dict[str, str]:
    """The pod's claim names (``spec.resourceClaims[].name``) → the ResourceClaim objects' names."""
    names: dict[str, str] = {}
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if entry.get("resourceClaimName"):
            names[str(entry.get("name"))] = str(entry["resourceClaimName"])
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if entry.get("resourceClaimName"):
            names[str(entry.get("name"))] = str(entry["resourceClaimName"])
    extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:  # a claim the scheduler made for extended resources goes by its own name
        names[str(extended)] = str(extended)
    return names


def _results(claim: Obj | None, request: str) -> list[str]:
    """``driver/pool/device`` of the claim's allocation results for ``request`` (its subrequests too)."""
    if claim is None:
        return []
    allocation = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    out = []
    for result in allocation.get("results") or ():
        name = str(result.get("request", ""))
        if not request or name == request or name.partition("/")[0] == request:
            out.append(f"{result.get('driver')}/{result.get('pool')}/{result.get('device')}")
    return out


def _device_of(resource: str, candidates: Sequence[str]) -> str:
    """The allocated device the kubelet's ``resourceID`` names: itself, one whose name ends it, or the only one."""
    if resource in candidates:
        return resource
    named = [c for c in candidates if resource.endswith(tuple(f"{sep}{c.rpartition('/')[2]}" for sep in "-/="))]
    if len(named) == 1:
        return named[0]
    return candidates[0] if len(candidates) == 1 else ""


def pod_health(pod: Obj, claims: Sequence[Obj]) -> list[Health]:
    """Every device the kubelet reports for the pod's containers, with the device it maps to."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    objects = _claim_objects(pod)
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in claims}
    status = pod.get("status") or {}
    out = []
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for container in status.get(key) or ():
            for entry in container.get("allocatedResourcesStatus") or ():
                name = str(entry.get("name", ""))
                if not name.startswith("claim:"):
                    continue  # a device plugin's resource
                pod_claim, _, request = name.removeprefix("claim:").partition("/")
                claim_name = objects.get(pod_claim, "")
                candidates = _results(by_name.get(claim_name), request)
                for resource in entry.get("resources") or ():
                    resource_id = str(resource.get("resourceID", ""))
                    out.append(
                        Health(
                            container=str(container.get("name", "")),
                            claim=f"{namespace}/{claim_name}" if claim_name else "",
                            request=request,
                            resource=resource_id,
                            device=_device_of(resource_id, candidates),
                            health=str(resource.get("health") or "Unknown"),
                            message=str(resource.get("message") or ""),
                        )
                    )
    return out


__all__ = ["HEALTHY", "DeviceStatus", "Health", "Tainted", "device_statuses", "pod_health", "published_taints"]
