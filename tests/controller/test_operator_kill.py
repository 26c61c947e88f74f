"""The controller SIGKILLed during ``helm upgrade``, then restarted: the release converges.

A real ``python -m fleet.controller`` follows a git remote with the GPU Operator (NVIDIA's chart,
whose pre-upgrade hook Job ``gpu-operator-upgrade-crd`` runs on the system node). That node is tainted, so
helm waits on it; the controller is SIGKILLed with its helm child while the release is
``pending-upgrade``, which would lock it for every later helm call. The taint is removed and a
new replica starts: it finds the release pending, waits until the record is older than helm's
own timeout, rolls it back, upgrades, and reports the recovery in FleetSync status and an Event.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleet.sandbox import Sandbox, charts, credentials
from fleet.sandbox.operators import StandInOperator
from tests import waits
from tests.conftest import NAMESPACE, RELEASE
from tests.controller.conftest import Remote, fleetsync_events
from tests.controller.replicas import Replicas, ready_at, replicas
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo
from tests.paths import CHARTS

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("fleetsync_crd", "cleanup_release")]

__all__ = ["replicas"]  # the fixture

TAINT = "fleet.test/hold=controller-kill:NoSchedule"
HOOK = "gpu-operator-upgrade-crd"
"""NVIDIA's chart's pre-upgrade hook Job."""


def _history(sandbox: Sandbox, helm_binary: Path) -> list[dict[str, Any]]:
    argv = [str(helm_binary), "history", RELEASE, "-n", NAMESPACE, "-o", "json"]
    argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(sandbox.kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return list(json.loads(done.stdout)) if done.returncode == 0 else []


def _status(sandbox: Sandbox, cluster: str) -> dict[str, Any]:
    out = sandbox.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def test_a_controller_killed_during_helm_upgrade_converges_after_restart(
    sandbox: Sandbox, remote: Remote, replicas: Replicas, helm_binary: Path, tmp_path: Path
) -> None:
    src = charts.derive(UPSTREAM, tmp_path / "src", version="v26.7.0")
    for template in (CHARTS / "hooks" / "templates").iterdir():
        shutil.copy(template, src / "templates" / template.name)
    subprocess.run([str(helm_binary), "package", str(src), "-d", str(tmp_path)], check=True, capture_output=True)
    tgz = next(tmp_path.glob("gpu-operator-*.tgz"))
    repo = OperatorRepo(root=tmp_path / "unused", id=replicas.cluster.removeprefix("t-"), chart_repo=str(tgz))
    repo.team("ml", namespaces=["ml"], group="ml")
    first = remote.push(repo, message="the GPU Operator")
    flags = ("--helm", str(helm_binary), "--helm-timeout", "20s", "--lease-duration", "6s")
    flags += ("--renew-deadline", "4s", "--retry-period", "1s")
    with StandInOperator(sandbox, upstream=UPSTREAM):
        replicas.start("a", *flags)
        waits.wait_for(lambda: ready_at(sandbox, replicas.cluster, first), within=180, what="revision 1 applied")

        sandbox.kubectl("taint", "node", "system-01", TAINT)
        try:
            repo.values = {**repo.values, "dcgmExporter": {"enabled": False}}  # the chart's pre-upgrade hook runs
            second = remote.push(repo, message="disable the DCGM exporter (a pre-upgrade hook runs)")
            waits.wait_for(
                lambda: [h["status"] for h in _history(sandbox, helm_binary)][-1:] == ["pending-upgrade"],
                within=120,
                what="helm upgrade running (release pending-upgrade)",
            )
            replicas.kill("a")
        finally:
            sandbox.kubectl("taint", "node", "system-01", TAINT.rsplit(":", 1)[0] + ":NoSchedule-", check=False)
        assert [h["status"] for h in _history(sandbox, helm_binary)][-1] == "pending-upgrade"

        replicas.start("b", *flags)
        waits.wait_for(
            lambda: ready_at(sandbox, replicas.cluster, second), within=240, what="revision 2 after the restart"
        )
    history = _history(sandbox, helm_binary)
    assert history[-1]["status"] == "deployed", history
    operator = _status(sandbox, replicas.cluster)["operator"]
    assert "release was pending-upgrade (revision 2" in operator.get("remediation", ""), operator
    assert any(e["reason"] == "HelmReleaseRemediated" for e in fleetsync_events(sandbox, replicas.cluster))
