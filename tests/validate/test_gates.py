"""``fleetctl validate`` and per-cluster feature gates: declared (pure CLI) and seen on a live cluster.

With ``--context`` the gates come from what the cluster keeps in a server-side dry run
(``fleet.engine.probes``), not from what its Cluster declares: a Cluster declaring another minor
than the sandbox runs is corrected by the probes. These are DRA version tests: they run on every
release ``release_sandbox`` gives (the session's, and ``FLEET_TEST_KUBERNETES_EXTRA``'s), so the
whole file runs last, with the extras.
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
from fleet.sandbox import Sandbox, clusters, credentials, profiles, releases
from tests.conftest import releases_under_test
from tests.manifests.repos import EXAMPLE
from tests.validate.test_cli import fleetctl

pytestmark = pytest.mark.extras("kubernetes")

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
def test_context_uses_the_gates_the_cluster_shows_not_the_declared_ones(release_sandbox: Sandbox, repo: Path) -> None:
    runs = release_sandbox.release.name
    set_version(repo, "gpu-east", "1.35" if runs != "1.35" else "1.34")
    declared = fleetctl("validate", str(repo), "--cluster", "gpu-east", env={"NO_COLOR": "1"})
    assert declared.returncode == 1 and "feature-gate" in declared.stdout
    live = fleetctl(
        "validate",
        str(repo),
        "--kubeconfig",
        str(release_sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
        "--cluster",
        "gpu-east",
        "-o",
        "json",
    )
    assert live.returncode == 0, live.stdout + live.stderr
    findings = json.loads(live.stdout)["findings"]
    assert {f["rule"] for f in findings} == {"cluster-version"}, findings  # no feature-gate finding
    declares = "1.35" if runs != "1.35" else "1.34"
    assert (
        f"cluster gpu-east declares Kubernetes {declares}, but the live context {credentials.CLUSTER} runs {runs}"
        in [f["message"] for f in findings]
    )


@pytest.mark.sandbox
async def test_the_probes_see_every_probed_gate_on(release_sandbox: Sandbox, anyio_backend: str) -> None:
    minor = release_sandbox.release.minor
    other = 35 if minor != 35 else 34
    client = await kube.connect(kubeconfig=str(release_sandbox.kubeconfig), context=credentials.CLUSTER)
    try:
        seen = await probes.observe(client, declared=declared_features(EXAMPLE, "gpu-east", minor=other))
    finally:
        await client.close()
    assert seen.minor == minor and seen.declared_minor == other
    assert {p.gate for p in gateprobes.PROBES} <= seen.enabled  # the sandbox turns every DRA gate on
    assert "resource.k8s.io/v1" in seen.apis
    # DRADeviceTaintRules is not probed: taken as the live minor's default, whatever the sandbox runs
    assert ("DRADeviceTaintRules" in seen.enabled) == ("DRADeviceTaintRules" in featuregates.effective(minor, {}))


def declared_features(repo: Path, cluster: str, *, minor: int) -> featuregates.ClusterFeatures:
    revision = read_revision(repo)
    [manifest] = [m for m in revision.of_kind("Cluster") if m.name == cluster]
    found = featuregates.declared(manifest)
    assert found is not None
    return featuregates.ClusterFeatures(
        cluster=found.cluster, file=found.file, minor=minor, enabled=featuregates.effective(minor, {})
    )


OFF = ("DRAConsumableCapacity", "DRADeviceBindingConditions")
"""Gates off on the API server of ``gates_off``: unlocked in 1.34 to 1.37 (alpha or beta; read from
each release's ``kube_features.go``), and no gate on by default depends on them there."""


def switched_off(release: releases.Release) -> list[str]:
    """``OFF`` and every gate the sandbox turns on that depends on one of them: Kubernetes refuses to
    start with a gate whose dependency is off."""
    off = set(OFF)
    while grown := {g for g in release.feature_gates if g not in off and set(featuregates.GATES[g].depends) & off}:
        off |= grown
    return sorted(off)


@pytest.fixture(scope="module", params=releases_under_test(), ids=lambda release: release.name)
def gates_off(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A small sandbox of its own whose kube-apiserver runs with some DRA gates off."""
    release: releases.Release = request.param
    directory = tmp_path_factory.mktemp(f"gates-off-{release.name}")
    flag = "--feature-gates=" + ",".join(f"{g}=false" for g in switched_off(release))
    with pytest.MonkeyPatch.context() as patch:
        # the binaries where fleetctl sandbox build puts them, not the session's plan-cache folder
        patch.delenv("FLEET_CACHE_DIR", raising=False)
        sb = clusters.up(
            directory=directory,
            profile=profiles.parse({"pools": {"l4x1": 1}}),
            apiserver_flags=(flag,),
            release=release,
        )
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


CAPACITY = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: shared
  namespace: ml-research
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          capacity:
            requests:
              memory: 10Gi
"""


@pytest.mark.sandbox
async def test_the_probes_see_gates_the_api_server_runs_without(
    gates_off: Sandbox, repo: Path, anyio_backend: str
) -> None:
    minor = gates_off.release.minor
    client = await kube.connect(kubeconfig=str(gates_off.kubeconfig), context=credentials.CLUSTER)
    try:
        declared = declared_features(EXAMPLE, "gpu-east", minor=minor)
        seen = await probes.observe(client, declared=declared)
    finally:
        await client.close()
    assert seen.minor == minor
    assert seen.enabled.isdisjoint(OFF)
    assert {"DRAAdminAccess", "DRAExtendedResource", "DRAPartitionableDevices", "DRADeviceTaints"} <= seen.enabled
    (repo / "teams" / "ml-research" / "shared.yaml").write_text(CAPACITY)
    templates = [m for m in read_revision(repo).manifests if m.kind == "ResourceClaimTemplate"]
    messages = [f.message for f in featuregates.check(templates, features=seen)]
    assert messages == [
        f"request 'gpu' capacity needs feature gate DRAConsumableCapacity: cluster gpu-east (Kubernetes 1.{minor}) "
        f"drops it without an error, because DRAConsumableCapacity is off there, as seen on the live context "
        f"{credentials.CLUSTER} (on by default from 1.36)"
    ]
