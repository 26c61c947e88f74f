"""Objects that show whether a live cluster keeps a gated DRA field, and what their answers mean.

The API server drops the fields of a gate that is off without an error, so the only way to see a
cluster's gates from outside is to send it an object carrying one gated field in a server-side
dry run (``dryRun=All``: nothing is stored) and look for the field in the answer.
``fleet.engine.probes`` sends ``PROBES``; ``kept`` reads an answer and ``observed`` turns the
answers, the served API versions and the server's minor into the ``ClusterFeatures`` that
``featuregates.check`` decides by, in place of what the Cluster declares.

Pure: plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from fleet.policy.featuregates import ClusterFeatures, effective

PROBE_NAME = "fleet-gate-probe"
PROBE_NAMESPACE = "default"
_PROBE_DOMAIN = "fleet.gpufleet.dev"


class Probe(NamedTuple):
    """An object that carries one gated field, for a server-side dry run (``dryRun=All``).

    The server keeps the field when the gate is on and drops it when off; ``invalid`` is what a
    refusal means (``True``: the gate is on — e.g. adminAccess outside a labelled namespace;
    ``False``: off — e.g. a request left with neither exactly nor firstAvailable; ``None``: unknown)."""

    gate: str
    body: dict[str, object]
    path: tuple[str | int, ...]
    invalid: bool | None = None
    invalid_says: str = ""
    """A refusal counts as ``invalid`` only when its message contains this."""


def _claim(gate: str, request: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"{PROBE_NAME}-{gate.lower()}", "namespace": PROBE_NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "probe", **request}]}},
    }


def _exactly(**fields: object) -> dict[str, object]:
    return {"exactly": {"deviceClassName": PROBE_NAME, **fields}}


def _slice(gate: str, spec: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{PROBE_NAME}-{gate.lower()}"},
        "spec": {"driver": _PROBE_DOMAIN, "pool": {"name": PROBE_NAME, "generation": 1, "resourceSliceCount": 1}}
        | spec,
    }


PROBES: tuple[Probe, ...] = (
    Probe(
        "DRAExtendedResource",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": PROBE_NAME},
            "spec": {"extendedResourceName": f"{_PROBE_DOMAIN}/probe"},
        },
        ("spec", "extendedResourceName"),
    ),
    Probe(
        "DRAPrioritizedList",
        _claim("DRAPrioritizedList", {"firstAvailable": [{"name": "a", "deviceClassName": PROBE_NAME}]}),
        ("spec", "devices", "requests", 0, "firstAvailable"),
        invalid=False,
        invalid_says="exactly",
    ),
    Probe(
        "DRAAdminAccess",
        _claim("DRAAdminAccess", _exactly(adminAccess=True)),
        ("spec", "devices", "requests", 0, "exactly", "adminAccess"),
        invalid=True,
        invalid_says="admin",
    ),
    Probe(
        "DRADeviceTaints",
        _claim("DRADeviceTaints", _exactly(tolerations=[{"key": f"{_PROBE_DOMAIN}/probe", "operator": "Exists"}])),
        ("spec", "devices", "requests", 0, "exactly", "tolerations"),
    ),
    Probe(
        "DRAConsumableCapacity",
        _claim("DRAConsumableCapacity", _exactly(capacity={"requests": {f"{_PROBE_DOMAIN}/probe": "1"}})),
        ("spec", "devices", "requests", 0, "exactly", "capacity"),
    ),
    Probe(
        "DRAPartitionableDevices",
        _slice(
            "DRAPartitionableDevices",
            {"allNodes": True, "sharedCounters": [{"name": "probe", "counters": {"probe": {"value": "1"}}}]},
        ),
        ("spec", "sharedCounters"),
    ),
    Probe(
        "DRADeviceBindingConditions",
        _slice(
            "DRADeviceBindingConditions",
            {
                "nodeName": PROBE_NAME,
                "devices": [
                    {
                        "name": "probe",
                        "bindsToNode": True,
                        "bindingConditions": ["probe-ready"],
                        "bindingFailureConditions": ["probe-failed"],
                    }
                ],
            },
        ),
        ("spec", "devices", 0, "bindingConditions"),
    ),
)
"""One dry-run object per gate a server shows by keeping or dropping a field (``fleet.engine.probes``).
DRADeviceTaintRules guards no field, and the API server serves DeviceTaintRule whatever the gate
(``pkg/registry/resource``, v1.37.2: in ``resource.k8s.io/v1`` by default); the scheduler and the
eviction controller are the ones that read it. Discovery shows which versions serve the kind, and
the gate is taken as declared. The gates new in 1.37 are alpha (or, DRAFractionalCapacityRange, beta
and off) and are taken as declared too."""


def kept(response: object, path: tuple[str | int, ...]) -> bool:
    """Whether the server's answer still has the probed field (non-empty)."""
    value: object = response
    for key in path:
        if isinstance(key, int):
            if not isinstance(value, list) or len(value) <= key:
                return False
            value = value[key]
        else:
            if not isinstance(value, dict) or key not in value:
                return False
            value = value[key]
    return value not in (None, [], {}, "")


def observed(
    declared: ClusterFeatures,
    *,
    minor: int,
    served: frozenset[str],
    seen: Mapping[str, bool | None],
    source: str,
) -> ClusterFeatures:
    """``declared`` replaced by what a live cluster showed: its minor, the API versions it serves, and
    the gates ``seen`` (None: the probe could not tell; then the declared setting or the default holds)."""
    known = {g: v for g, v in seen.items() if v is not None}
    base = effective(minor, {**declared.explicit, **known})
    enabled = (base - {g for g, v in known.items() if not v}) | {g for g, v in known.items() if v}
    return ClusterFeatures(
        cluster=declared.cluster,
        file=declared.file,
        minor=minor,
        enabled=frozenset(enabled),
        apis=served,
        source=source,
        explicit=declared.explicit,
        declared_minor=declared.minor,
    )


__all__ = ["PROBES", "PROBE_NAME", "PROBE_NAMESPACE", "Probe", "kept", "observed"]
