"""``fleetctl preflight`` against the sandbox: passes, then fails with the right hint when a
ClusterPolicy appears, when a separate ``dra-driver-nvidia-gpu`` release runs (the real 0.4.1 chart,
``tests/data/charts``; the same hint as apply's refusal), when a pool's node loses its
ResourceSlices, and about the driver the operator will install when it manages the driver."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleet import helm
from fleet.sandbox import Sandbox, clusters, credentials, profiles
from fleetctl import cli
from tests.apply.repos import Repo
from tests.conftest import Kubectl
from tests.operator.conftest import install_cluster_policy
from tests.operator.repos import OperatorRepo
from tests.paths import CHARTS

pytestmark = pytest.mark.sandbox


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    """A fleet whose pool is the sandbox's two H100 nodes (driver 580)."""
    r = Repo(root=tmp_path / "repo")
    r.team("ml", namespaces=["ml"], group="ml")
    r.pool("h100", selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"}, labels={f"t-{r.id}": "h100"}, nodes=2)
    return r


def _preflight(
    sandbox: Sandbox, repo: Repo, capsys: pytest.CaptureFixture[str], helm_binary: Path
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
            "--helm",
            str(helm_binary),
            "-o",
            "json",
        ]
    )
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)}
    return code, checks


def test_preflight_passes_then_names_a_clusterpolicy(
    sandbox: Sandbox, kubectl: Kubectl, repo: Repo, capsys: pytest.CaptureFixture[str], helm_binary: Path
) -> None:
    code, checks = _preflight(sandbox, repo, capsys, helm_binary)
    assert code == 0, checks
    assert list(checks) == [
        "kubernetes-version",
        "dra-api",
        "no-clusterpolicy",
        "no-dra-driver-release",
        "gpu-nodes",
        "driver-version",
        "pool-inventory",
    ]
    assert checks["gpu-nodes"]["detail"] == "2 GPU nodes by the pools' node selectors"

    install_cluster_policy(kubectl, helm_binary)
    try:
        code, checks = _preflight(sandbox, repo, capsys, helm_binary)
    finally:
        kubectl("delete", "clusterpolicy", "cluster-policy")
    assert code == 1
    assert checks["no-clusterpolicy"]["ok"] is False
    assert checks["no-clusterpolicy"]["detail"] == "ClusterPolicy cluster-policy exists"
    assert "do not convert in place" in checks["no-clusterpolicy"]["hint"]


def test_preflight_fails_when_a_pool_node_loses_its_slices(
    sandbox: Sandbox, kubectl: Kubectl, repo: Repo, capsys: pytest.CaptureFixture[str], helm_binary: Path
) -> None:
    kubectl("delete", "resourceslices", "--field-selector", "spec.nodeName=h100x8-02")
    try:
        code, checks = _preflight(sandbox, repo, capsys, helm_binary)
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
    line = next(row for row in out.splitlines() if row.startswith("driver-version "))
    assert line.split(None, 2)[1:] == ["FAIL", "driver < 580: a100-mig-01 (570.172.8), a100x8-01 (570.172.8)"]
    assert "hint: install NVIDIA driver 580 or later" in out


def _helm(settings: helm.Settings, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(settings.binary),
        *args,
        "--kube-context",
        credentials.CLUSTER,
        "--kubeconfig",
        str(settings.kubeconfig),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.usefixtures("cleanup_release")
def test_a_separate_dra_driver_release_fails_preflight_with_the_hint_apply_gives(
    sandbox: Sandbox,
    kubectl: Kubectl,
    tmp_path: Path,
    chart_repo: str,
    helm_settings: helm.Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    code, checks = _preflight(sandbox, repo, capsys, helm_settings.binary)
    assert checks["no-dra-driver-release"]["ok"] is True, checks

    # The real standalone driver chart (kubernetes-sigs/dra-driver-nvidia-gpu 0.4.1), its GPU
    # DeviceClasses off: the sandbox has installed them already, as the operator would.
    chart = CHARTS / "dra-driver-nvidia-gpu"
    installed = _helm(
        helm_settings, "install", "dra", str(chart), "-n", "dra-test", "--create-namespace",
        "--set", "resources.gpus.enabled=false",
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    try:
        code, checks = _preflight(sandbox, repo, capsys, helm_settings.binary)
        applied = cli.run(
            [
                "apply",
                str(repo.write()),
                "--cluster",
                repo.cluster,
                "--kubeconfig",
                str(sandbox.kubeconfig),
                "--context",
                credentials.CLUSTER,
                "--helm",
                str(helm_settings.binary),
            ]
        )
        refused = capsys.readouterr().out
    finally:
        _helm(helm_settings, "uninstall", "dra", "-n", "dra-test")
        kubectl("delete", "namespace", "dra-test", "--wait=false", check=False)
    assert code == 1
    check = checks["no-dra-driver-release"]
    assert check["ok"] is False
    assert check["detail"].startswith("a separate DRA driver release dra-test/dra (dra-driver-nvidia-gpu-0.4.1)")
    assert check["hint"].startswith("uninstall it first (helm uninstall dra -n dra-test)")
    assert applied == 1
    assert f"hint: {check['hint']}" in refused  # apply refuses it with the same words
    assert "operator/gpu-operator.yaml:" in refused


@pytest.mark.parametrize(
    ("values", "ok", "detail"),
    [
        (
            {},
            True,
            "the operator installs driver 595.91.07 (the default of chart gpu-operator v26.7.0; "
            "driver.nvidiaDriverCRD.enabled)",
        ),
        (
            {"driver": {"nvidiaDriverCRD": {"enabled": True}, "version": "570.195.03"}},
            False,
            "the operator installs driver 570.195.03 (values driver.version of operator/gpu-operator.yaml:",
        ),
    ],
)
def test_the_driver_check_is_about_the_driver_the_operator_installs(
    sandbox: Sandbox,
    tmp_path: Path,
    chart_repo: str,
    helm_binary: Path,
    capsys: pytest.CaptureFixture[str],
    values: dict[str, object],
    ok: bool,
    detail: str,
) -> None:
    """The A100 nodes run driver 570 (below the guide's 580): that does not matter when the operator
    installs its own driver, and the version it would install does."""
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.values = {**repo.values, **values}
    repo.team("ml", namespaces=["ml"], group="ml")
    repo.pool("a100", selector={"sandbox.fleet.gpufleet.dev/pool": "a100x8"}, labels={f"t-{repo.id}": "a"}, nodes=1,
              product="NVIDIA A100-SXM4-80GB")  # fmt: skip
    _, checks = _preflight(sandbox, repo, capsys, helm_binary)
    check = checks["driver-version"]
    assert (check["ok"], check["detail"].startswith(detail)) == (ok, True), check
    if not ok:
        assert check["hint"] == "set values driver.version to 580 or later (the DRA guide needs driver >= 580)"

    plain = Repo(root=tmp_path / "plain")  # no GPUOperator: the nodes' own drivers are checked
    plain.team("ml", namespaces=["ml"], group="ml")
    plain.pool("a100", selector={"sandbox.fleet.gpufleet.dev/pool": "a100x8"}, labels={f"t-{plain.id}": "a"},
               nodes=1, product="NVIDIA A100-SXM4-80GB")  # fmt: skip
    _, checks = _preflight(sandbox, plain, capsys, helm_binary)
    assert checks["driver-version"]["ok"] is False
    assert checks["driver-version"]["detail"].startswith("driver < 580: a100x8-01")
