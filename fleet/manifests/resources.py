"""``resource.k8s.io/v1`` kinds a fleet repository may hold, in their API shape.

DeviceClass, ResourceClaimTemplate and ResourceClaim are modelled field by
field after ``k8s.io/api/resource/v1/types.go`` (v0.37), so a template copied
from the DRA guide validates here exactly when the API server would take it,
and a typo is caught in CI rather than at ``kubectl apply``. Limits that the
API enforces by count (≤32 requests, ≤32 selectors, ≤8 subrequests) are
enforced here; semantic rules that need context (device class allowed,
quota, CEL length and compile) live in ``fleet.policy`` so they come back as
findings with rule ids. ``status`` is refused: a repository declares intent.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from fleet.manifests.bases import Model, ObjectMeta

API_VERSION = "resource.k8s.io/v1"


class CELDeviceSelector(Model):
    expression: str = Field(min_length=1)
    """A CEL expression over ``device`` that must evaluate to true."""


class DeviceSelector(Model):
    cel: CELDeviceSelector


class DeviceToleration(Model):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["None", "NoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class CapacityRequirements(Model):
    requests: dict[str, str | int] = Field(default_factory=dict)
    """Quantities per fully-qualified capacity name (DRAConsumableCapacity)."""


class DeviceDerivedAttribute(Model):
    """A virtual attribute a CEL expression computes per candidate device, for constraints only
    (DRADerivedAttributes, alpha in 1.37)."""

    name: str = Field(pattern=r"^[^/]+/[^/]+$")
    """Fully qualified, as constraints name it (``derived/numaNode``)."""
    expression: str = Field(min_length=1)


class BaseDeviceRequest(Model):
    device_class_name: str = Field(min_length=1)
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=32)
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: int | None = Field(default=None, ge=1)
    tolerations: list[DeviceToleration] = Field(default_factory=list, max_length=16)
    capacity: CapacityRequirements | None = None
    derived_attributes: list[DeviceDerivedAttribute] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _count_only_with_exact_count(self) -> BaseDeviceRequest:
        if self.allocation_mode == "All" and self.count is not None:
            raise ValueError("count must not be set when allocationMode is All")
        return self

    @property
    def devices(self) -> int | None:
        """How many devices this request takes; None for ``All``."""
        return None if self.allocation_mode == "All" else (self.count or 1)


class ExactDeviceRequest(BaseDeviceRequest):
    admin_access: bool | None = None


class DeviceSubRequest(BaseDeviceRequest):
    name: str = Field(min_length=1)


class DeviceRequest(Model):
    name: str = Field(min_length=1)
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] | None = Field(default=None, min_length=1, max_length=8)

    @model_validator(mode="after")
    def _one_of(self) -> DeviceRequest:
        if (self.exactly is None) == (self.first_available is None):
            raise ValueError("exactly one of exactly or firstAvailable must be set")
        return self

    @property
    def alternatives(self) -> list[BaseDeviceRequest]:
        """The request itself, or its firstAvailable subrequests in order."""
        return [self.exactly] if self.exactly is not None else list(self.first_available or [])


class DeviceConstraint(Model):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = Field(default=None, pattern=r"^[^/]+/[^/]+$")
    distinct_attribute: str | None = Field(default=None, pattern=r"^[^/]+/[^/]+$")

    @model_validator(mode="after")
    def _one_of(self) -> DeviceConstraint:
        if (self.match_attribute is None) == (self.distinct_attribute is None):
            raise ValueError("exactly one of matchAttribute or distinctAttribute must be set")
        return self


class OpaqueDeviceConfiguration(Model):
    driver: str = Field(min_length=1)
    parameters: dict[str, Any]
    """Driver-specific configuration, passed through unchecked (e.g. GpuConfig)."""


class DeviceClaimConfiguration(Model):
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration


class DeviceClaim(Model):
    requests: list[DeviceRequest] = Field(default_factory=list, max_length=32)
    constraints: list[DeviceConstraint] = Field(default_factory=list, max_length=32)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _references_resolve(self) -> DeviceClaim:
        names = [r.name for r in self.requests]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"request names must be unique: {', '.join(duplicated)}")
        known = set(names) | {f"{r.name}/{s.name}" for r in self.requests for s in r.first_available or []}
        for field, entries in (("constraints", self.constraints), ("config", self.config)):
            for entry in entries:
                unknown = [n for n in entry.requests if n not in known]
                if unknown:
                    raise ValueError(f"{field} names unknown request {unknown[0]!r} (requests: {', '.join(names)})")
        constrained = {c.match_attribute or c.distinct_attribute for c in self.constraints}
        for request in self.requests:
            for alternative in request.alternatives:
                unused = [d.name for d in alternative.derived_attributes if d.name not in constrained]
                if unused:
                    raise ValueError(
                        f"derived attribute {unused[0]!r} of request {request.name!r} is used by no constraint "
                        "(matchAttribute or distinctAttribute)"
                    )
        return self


class ResourceClaimSpec(Model):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class TemplateMeta(Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ResourceClaimTemplateSpec(Model):
    metadata: TemplateMeta | None = None
    spec: ResourceClaimSpec


class ResourceClaimTemplate(Model):
    """A template the resourceclaim controller turns into one claim per pod."""

    api_version: Literal["resource.k8s.io/v1"]
    kind: Literal["ResourceClaimTemplate"]
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec


class ResourceClaim(Model):
    """A claim shared by the pods that reference it by name."""

    api_version: Literal["resource.k8s.io/v1"]
    kind: Literal["ResourceClaim"]
    metadata: ObjectMeta
    spec: ResourceClaimSpec


class DeviceClassConfiguration(Model):
    opaque: OpaqueDeviceConfiguration


class DeviceClassSpec(Model):
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=32)
    config: list[DeviceClassConfiguration] = Field(default_factory=list, max_length=32)
    extended_resource_name: str | None = None


class DeviceClass(Model):
    """A cluster-scoped class of devices (platform team only, ``deviceclasses/``)."""

    api_version: Literal["resource.k8s.io/v1"]
    kind: Literal["DeviceClass"]
    metadata: ObjectMeta
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


__all__ = [
    "API_VERSION",
    "BaseDeviceRequest",
    "CELDeviceSelector",
    "DeviceClaim",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceDerivedAttribute",
    "DeviceRequest",
    "DeviceSelector",
    "DeviceSubRequest",
    "ExactDeviceRequest",
    "ResourceClaim",
    "ResourceClaimSpec",
    "ResourceClaimTemplate",
]
