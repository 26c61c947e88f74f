"""Dynamic MIG and shared GPUs: fleet's copies equal what the real kube-scheduler allocates.

A module fixture adds GPU nodes to the session's sandbox the way the NVIDIA driver publishes
them with its DynamicMIG gate (every placement a partitionable device consuming its GPU's
counter set, split slices) and with ConsumableShares (GPU memory as consumable capacity).
For each claim shape, pods pinned to one such pool each get their own claim from the
template: fleet predicts with ``Checker`` from that pool's ResourceSlices how many copies fit
at once, and the scheduler must run exactly that many and refuse one more. Too many running
means fleet under-predicts, a pod pending too early means it over-predicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleet.inventory import Checker, Inventory
from fleet.sandbox import Sandbox, clusters, profiles
from tests import waits
from tests.inventory.test_scheduler_agreement import apply, failed_scheduling
from tests.sandbox import guide

pytestmark = pytest.mark.sandbox

GPU = "device.attributes['gpu.nvidia.com']"
POOLS = {
    "h100x2-dyn": {"nodes": 1, "migStrategy": "dynamic"},
    "a100x1-dyn": {"nodes": 1, "migStrategy": "dynamic"},
    "h100x1-shared": {"nodes": 1, "consumableShares": "memory"},
    "h200x1-shared": {"nodes": 1, "consumableShares": "memory"},
}
POOL_LABEL = "sandbox.fleet.gpufleet.dev/pool"


def mig(profile: str | None = None, name: str = "mig") -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": "mig.nvidia.com"}
    if profile:
        body["selectors"] = [{"cel": {"expression": f"{GPU}.profile == '{profile}'"}}]
    return {"name": name, "exactly": body}


def gpu(**fields: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **fields}}


SAME_GPU = [{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}]
CASES: dict[str, tuple[str, dict[str, Any], int]] = {
    # (pool, spec.devices, copies the driver's layout allows)
    "h100-1g10gb": ("h100x2-dyn", {"requests": [mig("1g.10gb")]}, 14),
    "h100-1g10gb-me": ("h100x2-dyn", {"requests": [mig("1g.10gb+me")]}, 2),
    "h100-3g40gb": ("h100x2-dyn", {"requests": [mig("3g.40gb")]}, 4),
    "h100-7g80gb": ("h100x2-dyn", {"requests": [mig("7g.80gb")]}, 2),
    "h100-any-mig": ("h100x2-dyn", {"requests": [mig()]}, 14),
    "h100-whole": ("h100x2-dyn", {"requests": [gpu()]}, 2),
    "h100-4g-and-3g": (
        "h100x2-dyn",
        {"requests": [mig("4g.40gb", "a"), mig("3g.40gb", "b")], "constraints": SAME_GPU},
        2,
    ),
    "a100-2g20gb": ("a100x1-dyn", {"requests": [mig("2g.20gb")]}, 3),
    "a100-whole": ("a100x1-dyn", {"requests": [gpu()]}, 0),
    "h100-shared-10gi": ("h100x1-shared", {"requests": [gpu(capacity={"requests": {"memory": "10Gi"}})]}, 7),
    "h200-shared-10gi": ("h200x1-shared", {"requests": [gpu(capacity={"requests": {"memory": "10Gi"}})]}, 14),
    "h100-shared-30gi": ("h100x1-shared", {"requests": [gpu(capacity={"requests": {"memory": "30Gi"}})]}, 2),
}


@pytest.fixture(scope="module")
def partitioned(sandbox: Sandbox) -> Iterator[list[str]]:
    """The extra pools on the session's sandbox (removed again afterwards)."""
    profile = profiles.parse({"pools": POOLS})
    names = [n.name for n in profile.nodes()]
    clusters.publish_gpus(sandbox, profile)
    clusters.wait_nodes_ready(sandbox, set(names))
    try:
        yield names
    finally:
        for name in names:
            sandbox.kubectl("delete", "node", name, "--wait=false", check=False)
            sandbox.kubectl("delete", "resourceslices", "--field-selector", f"spec.nodeName={name}", check=False)


def scheduling_events(kubectl: Callable[..., Any], namespace: str) -> str:
    """The namespace's scheduling events, a line each: why a pod is still pending."""
    events = guide.get_json(kubectl, "events", "-n", namespace)["items"]
    return "\n".join(
        f"{e['involvedObject']['name']}: {e['reason']} x{e.get('count') or 1}: {e.get('message', '')}"
        for e in events
        if e["reason"] in {"FailedScheduling", "Scheduled"}
    )


def pool_inventory(kubectl: Callable[..., Any], pool: str) -> Inventory:
    node = f"{pool}-01"
    slices = [s for s in guide.get_json(kubectl, "resourceslices")["items"] if s["spec"].get("nodeName") == node]
    return Inventory.from_slices(slices)


@pytest.mark.parametrize("case", sorted(CASES))
def test_copies_are_what_the_scheduler_allocates(
    case: str, partitioned: list[str], kubectl: Callable[..., Any], namespace: str
) -> None:
    pool, devices, expected = CASES[case]
    classes = {c["metadata"]["name"]: c for c in guide.get_json(kubectl, "deviceclasses")["items"]}
    spec = {"devices": devices}
    predicted = Checker(inventory=pool_inventory(kubectl, pool), classes=classes).check_claim(spec).capacity
    assert predicted == expected, f"{case}: fleet predicts {predicted}, the driver's layout allows {expected}"
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": case, "namespace": namespace},
        "spec": {"spec": spec},
    }
    pods = []
    for i in range(predicted + 1):
        item = guide.pod(f"p{i:02d}", template=case, namespace=namespace)
        item["spec"]["nodeSelector"] = {POOL_LABEL: pool}
        pods.append(item)
    try:
        apply(kubectl, [template, *pods])

        def settled() -> dict[str, str] | None:
            phases = guide.pod_phases(kubectl, namespace)
            running = list(phases.values()).count("Running")
            assert running <= predicted, f"{case}: scheduler ran {running} pods, fleet predicted {predicted}"
            return phases if running == predicted else None

        # 330 s: a pod the scheduler parked as unschedulable while its claim was still being made
        # waits for a queueing hint or, at worst, the scheduler's 5-minute flush of parked pods.
        phases = waits.wait_for(
            settled,
            within=330,
            every=1,
            what=f"{predicted} running pods ({case})",
            details=lambda: scheduling_events(kubectl, namespace),
        )
        pending = sorted(n for n, phase in phases.items() if phase != "Running")
        assert len(pending) == 1
        waits.wait_for(
            lambda: failed_scheduling(kubectl, namespace, pending[0]),
            within=120,
            what=f"FailedScheduling for the extra pod {pending[0]} ({case})",
        )
        assert list(guide.pod_phases(kubectl, namespace).values()).count("Running") == predicted
    finally:
        kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=true", check=False)
        waits.wait_for(
            lambda: not guide.get_json(kubectl, "resourceclaims", "-n", namespace)["items"],
            within=120,
            what=f"claims of {case} released",
        )
