"""``fleetctl validate --context``: satisfiability on the live ResourceSlices of the sandbox control plane."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleet.sandbox import Sandbox, credentials
from tests import waits
from tests.manifests.repos import EXAMPLE
from tests.sandbox import guide
from tests.validate.test_cli import fleetctl

pytestmark = pytest.mark.sandbox
H200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"


def test_templates_against_the_sandbox_devices(sandbox: Sandbox) -> None:
    result = fleetctl(
        "validate",
        str(EXAMPLE),
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
        "--cluster",
        "gpu-east",
        env={"NO_COLOR": "1"},
    )
    lines = result.stdout.splitlines()
    rows = {
        line.split(" (")[0].strip(): line.rsplit("): ", 1)[1].split(", ", 3)[:3]
        for line in lines
        if line.startswith("  gpu-east:")
    }
    h100 = sandbox.pools.get("h100x8", 0)
    h200 = sandbox.pools.get("h200x8", 0)
    assert (
        ", ".join(rows["gpu-east: ResourceClaimTemplate/ml-research/h100-gpu"])
        == f"{h100} node(s), {8 * h100} device(s), {8 * h100} at once"
    )
    assert (
        ", ".join(rows["gpu-east: ResourceClaimTemplate/inference/hopper-large-memory"])
        == f"{h200} node(s), {8 * h200} device(s), {8 * h200} at once"
    )
    assert result.returncode == 0, result.stdout


def test_unreachable_context_is_a_usage_error(sandbox: Sandbox) -> None:
    result = fleetctl(
        "validate", str(EXAMPLE), "--kubeconfig", str(sandbox.kubeconfig), "--context", "nope", "--cluster", "gpu-east"
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: context nope:")  # a clear usage error, not a traceback


def test_fits_now_subtracts_what_live_claims_hold(
    sandbox: Sandbox, kubectl: Callable[..., Any], namespace: str
) -> None:
    """Hold every H200 with pods; the H200-only template still fits ever, but 0 now, blocked by those claims."""
    h200 = sandbox.pools.get("h200x8", 0)
    assert h200, "the default sandbox profile has H200 nodes"
    hold = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "hold-h200", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "count": 8,
                                "selectors": [{"cel": {"expression": H200}}],
                            },
                        }
                    ]
                }
            }
        },
    }
    pods = [guide.pod(f"hold-{i}", template="hold-h200", namespace=namespace) for i in range(h200)]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [hold, *pods]}))
    waits.wait_for(
        lambda: list(guide.pod_phases(kubectl, namespace).values()).count("Running") == h200,
        within=180,
        what="pods holding every H200",
    )
    result = fleetctl(
        "validate",
        str(EXAMPLE),
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
        "--cluster",
        "gpu-east",
        "-o",
        "json",
    )
    document = json.loads(result.stdout)
    rows = {r["object"]: r for r in document["satisfaction"] if r["source"].startswith("live context")}
    hopper = rows["ResourceClaimTemplate/inference/hopper-large-memory"]
    assert (hopper["capacity"], hopper["now"]) == (8 * h200, 0)
    h100 = rows["ResourceClaimTemplate/ml-research/h100-gpu"]
    assert h100["now"] == h100["capacity"] > 0  # nothing holds an H100 here
    (blocked,) = [f for f in document["findings"] if f["rule"] == "claim-blocked"]
    assert blocked["severity"] == "warning"
    assert blocked["file"].endswith("teams/inference/hopper-large-memory.yaml")
    holders = sorted(c["metadata"]["name"] for c in guide.get_json(kubectl, "resourceclaims", "-n", namespace)["items"])
    assert all(f"{namespace}/{name}" in blocked["message"] for name in holders), blocked["message"]
    assert result.returncode == 0, result.stdout  # a warning: it fits once they are released


def test_a_maintenance_is_judged_on_the_live_devices_and_the_nodes_labels(sandbox: Sandbox, tmp_path: Path) -> None:
    """The example's h200 pool, by the sandbox nodes' instance-type label: taking it whole strands the
    H200-only template (an error), a node that publishes nothing is one too; nothing is written."""
    h200 = sandbox.pools.get("h200x8", 0)
    assert h200, "the default sandbox profile has H200 nodes"
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    folder = repo / "clusters" / "gpu-east" / "maintenance"
    folder.mkdir(parents=True)
    head = "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: GPUMaintenance\nmetadata: {name: NAME}\nspec:\n"
    (folder / "h200.yaml").write_text(head.replace("NAME", "h200") + "  reason: r\n  devices: {pools: [h200]}\n")
    (folder / "gone.yaml").write_text(head.replace("NAME", "gone") + "  reason: r\n  devices: {nodes: [gone-1]}\n")
    result = fleetctl(
        "validate",
        str(repo),
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
        "--cluster",
        "gpu-east",
        "-o",
        "json",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    found = {(f["file"].rsplit("/", 1)[-1], f["rule"]): f for f in json.loads(result.stdout)["findings"]}
    pool = found[("h200.yaml", "maintenance-full-pool")]
    assert "ResourceClaimTemplate/inference/hopper-large-memory" in pool["message"]
    assert pool["message"].endswith(f"(devices: live context {credentials.CLUSTER})")
    assert found[("gone.yaml", "maintenance-devices")]["severity"] == "error"
    assert not any(rule == "maintenance-api" for _, rule in found)  # the sandbox runs 1.37, as its /version says
