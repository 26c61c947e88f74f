"""``nvidia.com/gpu`` through DRA (DRAExtendedResource) on the sandbox's real scheduler and quota.

A pod asking ``resources.limits: {nvidia.com/gpu: 1}`` gets a device of the
``gpu.nvidia.com`` class (whose ``extendedResourceName`` is ``nvidia.com/gpu``): the
real kube-scheduler writes a ResourceClaim for it, and the team quota fleet renders
(``fleet.engine.renders.quota_keys``) counts it, so a second pod beyond the quota is
refused by the real ResourceQuota admission, and so is a claim.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from fleet.engine import renders
from fleet.sandbox import Sandbox, gpus
from tests import waits
from tests.sandbox.guide import get_json, published_devices

pytestmark = pytest.mark.sandbox
Kubectl = Callable[..., Any]


def extended_pod(name: str, *, gpus_wanted: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {"name": "c", "image": "ubuntu:22.04", "resources": {"limits": {"nvidia.com/gpu": gpus_wanted}}}
            ],
        },
    }


def test_kwok_nodes_do_not_advertise_nvidia_gpu(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """An extended resource goes through DRA only on nodes that do not also advertise it (device plugin)."""
    nodes = get_json(kubectl, "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    assert nodes
    for node in nodes:
        assert "nvidia.com/gpu" not in node["status"].get("allocatable", {})
        assert "nvidia.com/gpu" not in node["status"].get("capacity", {})
    live = get_json(kubectl, "deviceclass", "gpu.nvidia.com")
    assert live["spec"]["extendedResourceName"] == gpus.EXTENDED_RESOURCE == "nvidia.com/gpu"


def team_quota(kubectl: Kubectl, namespace: str, devices: int) -> dict[str, str]:
    """The ResourceQuota fleet renders for a team with ``quota: {gpu.nvidia.com: devices}``, in force."""
    hard = renders.quota_keys({"gpu.nvidia.com": devices}, extended={"gpu.nvidia.com": "nvidia.com/gpu"})
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": renders.QUOTA_NAME},
        "spec": {"hard": hard},
    }
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(quota))
    waits.wait_for(
        lambda: get_json(kubectl, "resourcequota", "-n", namespace, renders.QUOTA_NAME).get("status", {}).get("hard"),
        what="the quota controller to take the quota",
    )
    return hard


CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "claim"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
}


def test_pod_asking_nvidia_gpu_gets_a_dra_device_and_the_quota_counts_it(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str
) -> None:
    hard = team_quota(kubectl, namespace, 1)

    kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(extended_pod("first")))
    pod = waits.wait_for(
        lambda: (
            (p := get_json(kubectl, "pod", "-n", namespace, "first"))["spec"].get("nodeName")
            and (p.get("status", {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
            and p
        ),
        what="the scheduler to bind the pod and write its extended-resource claim",
    )
    status = pod["status"]["extendedResourceClaimStatus"]
    assert [(n["containerName"], n["resourceName"]) for n in status["requestMappings"]] == [("c", "nvidia.com/gpu")]
    claim = get_json(kubectl, "resourceclaim", "-n", namespace, status["resourceClaimName"])
    [request] = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "gpu.nvidia.com" and result["pool"] == pod["spec"]["nodeName"]
    device = published_devices(kubectl)[(result["pool"], result["device"])]
    assert device["attributes"]["type"] == {"string": "gpu"}

    used = waits.wait_for(
        lambda: (
            (
                u := get_json(kubectl, "resourcequota", "-n", namespace, renders.QUOTA_NAME)["status"].get("used", {})
            ).get("gpu.nvidia.com.deviceclass.resource.k8s.io/devices")
            == "1"
            and u
        ),
        what="the quota to count the claim",
    )
    assert used == {key: "1" for key in hard}

    refused = kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(extended_pod("second")), check=False)
    assert refused.returncode != 0
    assert "exceeded quota" in refused.stderr and "requests.nvidia.com/gpu" in refused.stderr

    refused = kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(CLAIM), check=False)
    assert refused.returncode != 0
    assert "exceeded quota" in refused.stderr


def test_a_claim_counts_against_the_extended_resource_key_too(
    sandbox: Sandbox, kubectl: Kubectl, namespace: str
) -> None:
    """A claim of the class takes the quota's one device: a pod asking nvidia.com/gpu is then refused."""
    hard = team_quota(kubectl, namespace, 1)
    kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(CLAIM))
    used = get_json(kubectl, "resourcequota", "-n", namespace, renders.QUOTA_NAME)["status"]["used"]
    assert used == {key: "1" for key in hard}
    refused = kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(extended_pod("late")), check=False)
    assert refused.returncode != 0
    assert "exceeded quota" in refused.stderr and "requests.nvidia.com/gpu" in refused.stderr
