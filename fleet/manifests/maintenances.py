"""GPU device maintenance (``kind: GPUMaintenance``): which devices leave service, why, and how far.

Taking a GPU out for repair on Kubernetes 1.36+ is a DeviceTaintRule walked through three effects
by hand (KEP-5055): ``None`` to read from its status which pods would be evicted, ``NoSchedule`` so
nothing new lands there, ``NoExecute`` once the jobs ended or were drained, and a deletion when the
repair is done. A GPUMaintenance file says what and why; fleet's engine walks the effects
(``fleet.engine.maintenances``) under the cluster's maintenance windows, disruption policy and
rollout waves, and removes the rules when the file is removed.

Where a file lives decides its clusters: ``maintenance/<name>.yaml`` (the fleet's folder) names them
in ``spec.clusters``; ``clusters/<cluster>/maintenance/<name>.yaml`` (a cluster's folder) is for that
cluster alone.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from fleet.manifests.bases import ClusterSelector, Model, ObjectMeta
from fleet.manifests.kinds import DisruptionPolicy

Effect = Literal["None", "NoSchedule", "NoExecute"]
EFFECTS: tuple[Effect, ...] = ("None", "NoSchedule", "NoExecute")
"""In the order a maintenance walks them."""

UUID = re.compile(r"^(GPU|MIG)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
"""How NVML and NVIDIA's DRA driver write a device's ``uuid`` attribute."""

_QUALIFIED = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
TaintKey = Annotated[str, StringConstraints(pattern=_QUALIFIED, max_length=316)]
DRIVER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A DRA driver's name, as a ResourceSlice's ``spec.driver``: a DNS subdomain of at most 63 characters."""


def _driver(value: str) -> str:
    if len(value) > 63 or not DRIVER.match(value):
        raise PydanticCustomError(
            "fleet_value",
            f"{value!r} is not a DRA driver's name",
            {"hint": "write it as the driver's ResourceSlices name it, e.g. gpu.nvidia.com "
             "(kubectl get resourceslices -o custom-columns=DRIVER:.spec.driver)"},
        )  # fmt: skip
    return value


Driver = Annotated[
    str, AfterValidator(_driver), WithJsonSchema({"type": "string", "pattern": DRIVER.pattern, "maxLength": 63})
]
GPU_DRIVER = "gpu.nvidia.com"
"""NVIDIA's GPU driver: the devices a maintenance takes unless ``devices.drivers`` names others."""


def _uuid(value: str) -> str:
    if not UUID.match(value):
        raise PydanticCustomError(
            "fleet_value",
            f"{value!r} is not a GPU or MIG uuid",
            {"hint": "copy it from `nvidia-smi -L` or `fleetctl inventory -o json` (GPU-xxxxxxxx-xxxx-…)"},
        )
    return value


Uuid = Annotated[str, AfterValidator(_uuid), WithJsonSchema({"type": "string", "pattern": UUID.pattern})]
"""Checked item by item, so that a bad one is refused at its own line (editors check the pattern)."""


def _time(value: object) -> object:
    """An RFC 3339 string as the datetime it says: the strict models take no string for a datetime."""
    if not isinstance(value, str):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError(
            "fleet_value",
            f"{value!r} is not an RFC 3339 time",
            {"hint": 'write it in RFC 3339 with a zone, quoted, e.g. "2026-12-12T06:00:00Z"'},
        ) from None


Time = Annotated[datetime, BeforeValidator(_time)]


class DeviceTargets(Model):
    """Which devices: ``pools`` and ``nodes`` say where (none: every GPU node of the cluster), the
    other fields which devices there; a device is taken when it passes every field given."""

    pools: list[str] = Field(default_factory=list)
    """GPUNodePool names: the devices of the nodes they select."""
    nodes: list[str] = Field(default_factory=list)
    """Node names."""
    devices: list[str] = Field(default_factory=list)
    """Device names as the driver publishes them (``gpu-0``, ``gpu-3-mig-1g10gb-0``)."""
    uuids: list[Uuid] = Field(default_factory=list)
    """The devices' ``uuid`` attribute (``GPU-…`` or ``MIG-…``, as ``nvidia-smi -L`` prints it)."""
    selector: str | None = None
    """A CEL expression over ``device``, as in a DeviceClass selector."""
    health_taints: list[TaintKey] = Field(default_factory=list)
    """Devices carrying a taint with one of these keys in their ResourceSlice (the driver's health
    taints, e.g. ``gpu.nvidia.com/xid``); ``["*"]``: any taint the driver put there."""
    drivers: list[Driver] = Field(default_factory=lambda: [GPU_DRIVER], min_length=1)
    """The DRA drivers whose devices it takes (default NVIDIA's GPU driver): the devices other drivers
    publish on the same nodes (NICs, NVIDIA's compute-domain channels) stay in service unless named."""

    @model_validator(mode="after")
    def _names_something(self) -> DeviceTargets:
        if not (self.pools or self.nodes or self.devices or self.uuids or self.selector or self.health_taints):
            raise PydanticCustomError(
                "fleet_value",
                "devices names nothing: a maintenance of every GPU of the cluster is not taken from an empty list",
                {"hint": "name pools, nodes, devices, uuids, a selector or healthTaints"},
            )
        if self.devices and not (self.pools or self.nodes):
            raise PydanticCustomError(
                "fleet_value",
                "devices names device names without pools or nodes: every node publishes gpu-0",
                {"hint": "add the nodes (or pools) the devices are on, or use uuids"},
            )
        return self


class GPUMaintenanceSpec(Model):
    clusters: ClusterSelector = Field(default_factory=ClusterSelector)
    """Which clusters (files in ``maintenance/``); a file in ``clusters/<cluster>/`` is for that cluster."""
    devices: DeviceTargets
    reason: str = Field(min_length=1, max_length=1024)
    """Why the devices leave service: shown in the diff, the status, the Events and the console."""
    deadline: Time | None = None
    """When waiting for the jobs on the devices ends (RFC 3339, e.g. 2026-12-12T06:00:00Z): then fleet
    goes to ``NoExecute``, which evicts what still runs. Without it, the disruption policy's deadline
    only marks the wait overdue."""
    effect: Effect = "NoExecute"
    """How far the maintenance goes: ``None`` (mark and preview only), ``NoSchedule`` (nothing new lands
    there; running jobs stay), ``NoExecute`` (the devices are emptied)."""
    direct: bool = False
    """Skip the ``None`` preview and write ``effect`` once the window and waves allow: for an emergency.
    A direct ``NoExecute`` needs a maintenance window on the cluster or an explicit ``disruption``."""
    disruption: DisruptionPolicy | None = None
    """What happens to the jobs on the devices (wait, drain, force); default: the Cluster's ``spec.disruption``."""
    allow_full_pool: bool = False
    """Allow taking every device of a pool that a team's claims can only be allocated from."""

    @field_validator("deadline")
    @classmethod
    def _zoned(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise PydanticCustomError(
                "fleet_value",
                "deadline has no time zone",
                {"hint": "write it in RFC 3339 with a zone, e.g. 2026-12-12T06:00:00Z"},
            )
        return value


class GPUMaintenance(Model):
    """GPU devices taken out of service through DeviceTaintRules (docs/maintenance.md)."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["GPUMaintenance"]
    metadata: ObjectMeta
    spec: GPUMaintenanceSpec


def folder_cluster(path: str) -> str | None:
    """``clusters/<cluster>/…`` → ``<cluster>`` (a cluster's folder); None elsewhere."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "clusters" else None


__all__ = [
    "EFFECTS",
    "GPU_DRIVER",
    "UUID",
    "DeviceTargets",
    "Driver",
    "Effect",
    "GPUMaintenance",
    "GPUMaintenanceSpec",
    "folder_cluster",
]
