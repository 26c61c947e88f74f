"""``fleetctl diff`` / ``apply`` with the operator stage: --helm wiring, output and exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import helm
from fleet.sandbox import Sandbox, charts, credentials
from fleet.sandbox.operators import StandInOperator
from fleetctl import cli
from tests.conftest import Kubectl
from tests.operator.conftest import UPSTREAM, install_cluster_policy
from tests.operator.repos import OperatorRepo

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]


def _run(command: str, repo: OperatorRepo, sandbox: Sandbox, settings: helm.Settings, *extra: str) -> int:
    return cli.run(
        [
            command,
            str(repo.write()),
            "--cluster",
            repo.cluster,
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            credentials.CLUSTER,
            "--helm",
            str(settings.binary),
            *extra,
        ]
    )


def test_diff_apply_diff_through_the_cli(
    sandbox: Sandbox,
    tmp_path: Path,
    chart_repo: str,
    helm_settings: helm.Settings,
    kubectl: Kubectl,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    assert _run("diff", repo, sandbox, helm_settings, "--full") == 1  # every body, not only the changed fields
    out = capsys.readouterr().out
    assert "+++ merged helm.sh/v3/HelmRelease gpu-operator/gpu-operator" in out
    assert "+version: v26.7.0" in out
    assert "+++ merged apps/v1/Deployment gpu-operator/gpu-operator" in out
    assert "+++ merged nvidia.com/v1alpha1/GPUCluster gpu-cluster" in out

    with StandInOperator(sandbox, upstream=UPSTREAM):
        assert _run("apply", repo, sandbox, helm_settings) == 0
    captured = capsys.readouterr()
    assert "operator: 1 created" in captured.err
    assert _run("diff", repo, sandbox, helm_settings) == 0
    capsys.readouterr()

    # A refusal fails the run (exit 1) and says why, where and what to do; nothing changes.
    install_cluster_policy(kubectl, helm_settings.binary)
    repo.version = "v26.7.1"
    try:
        assert _run("apply", repo, sandbox, helm_settings) == 1
    finally:
        kubectl("delete", "clusterpolicy", "cluster-policy")
    out = capsys.readouterr().out
    assert "error: operator/gpu-operator.yaml:" in out and f"(cluster {repo.cluster})" in out
    assert "the operator release was not changed: ClusterPolicy cluster-policy exists" in out
    assert "hint: install on a cluster without a ClusterPolicy" in out


def test_a_chart_from_a_local_path(tmp_path: Path, helm_settings: helm.Settings) -> None:
    import anyio

    root = charts.derive(UPSTREAM, tmp_path, version="v26.7.0")
    chart = helm.ChartRef(repository=str(root), name="gpu-operator", version="v26.7.0")

    async def main() -> None:
        h = helm.Helm(helm_settings)
        crds = await h.crds(chart)
        assert "gpuclusters.nvidia.com" in {c["metadata"]["name"] for c in crds}
        values = await h.show_values(chart)
        assert values["gpuCluster"] == {"deployCR": False}

    anyio.run(main)
