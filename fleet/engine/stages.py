"""The stage table: the one place that says what is applied in which order.

The design fixes seven stages (docs/engine.md). Each is one ``Stage`` entry: its name, the kinds it
holds, the health gate that must pass before the next stage starts, and its
position in pruning (pruning walks the table backwards: maintenance rules go first, so devices
return, claims before the classes they name, namespaces last). The ``operator`` stage has no
kinds: it installs a Helm release (``fleet.engine.operators``), not objects. ``maintenance`` is
last: a GPUMaintenance held for its window never holds back the revision's other stages.

Kinds not listed here are refused by ``stage_of``: fleet never applies an object
it cannot order.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Gate(StrEnum):
    """What "healthy" means before the next stage may start."""

    EXIST = "exist"
    """Every object of the stage exists (Namespaces: phase Active)."""
    OPERATOR_READY = "operator-ready"
    """``GPUCluster gpu-cluster`` Ready, kubelet plugin, DeviceClasses, slices (``fleet.engine.operators``)."""
    CLASSES_PUBLISHED = "classes-published"
    """DeviceClasses exist and the driver published ResourceSlices for every pool node."""
    POOLS_APPLIED = "pools-applied"
    """Every pool finds the nodes it expects, each carrying the pool's labels and taints."""
    DEVICES_EMPTIED = "devices-emptied"
    """Every DeviceTaintRule written with ``NoExecute`` exists and no claim is allocated on its devices."""


@dataclass(frozen=True)
class Stage:
    name: str
    kinds: tuple[str, ...]
    gate: Gate

    def __str__(self) -> str:
        return self.name


STAGES: tuple[Stage, ...] = (
    Stage("namespaces", ("Namespace",), Gate.EXIST),
    Stage("operator", (), Gate.OPERATOR_READY),
    Stage("classes", ("DeviceClass",), Gate.CLASSES_PUBLISHED),
    Stage("tenancy", ("ServiceAccount", "Role", "RoleBinding", "ResourceQuota"), Gate.EXIST),
    Stage("pools", ("Node",), Gate.POOLS_APPLIED),
    Stage("claims", ("ResourceClaimTemplate", "ResourceClaim"), Gate.EXIST),
    Stage("maintenance", ("DeviceTaintRule",), Gate.DEVICES_EMPTIED),
)


# The API resources (plurals) fleet writes: every stage's kinds plus the ledger
# ConfigMap. Used to count write requests in the API server's own metrics.
WRITTEN_RESOURCES = frozenset(
    {
        "namespaces",
        "deviceclasses",
        "serviceaccounts",
        "roles",
        "rolebindings",
        "resourcequotas",
        "nodes",
        "resourceclaimtemplates",
        "resourceclaims",
        "devicetaintrules",
        "configmaps",
    }
)


def by_name(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise KeyError(name)


def stage_of(kind: str) -> Stage:
    """The stage that applies ``kind``; KeyError for a kind fleet does not order."""
    for stage in STAGES:
        if kind in stage.kinds:
            return stage
    raise KeyError(kind)


def index(stage: Stage) -> int:
    """Position of ``stage`` in apply order (by name: a plan of 10,000 objects sorts by it)."""
    return _INDEX[stage.name]


_INDEX = {s.name: i for i, s in enumerate(STAGES)}


def prune_order() -> tuple[Stage, ...]:
    """Stages in the order pruning visits them: the apply order reversed."""
    return tuple(reversed(STAGES))


__all__ = ["STAGES", "WRITTEN_RESOURCES", "Gate", "Stage", "by_name", "index", "prune_order", "stage_of"]
