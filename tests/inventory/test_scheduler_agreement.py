"""Predicted copies equal what the real kube-scheduler allocates on the sandbox.

For each claim template of the corpus: read the sandbox's ResourceSlices and
DeviceClasses as ``fleetctl inventory`` does (minus devices other claims hold
right now), predict with ``Checker`` how many copies of the claim fit at once,
then start that many pods plus one, each with its own claim from the template.
The real scheduler must run exactly the predicted number and refuse the extra
pod (FailedScheduling). A wrong count either way fails: too many running means
fleet under-predicts, a pod pending too early means it over-predicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from fleet.inventory import Checker, Inventory
from tests import waits
from tests.sandbox import guide

pytestmark = pytest.mark.sandbox

GPU = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"


def exactly(
    *selectors: str, count: int | None = 1, device_class: str = "gpu.nvidia.com", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class, **extra}
    if count is not None:
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return body


CORPUS: dict[str, dict[str, Any]] = {
    "guide-h100": {
        "requests": [{"name": "gpu", "exactly": exactly(f"{GPU}.productName.lowerAscii().matches('^.*h100.*$')")}]
    },
    "h200-whole-node": {
        "requests": [{"name": "gpu", "exactly": exactly(f"{GPU}.productName == 'NVIDIA H200'", count=8)}]
    },
    "h200-three": {"requests": [{"name": "gpu", "exactly": exactly(f"{GPU}.productName == 'NVIDIA H200'", count=3)}]},
    "ampere-pairs-79gi": {
        "requests": [
            {
                "name": "gpu",
                "exactly": exactly(
                    f"{GPU}.architecture == 'Ampere' && {CAP}.memory.compareTo(quantity('79Gi')) >= 0", count=2
                ),
            }
        ]
    },
    "b200-never": {"requests": [{"name": "gpu", "exactly": exactly(f"{GPU}.productName == 'NVIDIA B200'")}]},
    "removed-index": {"requests": [{"name": "gpu", "exactly": exactly(f"{GPU}.index == 0")}]},
    "first-available": {
        "requests": [
            {
                "name": "gpu",
                "firstAvailable": [
                    {"name": "b200", **exactly(f"{GPU}.productName == 'NVIDIA B200'")},
                    {"name": "h200x4", **exactly(f"{GPU}.productName == 'NVIDIA H200'", count=4)},
                ],
            }
        ]
    },
    "mig-1g": {
        "requests": [
            {"name": "mig", "exactly": exactly(f"{GPU}.profile.startsWith('1g.')", device_class="mig.nvidia.com")}
        ]
    },
    "h100-same-pcie-root": {
        "requests": [{"name": "gpus", "exactly": exactly(f"{GPU}.productName.contains('H100')", count=4)}],
        "constraints": [{"requests": ["gpus"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    },
    "h100-same-numa": {
        "requests": [{"name": "gpus", "exactly": exactly(f"{GPU}.productName.contains('H100')", count=3)}],
        "constraints": [{"requests": ["gpus"], "matchAttribute": "resource.kubernetes.io/numaNode"}],
    },
    "h200-distinct-numa": {
        "requests": [{"name": "gpus", "exactly": exactly(f"{GPU}.productName == 'NVIDIA H200'", count=2)}],
        "constraints": [{"requests": ["gpus"], "distinctAttribute": "resource.kubernetes.io/numaNode"}],
    },
    "all-l4": {
        "requests": [
            {"name": "gpus", "exactly": exactly(f"{GPU}.productName.contains('L4')", count=None, allocationMode="All")}
        ]
    },
    "driver-580": {
        "requests": [
            {
                "name": "gpu",
                "exactly": exactly(
                    f"{GPU}.driverVersion.isGreaterThan(semver('580.0.0'))"
                    f" && {CAP}.memory.isGreaterThan(quantity('100Gi'))"
                ),
            }
        ]
    },
}


def free_inventory(kubectl: Callable[..., Any]) -> Inventory:
    """The cluster's devices as the scheduler can still use them (allocated ones removed)."""
    taken = guide.all_allocated(kubectl)
    slices = guide.get_json(kubectl, "resourceslices")["items"]
    for item in slices:
        pool = item["spec"]["pool"]["name"]
        item["spec"]["devices"] = [d for d in item["spec"].get("devices", []) if (pool, d["name"]) not in taken]
    return Inventory.from_slices(slices)


def apply(kubectl: Callable[..., Any], objs: list[dict[str, Any]]) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


def failed_scheduling(kubectl: Callable[..., Any], namespace: str, pod: str) -> bool:
    events = guide.get_json(kubectl, "events", "-n", namespace)["items"]
    return any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == pod for e in events)


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_predicted_copies_are_what_the_scheduler_allocates(
    case: str, kubectl: Callable[..., Any], namespace: str
) -> None:
    classes = {c["metadata"]["name"]: c for c in guide.get_json(kubectl, "deviceclasses")["items"]}
    spec = {"devices": CORPUS[case]}
    report = Checker(inventory=free_inventory(kubectl), classes=classes).check_claim(spec)
    predicted = report.capacity
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": case, "namespace": namespace},
        "spec": {"spec": spec},
    }
    names = [f"p{i:02d}" for i in range(predicted + 1)]
    try:
        apply(kubectl, [template, *(guide.pod(n, template=case, namespace=namespace) for n in names)])

        def settled() -> dict[str, str] | None:
            phases = guide.pod_phases(kubectl, namespace)
            running = list(phases.values()).count("Running")
            assert running <= predicted, f"{case}: scheduler ran {running} pods, fleet predicted {predicted}"
            return phases if running == predicted else None

        phases = waits.wait_for(settled, within=180, what=f"{predicted} running pods ({case})")
        pending = sorted(n for n, phase in phases.items() if phase != "Running")
        assert len(pending) == 1
        waits.wait_for(
            lambda: failed_scheduling(kubectl, namespace, pending[0]),
            within=120,
            what=f"FailedScheduling for the extra pod {pending[0]} ({case})",
        )
        final = guide.pod_phases(kubectl, namespace)
        assert list(final.values()).count("Running") == predicted
        assert len({claim for claim, _, _ in guide.allocated(kubectl, namespace)}) == predicted
    finally:
        kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=true", check=False)
        waits.wait_for(
            lambda: not guide.get_json(kubectl, "resourceclaims", "-n", namespace)["items"],
            within=120,
            what=f"claims of {case} released",
        )


def test_corpus_covers_every_outcome(kubectl: Callable[..., Any]) -> None:
    """The corpus has never-satisfiable, single-node and many-node cases on this sandbox."""
    classes = {c["metadata"]["name"]: c for c in guide.get_json(kubectl, "deviceclasses")["items"]}
    checker = Checker(inventory=free_inventory(kubectl), classes=classes)
    copies = {case: checker.check_claim({"devices": devices}).capacity for case, devices in CORPUS.items()}
    assert copies["b200-never"] == 0 and copies["removed-index"] == 0
    assert copies["h200-whole-node"] >= 1
    assert copies["guide-h100"] > copies["h200-whole-node"]
