"""``fleetctl validate`` and per-cluster feature gates: declared (pure CLI) and seen on a live cluster.

With ``--context`` the gates come from what the cluster keeps in a server-side dry run
(``fleet.engine.probes``), not from what its Cluster declares: the sandbox runs
Kubernetes 1.36.3 with default gates, so a Cluster declaring 1.35 is corrected by the probes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet import kube
from fleet.engine import probes
from fleet.manifests import read_revision
from fleet.policy import featuregates, gateprobes
from fleet.sandbox import Sandbox, clusters, credentials, profiles
from tests.manifests.repos import EXAMPLE
from tests.validate.test_cli import fleetctl

TOLERATIONS = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: tolerant
  namespace: ml-research
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          tolerations:
          - {key: gpu.nvidia.com/xid, operator: Exists, effect: NoSchedule}
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    (target / "teams" / "ml-research" / "tolerant.yaml").write_text(TOLERATIONS)
    return target


def set_version(repo: Path, cluster: str, version: str) -> None:
    path = repo / "clusters" / f"{cluster}.yaml"
    path.write_text(path.read_text().replace('kubernetesVersion: "1.36"', f'kubernetesVersion: "{version}"'))


def test_validate_a_repo_with_a_1_34_cluster(repo: Path) -> None:
    set_version(repo, "gpu-west", "1.34")
    result = fleetctl("validate", str(repo), "-o", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    findings = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "feature-gate"]
    where = sorted((f["file"].split("repo/")[1], f["line"], f["cluster"]) for f in findings)
    assert where == [
        ("deviceclasses/gpu.nvidia.com.yaml", 17, "gpu-west"),
        ("teams/ml-research/tolerant.yaml", 13, "gpu-west"),
    ]
    by_file = {f["file"].split("repo/")[1]: f for f in findings}
    extended = by_file["deviceclasses/gpu.nvidia.com.yaml"]
    assert "DRAExtendedResource" in extended["message"] and "cluster gpu-west (Kubernetes 1.34)" in extended["message"]
    assert "on by default from 1.36" in extended["message"]
    assert extended["hint"].startswith("upgrade gpu-west to 1.36 or later")
    assert "DRADeviceTaints" in by_file["teams/ml-research/tolerant.yaml"]["message"]

    text = fleetctl("validate", str(repo), "--cluster", "gpu-east", env={"NO_COLOR": "1"})
    assert text.returncode == 0, text.stdout  # gpu-east is 1.36: both fields are kept there


@pytest.mark.sandbox
def test_context_uses_the_gates_the_cluster_shows_not_the_declared_ones(sandbox: Sandbox, repo: Path) -> None:
    set_version(repo, "gpu-east", "1.35")
    declared = fleetctl("validate", str(repo), "--cluster", "gpu-east", env={"NO_COLOR": "1"})
    assert declared.returncode == 1 and "feature-gate" in declared.stdout
    live = fleetctl(
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
    assert live.returncode == 0, live.stdout + live.stderr
    findings = json.loads(live.stdout)["findings"]
    assert [f["rule"] for f in findings] == ["cluster-version"]
    assert findings[0]["message"] == (
        f"cluster gpu-east declares Kubernetes 1.35, but the live context {credentials.CLUSTER} runs 1.36"
    )


@pytest.mark.sandbox
async def test_the_probes_see_every_probed_gate_on_in_1_36(sandbox: Sandbox, admin_client: kube.Client) -> None:
    declared = declared_features(EXAMPLE, "gpu-east", minor=35)
    seen = await probes.observe(admin_client, declared=declared)
    assert seen.minor == 36 and seen.declared_minor == 35
    assert {p.gate for p in gateprobes.PROBES} <= seen.enabled
    assert "resource.k8s.io/v1" in seen.apis
    assert "DRADeviceTaintRules" not in seen.enabled  # not probed: off by default in 1.36, not declared


def declared_features(repo: Path, cluster: str, *, minor: int) -> featuregates.ClusterFeatures:
    revision = read_revision(repo)
    [manifest] = [m for m in revision.of_kind("Cluster") if m.name == cluster]
    found = featuregates.declared(manifest)
    assert found is not None
    return featuregates.ClusterFeatures(
        cluster=found.cluster, file=found.file, minor=minor, enabled=featuregates.effective(minor, {})
    )


OFF = ("DRAExtendedResource", "DRADeviceTaints", "DRAPrioritizedList")


@pytest.fixture(scope="module")
def gates_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A small sandbox of its own whose kube-apiserver runs with some DRA gates off."""
    directory = tmp_path_factory.mktemp("gates-off")
    flag = "--feature-gates=" + ",".join(f"{g}=false" for g in OFF)
    with pytest.MonkeyPatch.context() as patch:
        # the binaries where fleetctl sandbox build puts them, not the session's plan-cache folder
        patch.delenv("FLEET_CACHE_DIR", raising=False)
        sb = clusters.up(directory=directory, profile=profiles.parse({"pools": {"l4x1": 1}}), apiserver_flags=(flag,))
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


@pytest.mark.sandbox
async def test_the_probes_see_gates_the_api_server_runs_without(gates_off: Sandbox, anyio_backend: str) -> None:
    client = await kube.connect(kubeconfig=str(gates_off.kubeconfig), context=credentials.CLUSTER)
    try:
        declared = declared_features(EXAMPLE, "gpu-east", minor=36)
        seen = await probes.observe(client, declared=declared)
    finally:
        await client.close()
    assert seen.enabled.isdisjoint(OFF)
    assert {"DRAAdminAccess", "DRAConsumableCapacity", "DRAPartitionableDevices"} <= seen.enabled
    messages = [
        f.message
        for f in featuregates.check(
            [m for m in read_revision(EXAMPLE).manifests if m.kind == "DeviceClass"], features=seen
        )
    ]
    assert messages == [
        "extendedResourceName needs feature gate DRAExtendedResource: cluster gpu-east (Kubernetes 1.36) drops it "
        f"without an error, because DRAExtendedResource is off there, as seen on the live context "
        f"{credentials.CLUSTER} (on by default from 1.36)"
    ]
