"""The DRA guide's manifests behave on the sandbox exactly as the guide says.

Each selector test allocates *every* device the selector admits (one pod each)
plus one more: the extra pod must stay Pending, and the set of devices
allocated must equal the set of published devices that satisfy the selector.
That proves "selects only" and "picks exactly", not merely "picked one that
happens to match".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests import waits
from tests.sandbox import guide

pytestmark = pytest.mark.sandbox

HOPPER_OVER_80GI = """device.attributes['gpu.nvidia.com'].architecture == 'Hopper'
&&
device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity("80Gi"))
"""


def apply(kubectl: Callable[..., Any], objs: list[dict[str, Any]]) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


def free_gpus(kubectl: Callable[..., Any], keep: Callable[[dict[str, Any]], bool]) -> set[tuple[str, str]]:
    taken = guide.all_allocated(kubectl)
    return {
        key
        for key, d in guide.published_devices(kubectl).items()
        if guide.attr(d, "type") == "gpu" and keep(d) and key not in taken
    }


def exhaust(
    kubectl: Callable[..., Any], namespace: str, template: str, satisfies: Callable[[dict[str, Any]], bool]
) -> tuple[set[tuple[str, str]], str]:
    """Start one pod per satisfying free device plus one; return the allocated devices and the pending pod."""
    expected = free_gpus(kubectl, satisfies)
    assert expected, "the sandbox profile must publish devices that satisfy the selector"
    names = [f"p{i}" for i in range(len(expected) + 1)]
    apply(kubectl, [guide.pod(n, template=template, namespace=namespace) for n in names])

    def settled() -> dict[str, str] | None:
        phases = guide.pod_phases(kubectl, namespace)
        return phases if list(phases.values()).count("Running") == len(expected) else None

    phases = waits.wait_for(settled, within=120, what=f"{len(expected)} running pods")
    pending = [n for n, phase in phases.items() if phase != "Running"]
    assert len(pending) == 1
    # The extra pod was really evaluated against the whole inventory and refused.
    waits.wait_for(
        lambda: [
            e
            for e in guide.get_json(kubectl, "events", "-n", namespace)["items"]
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == pending[0]
        ],
        what=f"FailedScheduling for {pending[0]}",
    )
    assert guide.pod_phases(kubectl, namespace)[pending[0]] == "Pending"
    got = {(pool, dev) for _, pool, dev in guide.allocated(kubectl, namespace)}
    return got, pending[0]


def test_single_gpu_pod_runs_on_a_published_device(kubectl: Callable[..., Any], namespace: str) -> None:
    apply(kubectl, guide.seed("single-gpu-pod.yaml", namespace=namespace))
    waits.wait_for(lambda: guide.pod_phases(kubectl, namespace).get("gpu-pod") == "Running", what="gpu-pod Running")
    pod = guide.get_json(kubectl, "pod", "gpu-pod", "-n", namespace)
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert claim_name.startswith("gpu-pod-gpu-")  # generated, with a suffix, as the guide says
    claim = guide.get_json(kubectl, "resourceclaim", claim_name, "-n", namespace)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "gpu.nvidia.com"
    assert result["pool"] == pod["spec"]["nodeName"]  # one pool per node, named after it
    device = guide.published_devices(kubectl)[(result["pool"], result["device"])]
    assert guide.attr(device, "type") == "gpu"
    assert claim["status"]["reservedFor"][0]["name"] == "gpu-pod"


def test_h100_template_selects_only_h100(kubectl: Callable[..., Any], namespace: str) -> None:
    apply(kubectl, guide.seed("h100-gpu.yaml", namespace=namespace))
    is_h100 = lambda d: "h100" in guide.attr(d, "productName").lower()  # noqa: E731
    got, _ = exhaust(kubectl, namespace, "h100-gpu", is_h100)
    published = guide.published_devices(kubectl)
    assert all(is_h100(published[k]) for k in got)
    assert len(got) == 16  # every whole H100 of the two h100x8 nodes


def test_large_memory_template_picks_exactly_gpus_over_40gi(kubectl: Callable[..., Any], namespace: str) -> None:
    apply(kubectl, guide.seed("large-memory-gpu.yaml", namespace=namespace))
    over_40 = lambda d: guide.memory_mib(d) > 40 * 1024  # noqa: E731
    expected = free_gpus(kubectl, over_40)
    got, _ = exhaust(kubectl, namespace, "large-memory-gpu", over_40)
    assert got == expected
    published = guide.published_devices(kubectl)
    assert not any(guide.attr(published[k], "productName") == "NVIDIA L4" for k in got)


def test_hopper_over_80gi_picks_only_h200(kubectl: Callable[..., Any], namespace: str) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "hopper-80gi", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": HOPPER_OVER_80GI}}],
                            },
                        }
                    ]
                }
            }
        },
    }
    apply(kubectl, [template])
    rule = lambda d: guide.attr(d, "architecture") == "Hopper" and guide.memory_mib(d) > 80 * 1024  # noqa: E731
    got, _ = exhaust(kubectl, namespace, "hopper-80gi", rule)
    published = guide.published_devices(kubectl)
    # An H100 80GB HBM3 publishes 81559Mi, just under 80Gi: only the H200s qualify.
    assert {guide.attr(published[k], "productName") for k in got} == {"NVIDIA H200"}
    assert len(got) == 8


def test_two_gpus_come_from_one_node(kubectl: Callable[..., Any], namespace: str) -> None:
    apply(kubectl, guide.seed("two-gpus.yaml", namespace=namespace))
    apply(kubectl, [guide.pod("trainer", template="two-gpus", namespace=namespace, claim="gpus")])
    waits.wait_for(lambda: guide.pod_phases(kubectl, namespace).get("trainer") == "Running", what="trainer Running")
    results = guide.allocated(kubectl, namespace)
    assert len(results) == 2
    assert len({pool for _, pool, _ in results}) == 1
    assert len({dev for _, _, dev in results}) == 2


def test_deployment_replicas_get_distinct_claims_and_devices(kubectl: Callable[..., Any], namespace: str) -> None:
    apply(kubectl, guide.seed("single-gpu-pod.yaml", namespace=namespace)[:1])  # the single-gpu template
    apply(kubectl, guide.seed("gpu-workers-deployment.yaml", namespace=namespace))
    waits.wait_for(
        lambda: list(guide.pod_phases(kubectl, namespace).values()).count("Running") == 2,
        what="two gpu-workers Running",
    )
    results = guide.allocated(kubectl, namespace)
    assert len({claim for claim, _, _ in results}) == 2
    assert len({(pool, dev) for _, pool, dev in results}) == 2


def test_deleting_the_pod_deletes_its_claim_and_frees_the_device(kubectl: Callable[..., Any], namespace: str) -> None:
    apply(kubectl, guide.seed("single-gpu-pod.yaml", namespace=namespace))
    waits.wait_for(lambda: guide.allocated(kubectl, namespace), what="an allocation")
    [(claim, pool, device)] = guide.allocated(kubectl, namespace)
    kubectl("delete", "pod", "gpu-pod", "-n", namespace, "--wait=true")
    waits.wait_for(
        lambda: not guide.get_json(kubectl, "resourceclaims", "-n", namespace)["items"], what=f"claim {claim} deleted"
    )
    assert (pool, device) not in guide.all_allocated(kubectl)


def test_h100_pod_stays_pending_without_h100_and_the_scheduler_says_why(tmp_path: Any) -> None:
    from fleet.sandbox import clusters, profiles

    sb = clusters.up(directory=tmp_path / "no-h100", profile=profiles.parse({"pools": {"a100x8": 1, "l4x4": 1}}))
    try:
        ns = "gpu-example"
        sb.kubectl("create", "namespace", ns)
        objs = [*guide.seed("h100-gpu.yaml", namespace=ns), guide.pod("gpu-pod", template="h100-gpu", namespace=ns)]
        sb.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
        events = waits.wait_for(
            lambda: [
                e
                for e in json.loads(sb.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
                if e["reason"] == "FailedScheduling"
            ],
            what="a FailedScheduling event",
        )
        message = events[0]["message"]
        assert "cannot allocate all claims" in message, message
        pod = json.loads(sb.kubectl("get", "pod", "gpu-pod", "-n", ns, "-o", "json").stdout)
        assert pod["status"]["phase"] == "Pending"
        assert "nodeName" not in pod["spec"]
    finally:
        clusters.down(directory=tmp_path / "no-h100")


def test_restricted_user_cannot_list_resourceslices(kubectl: Callable[..., Any]) -> None:
    denied = kubectl("get", "resourceslices", context="alice@fleet-sandbox", check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower() and "alice" in denied.stderr
    assert kubectl("get", "resourceslices").returncode == 0
    can = kubectl("auth", "can-i", "list", "resourceslices.resource.k8s.io", "--as=alice", check=False)
    assert can.stdout.strip() == "no"
