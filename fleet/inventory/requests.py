"""A claim's ``spec.devices`` read into the alternatives the allocator tries.

Kubernetes' allocator sees each request as an ordered list of alternatives:
one for ``exactly``, one per ``firstAvailable`` entry (tried in order). Every
alternative has a DeviceClass, its own selectors (ANDed with the class's),
an allocation mode and a count. Constraints name requests ("req" or
"req/sub"; none = all) and a fully qualified attribute; one on a derived attribute (a value
the scheduler computes per device from the request's ``derivedAttributes``, alpha in 1.37) is
not judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fleet import cel
from fleet.inventory import capacities, limits
from fleet.inventory.findings import Finding


@dataclasses.dataclass(frozen=True)
class Alternative:
    request: str
    name: str  # "gpu" for exactly, "gpu/h200" for a firstAvailable entry
    request_index: int
    subrequest_index: int | None
    device_class: str
    selectors: tuple[str, ...]
    all_devices: bool
    count: int
    tolerations: tuple[Mapping[str, Any], ...] = ()
    capacity: tuple[tuple[str, int], ...] = ()
    """``capacity.requests`` (DRAConsumableCapacity): (capacity name, nano-units), sorted."""


@dataclasses.dataclass(frozen=True)
class Constraint:
    index: int
    requests: tuple[str, ...]
    attribute: str  # fully qualified: domain/name
    distinct: bool

    def applies_to(self, alternative: Alternative) -> bool:
        return not self.requests or alternative.request in self.requests or alternative.name in self.requests


@dataclasses.dataclass(frozen=True)
class ClaimShape:
    requests: tuple[tuple[Alternative, ...], ...]
    constraints: tuple[Constraint, ...]


def _capacity(raw: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``capacity.requests`` in nano-units; raises cel.QuantityError on a malformed amount."""
    requests = (raw.get("capacity") or {}).get("requests") or {}
    return tuple(sorted((str(k), capacities.nanos(cel.parse_quantity(str(v)))) for k, v in requests.items()))


def _alternative(raw: Mapping[str, Any], *, request: str, name: str, index: int, sub: int | None) -> Alternative:
    selectors = tuple(str(((item or {}).get("cel") or {}).get("expression", "")) for item in raw.get("selectors") or [])
    return Alternative(
        request=request,
        name=name,
        request_index=index,
        subrequest_index=sub,
        device_class=str(raw.get("deviceClassName", "")),
        selectors=selectors,
        all_devices=raw.get("allocationMode", "ExactCount") == "All",
        count=int(raw.get("count", 1) or 1),
        tolerations=tuple(raw.get("tolerations") or ()),
        capacity=_capacity(raw),
    )


def _toleration_findings(alternative: Alternative) -> list[Finding]:
    """Tolerations the API server refuses (``DeviceTolerationsMaxLength``, effect, operator)."""
    where = {
        "request": alternative.name,
        "request_index": alternative.request_index,
        "subrequest_index": alternative.subrequest_index,
    }
    out = []
    if len(alternative.tolerations) > limits.MAX_TOLERATIONS:
        out.append(
            Finding(
                "claim-invalid",
                f"request {alternative.name!r} has {len(alternative.tolerations)} tolerations; the API allows "
                f"{limits.MAX_TOLERATIONS}",
                hint="tolerate a whole key with operator: Exists instead of listing values",
                **where,  # type: ignore[arg-type]
            )
        )
    for number, toleration in enumerate(alternative.tolerations):
        effect, operator = str(toleration.get("effect") or ""), str(toleration.get("operator") or "")
        if effect not in limits.TOLERATION_EFFECTS:
            out.append(
                Finding(
                    "claim-invalid",
                    f"request {alternative.name!r} toleration #{number} has effect {effect!r}, which no device "
                    "taint has",
                    hint="effect is NoSchedule or NoExecute, or left out to match every effect "
                    "(the NVIDIA driver's health taints use NoSchedule)",
                    **where,  # type: ignore[arg-type]
                )
            )
        if operator not in limits.TOLERATION_OPERATORS:
            out.append(
                Finding(
                    "claim-invalid",
                    f"request {alternative.name!r} toleration #{number} has operator {operator!r}",
                    hint="operator is Equal (the default) or Exists",
                    **where,  # type: ignore[arg-type]
                )
            )
    return out


def read_claim(spec: Mapping[str, Any]) -> tuple[ClaimShape, list[Finding]]:
    """``spec`` is a ResourceClaim spec (``{devices: ...}``); templates pass ``spec.spec``."""
    findings: list[Finding] = []
    devices = spec.get("devices") or {}
    requests: list[tuple[Alternative, ...]] = []
    for index, raw in enumerate(devices.get("requests") or []):
        name = str(raw.get("name", f"#{index}"))
        if ("exactly" in raw and "firstAvailable" in raw) or not ("exactly" in raw or "firstAvailable" in raw):
            findings.append(
                Finding(
                    "claim-invalid",
                    f"request {name!r} must have exactly one of exactly or firstAvailable",
                    hint="resource.k8s.io/v1 nests a single request under exactly: (deviceClassName, selectors, count)",
                    request=name,
                    request_index=index,
                )
            )
            continue
        try:
            if "exactly" in raw:
                requests.append((_alternative(raw["exactly"] or {}, request=name, name=name, index=index, sub=None),))
                continue
            requests.append(
                tuple(
                    _alternative(
                        sub or {},
                        request=name,
                        name=f"{name}/{(sub or {}).get('name', number)}",
                        index=index,
                        sub=number,
                    )
                    for number, sub in enumerate(raw["firstAvailable"] or [])
                )
            )
        except cel.QuantityError as err:
            findings.append(
                Finding(
                    "claim-invalid",
                    f"request {name!r}: capacity request is not a quantity: {err}",
                    hint="write amounts as Kubernetes quantities, e.g. memory: 10Gi",
                    request=name,
                    request_index=index,
                )
            )
    constraints = []
    derived = {
        str(d.get("name"))
        for raw in devices.get("requests") or []
        for alternative in [raw.get("exactly") or {}, *(raw.get("firstAvailable") or [])]
        for d in (alternative or {}).get("derivedAttributes") or ()
    }
    for index, raw in enumerate(devices.get("constraints") or []):
        attribute = raw.get("matchAttribute") or raw.get("distinctAttribute")
        if attribute in derived:
            continue  # a value the scheduler computes per device (DRADerivedAttributes): not judged
        if not attribute or "/" not in str(attribute):
            findings.append(
                Finding(
                    "claim-invalid",
                    f"constraint #{index} needs a fully qualified matchAttribute or distinctAttribute (domain/name)",
                    hint="e.g. matchAttribute: gpu.nvidia.com/parentUUID",
                    source="constraint",
                    constraint_index=index,
                )
            )
            continue
        constraints.append(
            Constraint(
                index, tuple(str(r) for r in raw.get("requests") or ()), str(attribute), "distinctAttribute" in raw
            )
        )
    for alternatives in requests:
        for alternative in alternatives:
            if alternative.tolerations:
                findings += _toleration_findings(alternative)
    return ClaimShape(tuple(requests), tuple(constraints)), findings


__all__ = ["Alternative", "ClaimShape", "Constraint", "read_claim"]
