"""The sandbox's CPU (system) node against the real control plane: a Job without tolerations runs
there and completes (KWOK moves Job pods to Succeeded), and preflight, inventory and the pools'
gates still see only the GPU nodes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from fleet.sandbox import Sandbox, credentials
from tests.conftest import Kubectl

pytestmark = pytest.mark.sandbox


def _job(namespace: str) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hook", "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]},
            },
        },
    }


def _wait(kubectl: Kubectl, *args: str, check: object, timeout: float = 90) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        got = json.loads(kubectl("get", *args, "-o", "json").stdout)
        if check(got):  # type: ignore[operator]
            return dict(got)
        assert time.monotonic() < deadline, f"not reached after {timeout:g}s: {json.dumps(got)[:2000]}"
        time.sleep(0.5)


def test_a_job_runs_on_the_system_node_and_completes(sandbox: Sandbox, kubectl: Kubectl, namespace: str) -> None:
    node = json.loads(kubectl("get", "node", "system-01", "-o", "json").stdout)
    assert not node["spec"].get("taints")
    kubectl("apply", "-f", "-", stdin=json.dumps(_job(namespace)))
    job = _wait(
        kubectl,
        "job",
        "hook",
        "-n",
        namespace,
        check=lambda j: any(
            c["type"] == "Complete" and c["status"] == "True" for c in (j.get("status") or {}).get("conditions") or ()
        ),
    )
    assert job["status"]["succeeded"] == 1  # type: ignore[index]
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-l", "job-name=hook", "-o", "json").stdout)["items"]
    assert [p["spec"]["nodeName"] for p in pods] == ["system-01"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]


def _fleetctl(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    kube = ["--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER]
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", *args, *kube], capture_output=True, text=True, timeout=120, check=False
    )


def test_preflight_inventory_and_gates_see_only_gpu_nodes(sandbox: Sandbox, kubectl: Kubectl) -> None:
    gpu_nodes = sum(sandbox.pools.values())
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert len(nodes) == gpu_nodes + sum(sandbox.cpu_pools.values())

    done = _fleetctl(sandbox, "preflight", "-o", "json")
    checks = {c["check"]: c for c in json.loads(done.stdout)}
    assert checks["gpu-nodes"]["ok"], checks
    assert checks["gpu-nodes"]["detail"].startswith(f"{gpu_nodes} GPU nodes by label")
    assert "system-01" not in json.dumps(checks)

    done = _fleetctl(sandbox, "inventory")
    assert done.returncode == 0, done.stderr
    assert f" devices on {gpu_nodes} nodes: " in done.stdout
    assert "system-01" not in done.stdout
