"""``fleetctl preflight`` against the sandbox: passes, then fails with the right hint when a
ClusterPolicy appears and when a pool's node loses its ResourceSlices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, charts, clusters, credentials, profiles
from fleetctl import cli
from tests.apply.repos import Repo
from tests.conftest import Kubectl

pytestmark = pytest.mark.sandbox


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    """A fleet whose pool is the sandbox's two H100 nodes (driver 580)."""
    r = Repo(root=tmp_path / "repo")
    r.team("ml", namespaces=["ml"], group="ml")
    r.pool("h100", selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"}, labels={f"t-{r.id}": "h100"}, nodes=2)
    return r


def _preflight(
    sandbox: Sandbox, repo: Repo, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, dict[str, str]]]:
    code = cli.run(
        [
            "preflight",
            str(repo.write()),
            "--cluster",
            repo.cluster,
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            credentials.CLUSTER,
            "-o",
            "json",
        ]
    )
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)}
    return code, checks


def test_preflight_passes_then_names_a_clusterpolicy(
    sandbox: Sandbox, kubectl: Kubectl, repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checks = _preflight(sandbox, repo, capsys)
    assert code == 0, checks
    assert list(checks) == [
        "kubernetes-version",
        "dra-api",
        "no-clusterpolicy",
        "gpu-nodes",
        "driver-version",
        "pool-inventory",
    ]
    assert checks["gpu-nodes"]["detail"] == "2 GPU nodes by the pools' node selectors"

    crd = next(c for c in charts.crds("v26.7.0") if c["metadata"]["name"] == "clusterpolicies.nvidia.com")
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(crd))
    kubectl("wait", "--for=condition=Established", "crd/clusterpolicies.nvidia.com", "--timeout=60s")
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}}
    kubectl("apply", "-f", "-", stdin=json.dumps({**policy, "spec": {}}))
    try:
        code, checks = _preflight(sandbox, repo, capsys)
    finally:
        kubectl("delete", "clusterpolicy", "cluster-policy")
    assert code == 1
    assert checks["no-clusterpolicy"]["ok"] is False
    assert checks["no-clusterpolicy"]["detail"] == "ClusterPolicy cluster-policy exists"
    assert "do not convert in place" in checks["no-clusterpolicy"]["hint"]


def test_preflight_fails_when_a_pool_node_loses_its_slices(
    sandbox: Sandbox, kubectl: Kubectl, repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl("delete", "resourceslices", "--field-selector", "spec.nodeName=h100x8-02")
    try:
        code, checks = _preflight(sandbox, repo, capsys)
    finally:
        clusters.publish_gpus(sandbox, profiles.Profile(pools=dict(sandbox.pools)))
    assert code == 1
    assert checks["pool-inventory"]["ok"] is False
    assert (
        "Node h100x8-02: no ResourceSlice from driver gpu.nvidia.com (pool h100 expects 8 GPUs)"
        in (checks["pool-inventory"]["detail"])
    )
    assert "kubelet plugin" in checks["pool-inventory"]["hint"]
    assert checks["driver-version"]["detail"] == "no driverVersion published: h100x8-02"


def test_preflight_without_a_repository_reports_old_drivers(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default sandbox has A100 nodes with driver 570: the guide needs 580, so the check fails, naming them."""
    code = cli.run(["preflight", "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER])
    out = capsys.readouterr().out
    assert code == 1
    assert "driver-version      FAIL    driver < 580: a100-mig-01 (570.172.8), a100x8-01 (570.172.8)" in out
    assert "hint: install NVIDIA driver 580 or later" in out
