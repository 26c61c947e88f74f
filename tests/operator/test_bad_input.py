"""Bad input for the operator stage, through ``fleetctl apply`` with NVIDIA's chart: each one a clear
message at the GPUOperator's file:line, and nothing written (no namespace of stage 1, no release).

The chart is fetched and rendered with the cluster's capabilities before the first write
(``operators.Stage.prepare``), so a repository that answers 404 or cannot be reached, a version it
lacks, values its ``values.schema.json`` (node-feature-discovery's) or its own validations refuse
all stop the run there. Values fleet itself knows to be wrong (both ``deployCR``) are refused by
validation, before the cluster is even asked.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleet import helm
from fleet.sandbox import Sandbox, credentials
from fleetctl import cli
from tests.conftest import Kubectl
from tests.operator.conftest import NAMESPACE, RELEASE
from tests.operator.repos import OperatorRepo

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]

LOCATION = re.compile(r"operator/gpu-operator\.yaml:\d+")


def _apply(
    repo: OperatorRepo, sandbox: Sandbox, settings: helm.Settings, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    code = cli.run(
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
            str(settings.binary),
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _nothing_written(repo: OperatorRepo, kubectl: Kubectl, settings: helm.Settings) -> None:
    assert kubectl("get", "namespace", repo.ns("ml"), check=False).returncode != 0, "stage 1 wrote its namespace"
    argv = [str(settings.binary), "list", "-n", NAMESPACE, "-a", "-o", "json"]
    argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(settings.kubeconfig)]
    listed = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout or "[]")
    assert [r["name"] for r in listed if r["name"] == RELEASE] == []


CASES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "repository answers 404": (
        {"chart_repo": "{url}/no-such-path"},
        (
            "cannot read chart gpu-operator v26.7.0 from",
            "no-such-path/index.yaml : 404",
            "hint: check that spec.chart.repository",
        ),
    ),
    "repository unreachable": (
        {"chart_repo": "http://127.0.0.1:9/nvidia"},
        ("cannot read chart gpu-operator v26.7.0 from http://127.0.0.1:9/nvidia", "connection refused"),
    ),
    "version the repository lacks": (
        {"version": "v26.7.9"},
        ('version "v26.7.9" not found',),
    ),
    "values the chart's values.schema.json rejects": (
        {"values": {"node-feature-discovery": {"gc": {"replicaCount": "two"}}}},
        ("values don't meet the specifications of the schema", "at '/gc/replicaCount': got string, want integer"),
    ),
    "values the chart's own validations refuse": (
        {"values": {"cdi": {"enabled": False, "nriPluginEnabled": True}}},
        (
            "the chart refuses to render: the NRI Plugin cannot be enabled when CDI is disabled",
            "(at gpu-operator/templates/validations.yaml:10:3)",
        ),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_chart_input_is_named_at_the_gpuoperator_and_nothing_is_written(
    case: str,
    sandbox: Sandbox,
    kubectl: Kubectl,
    tmp_path: Path,
    chart_repo: str,
    helm_settings: helm.Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    change, expected = CASES[case]
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    if "chart_repo" in change:
        repo.chart_repo = change["chart_repo"].format(url=chart_repo)
    if "version" in change:
        repo.version = change["version"]
    if "values" in change:
        repo.values = {**repo.values, **change["values"]}
    code, out = _apply(repo, sandbox, helm_settings, capsys)
    assert code == 1, out
    assert LOCATION.search(out), out
    for text in expected:
        assert text in out, out
    _nothing_written(repo, kubectl, helm_settings)


def test_both_deploy_crs_are_refused_by_validation_at_the_value(
    sandbox: Sandbox,
    kubectl: Kubectl,
    tmp_path: Path,
    chart_repo: str,
    helm_settings: helm.Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The chart's own first validation, known to fleet: refused before the cluster is asked."""
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    repo.values = {**repo.values, "clusterPolicy": {"deployCR": True}}
    code, out = _apply(repo, sandbox, helm_settings, capsys)
    assert code != 0, out
    assert LOCATION.search(out) and "clusterPolicy.deployCR" in out, out
    _nothing_written(repo, kubectl, helm_settings)
