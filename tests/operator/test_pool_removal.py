"""Removing a pool waits while ResourceClaims hold its nodes' GPUs (the guide's clean-up order)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import engine
from fleet.sandbox import Sandbox
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def test_pool_node_is_released_only_after_its_claims_are_gone(
    sandbox: Sandbox, tmp_path: Path, kubectl: Kubectl, namespace: str
) -> None:
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml")
    label = f"t-{repo.id}/pool"
    repo.pool(
        "l4",
        selector={"sandbox.fleet.gpufleet.dev/pool": "l4x4"},
        labels={label: "l4"},
        nodes=1,
        gpus=4,
        product="NVIDIA L4",
    )
    fleet = Engine(sandbox, repo)
    fleet.apply()
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "l4"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        },
    }
    gpu_pod(kubectl, namespace, name="serve", claim="l4", also=(claim,))
    kubectl("wait", "-n", namespace, "pod/serve", "--for=condition=PodScheduled", "--timeout=60s")

    repo.pools.clear()
    diff = {str(e.ref): e for e in fleet.diff().entries}
    assert diff["Node l4x4-01"].refused and f"{namespace}/l4 (pods serve)" in diff["Node l4x4-01"].error
    changes = {str(e.ref): e for e in fleet.apply(prune=True).entries}
    node = changes["Node l4x4-01"]
    assert node.refused and f"{namespace}/l4 (pods serve)" in node.error and "clean-up order" in node.error
    labels = json.loads(kubectl("get", "node", "l4x4-01", "-o", "json").stdout)["metadata"]["labels"]
    assert labels.get(label) == "l4"  # not released

    kubectl("delete", "-n", namespace, "pod/serve", "resourceclaim/l4", "--wait=true", "--timeout=60s")
    changes = {str(e.ref): e for e in fleet.apply(prune=True).entries}
    assert (changes["Node l4x4-01"].action, changes["Node l4x4-01"].error) == (engine.Action.DELETED, "")
    labels = json.loads(kubectl("get", "node", "l4x4-01", "-o", "json").stdout)["metadata"]["labels"]
    assert label not in labels
