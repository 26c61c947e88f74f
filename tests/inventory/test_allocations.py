"""``fleetctl inventory`` shows who holds what: each allocated device's claim and pod, totals per model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleet.sandbox import Sandbox
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def test_allocated_devices_name_their_claim_and_pod(sandbox: Sandbox, kubectl: Kubectl, namespace: str) -> None:
    expr = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "two-l4"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "count": 2,
                            "selectors": [{"cel": {"expression": expr}}],
                        },
                    }
                ]
            }
        },
    }
    gpu_pod(kubectl, namespace, name="infer", claim="two-l4", also=(claim,))
    kubectl("wait", "-n", namespace, "pod/infer", "--for=condition=PodScheduled", "--timeout=60s")
    done = subprocess.run(
        [sys.executable, "-m", "fleetctl", "inventory", "--kubeconfig", str(sandbox.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    held = [r for r in rows if f"{namespace}/two-l4" in r]
    assert len(held) == 2
    # NODE DEVICE MODEL UUID CLAIM PODS TEAM (no team: the namespace is not a fleet team's)
    assert all(r[0] == "l4x4-01" and r[-3:] == [f"{namespace}/two-l4", "infer", "-"] for r in held)
    # total, allocated, shared, blocked (counters), tainted, free
    assert ["NVIDIA", "L4", "4", "2", "0", "0", "0", "2"] in rows
