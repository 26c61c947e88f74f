"""``fleetctl explain`` and ``inventory`` for a GPU that fails after it was allocated (Kubernetes 1.37).

Three reports say so, each written where the real writer writes it: the driver's device taint
(``fleetctl sandbox gpu-health``, as the NVIDIA driver republishes its slice), the driver's
conditions in the claim's ``status.devices`` and the kubelet's ``allocatedResourcesStatus`` in the
pod's status. The sandbox runs no kubelet and no driver, so the test writes both statuses through
the API server's status subresources, as they do; the real API server validates them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from fleet.sandbox import Sandbox, credentials
from fleetctl import cli
from tests import waits
from tests.conftest import Kubectl
from tests.explain.test_causes import _create, _explain, _pod, _template
from tests.sandbox import guide

pytestmark = pytest.mark.sandbox

H200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"


def _running(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    """The pod once KWOK reports its container (the status the kubelet would write)."""

    def reported() -> dict[str, Any] | None:
        pod: dict[str, Any] = guide.get_json(kubectl, "pod", "-n", namespace, name)
        return pod if (pod.get("status") or {}).get("containerStatuses") else None

    return waits.wait_for(reported, what=f"pod {name} has a container status")


def _held(kubectl: Kubectl, namespace: str) -> tuple[str, dict[str, Any]]:
    """(node, the claim) of the test's one allocated claim."""
    [claim] = guide.get_json(kubectl, "resourceclaims", "-n", namespace)["items"]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    return result["pool"], claim


def _health(sandbox: Sandbox, *args: str) -> int:
    return cli.run(["sandbox", "--dir", str(sandbox.directory), "gpu-health", *args])


@pytest.fixture()
def running(kubectl: Kubectl, namespace: str) -> tuple[str, str, dict[str, Any]]:
    """A pod running on one H200: (node, device, its claim)."""
    _create(kubectl, namespace, _template("t", expression=H200), _pod("p", "t"))
    kubectl("wait", "-n", namespace, "pod/p", "--for=condition=PodScheduled", "--timeout=60s")
    node, claim = _held(kubectl, namespace)
    return node, claim["status"]["allocation"]["devices"]["results"][0]["device"], claim


def test_a_driver_taint_on_a_held_gpu(
    sandbox: Sandbox,
    kubectl: Kubectl,
    namespace: str,
    running: tuple[str, str, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    node, device, claim = running
    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    assert (code, out["cause"]) == (0, "scheduled")
    before = guide.published_devices(kubectl)[(node, device)]
    slices = guide.get_json(kubectl, "resourceslices", "--field-selector", f"spec.nodeName={node}")["items"]
    assert _health(sandbox, node, device, "--xid", "79") == 0
    try:
        assert f"{node}/{device}: gpu.nvidia.com/xid=79:NoSchedule" in capsys.readouterr().out
        after = guide.get_json(kubectl, "resourceslices", "--field-selector", f"spec.nodeName={node}")["items"]
        assert [s["metadata"]["generation"] for s in after] == [s["metadata"]["generation"] + 1 for s in slices]
        assert [s["spec"]["pool"]["generation"] for s in after] == [s["spec"]["pool"]["generation"] for s in slices]
        code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
        assert (code, out["cause"]) == (1, "device-unhealthy")
        held = f"gpu.nvidia.com/{node}/{device}"
        assert out["summary"].endswith(f"its driver reports a device it holds unhealthy: {held}")
        assert f"{held} carries taint gpu.nvidia.com/xid=79:NoSchedule" in out["evidence"]
        assert any(e.startswith(f"{namespace}/{claim['metadata']['name']} holds {held}") for e in out["evidence"])
    finally:
        assert _health(sandbox, node, device, "--xid", "79", "--clear") == 0
    assert "taints" not in guide.published_devices(kubectl)[(node, device)]
    assert "taints" not in before


def test_the_kubelets_device_health_in_pod_status(
    sandbox: Sandbox,
    kubectl: Kubectl,
    namespace: str,
    running: tuple[str, str, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    node, device, claim = running
    pod = _running(kubectl, namespace, "p")
    index = next(i for i, c in enumerate(pod["status"]["containerStatuses"]) if c["name"] == "c")
    health = [
        {
            "name": "claim:gpu",  # the pod's claim name, as the kubelet writes it
            "resources": [
                {
                    "resourceID": f"k8s.gpu.nvidia.com/claim={claim['metadata']['uid']}-{device}",  # a CDI id
                    "health": "Unhealthy",
                    "message": "XID 79: GPU has fallen off the bus",
                }
            ],
        }
    ]
    patch = [{"op": "add", "path": f"/status/containerStatuses/{index}/allocatedResourcesStatus", "value": health}]
    kubectl("patch", "pod", "p", "-n", namespace, "--subresource=status", "--type=json", "-p", json.dumps(patch))
    stored = guide.get_json(kubectl, "pod", "-n", namespace, "p")["status"]["containerStatuses"][index]
    assert stored["allocatedResourcesStatus"] == health  # ResourceHealthStatus keeps it

    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    held = f"gpu.nvidia.com/{node}/{device}"
    assert (code, out["cause"]) == (1, "device-unhealthy")
    assert out["summary"] == f"pod runs on {node}, but the kubelet reports a device it holds unhealthy: {held}"
    assert out["evidence"][0] == (
        f"{held} is Unhealthy: XID 79: GPU has fallen off the bus "
        f"(claim {namespace}/{claim['metadata']['name']}, container c)"
    )


def test_a_drivers_device_conditions_in_claim_status(
    sandbox: Sandbox,
    kubectl: Kubectl,
    namespace: str,
    running: tuple[str, str, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    node, device, claim = running
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = [
        {
            "driver": "gpu.nvidia.com",
            "pool": node,
            "device": device,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "XidError",
                    "message": "XID 48: double-bit ECC error",
                    "lastTransitionTime": now,
                }
            ],
        }
    ]
    name = claim["metadata"]["name"]
    patch = {"status": {"devices": status}}
    kubectl(
        "patch", "resourceclaim", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
    )

    code, out = _explain(sandbox, capsys, "pod", "p", "-n", namespace)
    held = f"gpu.nvidia.com/{node}/{device}"
    assert (code, out["cause"]) == (1, "device-unhealthy")
    assert (
        f"{held} ({namespace}/{name}) reports Ready=False (XidError: XID 48: double-bit ECC error)" in (out["evidence"])
    )

    assert cli.run(["inventory", "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER]) == 0
    text = capsys.readouterr().out
    section = text[text.index("device status (what drivers report in their claims' status.devices)") :]
    assert [node, device, f"{namespace}/{name}", "Ready=False"] == section.splitlines()[2].split()[:4]
