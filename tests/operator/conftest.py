"""Helpers for the GPU Operator lifecycle tests: the chart reference, the guide's values, and playing
the operator on ``GPUCluster gpu-cluster``.

The fixtures (real helm, the stand-in chart on a loopback repository, ``cleanup_release``) live in
``tests/conftest.py``: the controller tests run the operator stage with them too.
"""

from __future__ import annotations

import json

from fleet import helm
from fleet.sandbox import charts
from tests.conftest import NAMESPACE, RELEASE, Kubectl


def chart(url: str, version: str = "v26.7.0") -> helm.ChartRef:
    return helm.ChartRef(repository=url, name=charts.CHART, version=version)


GUIDE_VALUES = {
    "clusterPolicy": {"deployCR": False},
    "gpuCluster": {"deployCR": True},
    "driver": {"nvidiaDriverCRD": {"enabled": True}},
    "draDriver": {"computeDomains": {"enabled": False}},
}


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


__all__ = ["GUIDE_VALUES", "NAMESPACE", "RELEASE", "chart", "set_gpucluster"]
