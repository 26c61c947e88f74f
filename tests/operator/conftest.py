"""Helpers for the GPU Operator lifecycle tests: the chart reference, the guide's values, a real
ClusterPolicy, and playing the operator on ``GPUCluster gpu-cluster``.

The fixtures (real helm, NVIDIA's chart on a loopback repository, ``cleanup_release``) live in
``tests/conftest.py``: the controller tests run the operator stage with them too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet import helm
from fleet.sandbox import charts
from tests import paths
from tests.conftest import NAMESPACE, RELEASE, Kubectl
from tests.operator.repos import OperatorRepo
from tests.waits import established

UPSTREAM = charts.Upstream(paths.GPU_OPERATOR)
"""NVIDIA/gpu-operator v26.7.0 (the chart served by ``chart_repo``; the played operator renders its manifests)."""


def chart(url: str, version: str = "v26.7.0") -> helm.ChartRef:
    return helm.ChartRef(repository=url, name=charts.CHART, version=version)


GUIDE_VALUES = {
    "clusterPolicy": {"deployCR": False},
    "gpuCluster": {"deployCR": True},
    "driver": {"nvidiaDriverCRD": {"enabled": True}},
    "draDriver": {"computeDomains": {"enabled": False}},
}


def cluster_policy(helm_binary: Path) -> dict[str, Any]:
    """The ClusterPolicy NVIDIA's chart renders with ``clusterPolicy.deployCR=true`` (its CRD requires a full spec)."""
    argv = [str(helm_binary), "template", RELEASE, str(UPSTREAM.chart), "-n", NAMESPACE]
    argv += ["--show-only", "templates/clusterpolicy.yaml", "--set", "clusterPolicy.deployCR=true"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    policy: dict[str, Any] = yaml.safe_load(done.stdout)
    return policy


def install_cluster_policy(kubectl: Kubectl, helm_binary: Path) -> None:
    """Create ClusterPolicy cluster-policy (and its CRD from the chart, if the cluster lacks it)."""
    crd = next(c for c in charts.crds(UPSTREAM.chart) if c["metadata"]["name"] == "clusterpolicies.nvidia.com")
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(crd))
    established(kubectl, "clusterpolicies.nvidia.com")
    kubectl("apply", "-f", "-", stdin=json.dumps(cluster_policy(helm_binary)))


def set_gpucluster(kubectl: Kubectl, state: str = "ready") -> None:
    """Play the operator: write GPUCluster gpu-cluster's status."""
    status = "True" if state == "ready" else "False"
    body = {
        "status": {
            "state": state,
            "namespace": NAMESPACE,
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": "Reconciled" if state == "ready" else "OperandNotReady",
                    "message": "" if state == "ready" else "Waiting for operand pods to be ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }
    kubectl("patch", "gpucluster", "gpu-cluster", "--subresource=status", "--type=merge", "-p", json.dumps(body))


__all__ = [
    "GUIDE_VALUES",
    "NAMESPACE",
    "RELEASE",
    "UPSTREAM",
    "chart",
    "cluster_policy",
    "install_cluster_policy",
    "set_gpucluster",
]


@pytest.fixture()
def op_repo(tmp_path: Path, chart_repo: str) -> OperatorRepo:
    """A fleet repository with a GPUOperator on the loopback chart repository and one team ``ml``."""
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    return repo
