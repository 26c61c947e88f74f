"""``fleetctl explain`` and ``fleetctl inventory`` read the real claim and slice, loaded into the sandbox.

The real node's Node, its ResourceSlice (owned by that Node), the pod and its claim with the
real allocation are created in the sandbox's API server; the claim's status is written as the
real scheduler wrote it. Two things change on the way: the namespace is the test's own (labelled
as ml-research's, as fleet renders the team's namespaces), and the pod names its claim
(``resourceClaimName``) where the real pod named the template, since the ResourceClaim
controller would otherwise make a second claim. The CLI must name the device, its uuid, the pod
and the team.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from fleet.sandbox import Sandbox
from tests.conftest import Kubectl
from tests.realgpu import capture

pytestmark = pytest.mark.sandbox

NODE = "gpu-real-01"


def _apply(kubectl: Kubectl, obj: dict[str, Any]) -> dict[str, Any]:
    done = kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(obj))
    return dict(json.loads(done.stdout))


@pytest.fixture()
def loaded(kubectl: Kubectl, namespace: str) -> Iterator[str]:
    """The real node, slice, pod and allocated claim in ``namespace``; the claim's name."""
    kubectl("label", "namespace", namespace, "fleet.gpufleet.dev/team=ml-research")
    node = _apply(
        kubectl,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE,
                "labels": {"kubernetes.io/hostname": NODE, "type": "kwok"},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
        },
    )
    try:
        [item] = capture.slices()
        item["metadata"] = {
            "name": item["metadata"]["name"],
            "ownerReferences": [{**item["metadata"]["ownerReferences"][0], "uid": node["metadata"]["uid"]}],
        }
        _apply(kubectl, item)
        claim = capture.claim()
        real_pod = capture.pod()
        container = real_pod["spec"]["containers"][0]
        pod = _apply(
            kubectl,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": real_pod["metadata"]["name"], "namespace": namespace},
                "spec": {
                    "nodeName": real_pod["spec"]["nodeName"],
                    "tolerations": real_pod["spec"]["tolerations"],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}],
                    "containers": [
                        {"name": container["name"], "image": container["image"], "resources": container["resources"]}
                    ],
                },
            },
        )
        owner = {**claim["metadata"]["ownerReferences"][0], "uid": pod["metadata"]["uid"]}
        meta = {k: claim["metadata"][k] for k in ("name", "annotations")}
        _apply(
            kubectl,
            {
                **{k: claim[k] for k in ("apiVersion", "kind", "spec")},
                "metadata": {**meta, "namespace": namespace, "ownerReferences": [owner]},
            },
        )
        reserved = [{**claim["status"]["reservedFor"][0], "uid": pod["metadata"]["uid"]}]
        status = {"status": {"allocation": claim["status"]["allocation"], "reservedFor": reserved}}
        kubectl(
            "patch", "resourceclaim", meta["name"], "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps(status),
        )  # fmt: skip
        yield str(meta["name"])
    finally:
        kubectl("delete", "pod", "--all", "-n", namespace, "--grace-period=0", "--force", check=False)
        kubectl("delete", "resourceslice", "--field-selector", f"spec.nodeName={NODE}", check=False)
        kubectl("delete", "node", NODE, check=False)


def fleetctl(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "fleetctl", *args, "--kubeconfig", str(sandbox.kubeconfig)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_explain_names_device_uuid_pod_and_team(sandbox: Sandbox, namespace: str, loaded: str) -> None:
    uuid = capture.device()["attributes"]["uuid"]["string"]
    assert capture.nvidia_smi_uuids() == [uuid]
    done = fleetctl(sandbox, "explain", "pod", "gpu-pod", "-n", namespace, "-o", "json")
    assert done.returncode == 0, done.stderr
    cause = json.loads(done.stdout)
    assert cause["cause"] == "scheduled"
    assert cause["evidence"] == [
        f"{namespace}/{loaded} holds gpu.nvidia.com/gpu-real-01/gpu-0 on gpu-real-01 (NVIDIA H100 80GB HBM3, "
        f"uuid {uuid}), reserved for gpu-pod, team ml-research"
    ]
    done = fleetctl(sandbox, "explain", "claim", loaded, "-n", namespace, "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == cause  # a claim is explained through the pod that uses it


def test_inventory_names_device_uuid_pod_and_team(sandbox: Sandbox, namespace: str, loaded: str) -> None:
    done = fleetctl(sandbox, "inventory")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(NODE)]
    uuid = capture.device()["attributes"]["uuid"]["string"]
    assert ["gpu-real-01", "gpu-0", "NVIDIA", "H100", "80GB", "HBM3", uuid, f"{namespace}/{loaded}", "gpu-pod",
            "ml-research"] in rows  # fmt: skip
