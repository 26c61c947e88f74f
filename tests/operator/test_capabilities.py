"""The chart renders against capabilities: the cluster's when one is reachable, else the table of what
the Cluster's Kubernetes version serves by default, said in the output.

NVIDIA's chart refuses ``gpuCluster.deployCR=true`` unless
``.Capabilities.APIVersions.Has "resource.k8s.io/v1/DeviceClass"``; plain ``helm template``
never has that, so each render below fails without the capabilities fleet passes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.engine.operators import capabilities
from fleet.sandbox import charts
from fleetctl import cli
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo
from tests.paths import CHARTS


def test_each_minor_serves_resource_v1_by_default_and_the_key_follows_the_capabilities() -> None:
    for minor in ("1.34", "1.35", "1.36", "1.37"):
        caps = capabilities.for_minor(minor)
        assert "resource.k8s.io/v1/DeviceClass" in caps.api_versions
        assert "resource.k8s.io/v1" in caps.api_versions
        assert not any("v1beta" in v or "v1alpha" in v for v in caps.api_versions)  # beta/alpha: off by default
        # DeviceTaintRule is GA and served in resource.k8s.io/v1 from 1.37
        assert ("resource.k8s.io/v1/DeviceTaintRule" in caps.api_versions) == (minor == "1.37")
        assert caps.kube_version == f"v{minor}.0"
        assert "serves with its default feature gates" in caps.describe()
    assert capabilities.for_minor("1.33").api_versions == ()
    assert capabilities.for_minor("1.38").api_versions == capabilities.for_minor("1.37").api_versions
    keys = {capabilities.for_minor(m).key for m in ("1.34", "1.35", "1.36", "1.37")}
    assert len(keys) == 4  # the Kubernetes version is part of a render's key
    cluster = capabilities.Capabilities(api_versions=("v1", "v1/Pod"), kube_version="v1.36.0", source="cluster")
    assert cluster.key != capabilities.for_minor("1.36").key


def _render(repo: OperatorRepo, helm_binary: Path, *extra: str) -> int:
    return cli.run(["render", str(repo.write()), "--cluster", repo.cluster, "--helm", str(helm_binary), *extra])


@pytest.mark.sandbox
def test_render_without_a_cluster_uses_the_version_table_and_says_so(
    tmp_path: Path, chart_repo: str, helm_binary: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    assert _render(repo, helm_binary) == 0
    out = capsys.readouterr().out
    assert "# stage: operator\n" in out
    assert "rendered with the API versions Kubernetes v1.36.0 serves with its default feature gates" in out
    assert "(resource.k8s.io/v1; no cluster was asked)" in out
    assert (
        "kind: GPUCluster" in out and "kind: NVIDIADriver" in out
    )  # the kubelet plugin is the operator's, not the chart's
    assert out.index("# stage: namespaces") < out.index("# stage: operator") < out.index("kind: GPUCluster")


def _hooked(tmp_path: Path, helm_binary: Path) -> OperatorRepo:
    src = charts.derive(UPSTREAM, tmp_path / "src", version="v26.7.0")
    for template in (CHARTS / "hooks" / "templates").iterdir():
        shutil.copy(template, src / "templates" / template.name)
    subprocess.run([str(helm_binary), "package", str(src), "-d", str(tmp_path)], check=True, capture_output=True)
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=str(next(tmp_path.glob("gpu-operator-*.tgz"))))
    repo.team("ml", namespaces=["ml"], group="ml")
    return repo


@pytest.mark.sandbox
def test_a_chart_that_refuses_to_render_names_the_gpuoperator_and_prints_nothing(
    tmp_path: Path, helm_binary: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _hooked(tmp_path, helm_binary)
    repo.values = {**repo.values, "testFail": "this cluster is not ready for the operator"}
    assert _render(repo, helm_binary) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "the chart refuses to render: this cluster is not ready for the operator" in captured.err
    assert "operator/gpu-operator.yaml:1" in captured.err, captured.err


@pytest.mark.sandbox
def test_validate_charts_renders_with_the_version_table_and_reports_a_refusal(
    tmp_path: Path, helm_binary: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _hooked(tmp_path, helm_binary)
    argv = ["validate", str(repo.write()), "--charts", "--helm", str(helm_binary)]
    assert cli.run(argv) == 0
    err = capsys.readouterr().err
    assert "rendered with the API versions Kubernetes v1.36.0 serves with its default feature gates" in err

    repo.values = {**repo.values, "testFail": "refused by the chart"}
    repo.write()
    assert cli.run([*argv, "-o", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    refused = [f for f in findings if f["rule"] == "chart-render"]
    assert len(refused) == 1, findings
    assert "the chart refuses to render: refused by the chart" in refused[0]["message"]
    assert refused[0]["file"].endswith("/repo/operator/gpu-operator.yaml") and refused[0]["line"] == 1, refused


@pytest.mark.sandbox
def test_render_names_a_chart_it_cannot_fetch_and_still_prints_the_rest(
    tmp_path: Path, helm_binary: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo="http://127.0.0.1:9/nvidia")  # nothing listens there
    repo.team("ml", namespaces=["ml"], group="ml")
    assert _render(repo, helm_binary, "--helm-timeout", "30") == 0
    captured = capsys.readouterr()
    assert "# GPUOperator release gpu-operator/gpu-operator (operator/gpu-operator.yaml:1:1): chart not rendered: " in (
        captured.out
    )
    assert "kind: Namespace" in captured.out
    assert "warning: operator/gpu-operator.yaml:1:1: cannot render the chart" in captured.err, captured.err
