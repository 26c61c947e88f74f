"""NVIDIA's chart beside a node-feature-discovery installed on its own: with ``nfd.enabled: false`` the
operator stage leaves NFD's CRDs to their release (helm show crds lists every subchart's CRDs, enabled
or not; fleet takes the ones the values enable); with NFD enabled, the CRD guard names that release."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleet import engine, helm
from fleet.engine import operators
from fleet.sandbox import Sandbox, credentials
from fleet.sandbox.operators import StandInOperator
from tests.apply.conftest import Engine
from tests.conftest import Kubectl
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]

CRD = "nodefeatures.nfd.k8s-sigs.io"


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


def _nfd_chart(tmp_path: Path) -> Path:
    """A release of its own that owns NFD's NodeFeature CRD (as node-feature-discovery's chart does)."""
    root = tmp_path / "node-feature-discovery"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(
        json.dumps({"apiVersion": "v2", "name": "node-feature-discovery", "version": "0.18.1"})
    )
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": "nfd.k8s-sigs.io",
            "scope": "Namespaced",
            "names": {
                "kind": "NodeFeature",
                "plural": "nodefeatures",
                "singular": "nodefeature",
                "listKind": "NodeFeatureList",
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    (root / "templates" / "crd.yaml").write_text(json.dumps(crd))
    return root


def test_a_separate_nfd_keeps_its_crds_and_an_enabled_subchart_is_refused(
    sandbox: Sandbox, tmp_path: Path, chart_repo: str, helm_settings: helm.Settings, kubectl: Kubectl
) -> None:
    kubectl("delete", "crd", CRD, "--ignore-not-found")
    installed = _helm(
        helm_settings, "install", "nfd", str(_nfd_chart(tmp_path)), "-n", "nfd-test", "--create-namespace"
    )
    assert installed.returncode == 0, installed.stderr
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    repo.values = {**repo.values, "nfd": {"enabled": False}}
    fleet = Engine(sandbox, repo)
    try:
        with StandInOperator(sandbox, upstream=UPSTREAM):
            entry = next(e for e in fleet.apply(helm=helm_settings).entries if e.ref.kind == "HelmRelease")
        assert (entry.action, entry.error) == (engine.Action.CREATED, "")
        crd = json.loads(kubectl("get", "crd", CRD, "-o", "json").stdout)
        assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == "nfd"
        assert "fleet" not in {m["manager"] for m in crd["metadata"].get("managedFields") or ()}

        repo.values = {**repo.values, "nfd": {"enabled": True}}
        with pytest.raises(operators.OperatorRefused) as refused:
            fleet.apply(helm=helm_settings)
        assert f"CRD {CRD} belongs to Helm release nfd-test/nfd" in str(refused.value)
    finally:
        _helm(helm_settings, "uninstall", "nfd", "-n", "nfd-test")
        kubectl("delete", "namespace", "nfd-test", "--wait=false", check=False)
