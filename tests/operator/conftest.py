"""Fixtures for the GPU Operator lifecycle: the stand-in chart on a loopback repository, real helm,
and a stand-in operator that marks ``GPUCluster gpu-cluster`` Ready as the real controller would.

The operator's objects are cluster-wide (CRDs, the GPUCluster singleton, DeviceClasses), so every
test that installs the release uninstalls it afterwards (``release`` fixture).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet import helm
from fleet.sandbox import Sandbox, binaries, charts, credentials
from tests.conftest import Kubectl

RELEASE = "gpu-operator"
NAMESPACE = "gpu-operator"


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    found = binaries.locate()
    if found is None:
        pytest.fail("the sandbox binaries are not built (run `fleetctl sandbox build`)")
    return found["helm"]


@pytest.fixture(scope="session")
def chart_repo(tmp_path_factory: pytest.TempPathFactory, helm_binary: Path) -> Iterator[str]:
    """URL of a Helm repository on 127.0.0.1 serving the stand-in gpu-operator chart."""
    with charts.serve(tmp_path_factory.mktemp("charts"), helm=helm_binary) as url:
        yield url


@pytest.fixture(scope="session")
def helm_settings(sandbox: Sandbox, helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> helm.Settings:
    return helm.Settings(
        binary=helm_binary,
        kubeconfig=str(sandbox.kubeconfig),
        context=credentials.CLUSTER,
        home=tmp_path_factory.mktemp("helm-home"),
        timeout=120,
    )


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


@pytest.fixture()
def cleanup_release(kubectl: Kubectl, helm_settings: helm.Settings) -> Iterator[None]:
    """Uninstall the operator release and its leftovers after the test (cluster-wide objects)."""
    yield
    import subprocess

    env_args = ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(helm_settings.kubeconfig)]
    subprocess.run(
        [str(helm_settings.binary), "uninstall", RELEASE, "-n", NAMESPACE, "--wait", *env_args],
        capture_output=True,
        timeout=120,
        check=False,
    )
    kubectl("delete", "gpucluster", "--all", "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "clusterpolicy", "--all", "--ignore-not-found", check=False)
    kubectl("delete", "configmap", "-n", NAMESPACE, "gpu-operator-cleanup-ran", "--ignore-not-found", check=False)
