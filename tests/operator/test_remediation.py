"""A failed install or upgrade never leaves the release locked: real helm, hook Jobs, the sandbox.

NVIDIA's chart (v26.7.0) gains test hook Jobs (``tests/data/charts/hooks``), packaged with
the real helm binary. The chart's own pre-upgrade hook (``gpu-operator-upgrade-crd``, which runs
on the system node) cannot be scheduled while that node is tainted: helm gives
up at its own ``--timeout`` (shorter than fleet's kill deadline), fleet names the hook and its
pod's FailedScheduling Event and rolls back; once the taint is gone the same apply converges. A
post-install hook that fails is remediated (uninstalled: nothing ever deployed), a failed
post-upgrade hook rolled back, each named. A release left ``pending-upgrade`` by a killed helm
is recovered once its record is older than helm's timeout, and the change is then made.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet import engine, helm
from fleet.sandbox import Sandbox, charts, credentials
from fleet.sandbox.operators import StandInOperator
from tests.apply.conftest import Engine
from tests.conftest import Kubectl
from tests.operator.conftest import NAMESPACE, RELEASE, UPSTREAM
from tests.operator.repos import OperatorRepo
from tests.paths import CHARTS

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]

SYSTEM_NODE = "system-01"
TAINT = "fleet.test/hold=remediation:NoSchedule"
UPGRADE_HOOK = "gpu-operator-upgrade-crd"


@pytest.fixture(scope="module")
def hooked_chart(tmp_path_factory: pytest.TempPathFactory, helm_binary: Path) -> Path:
    """NVIDIA's chart v26.7.0 with the test hook Jobs, packaged as a .tgz by the real helm."""
    work = tmp_path_factory.mktemp("hooked")
    src = charts.derive(UPSTREAM, work / "src", version="v26.7.0")
    for template in (CHARTS / "hooks" / "templates").iterdir():
        shutil.copy(template, src / "templates" / template.name)
    subprocess.run([str(helm_binary), "package", str(src), "-d", str(work)], check=True, capture_output=True)
    return next(work.glob("gpu-operator-*.tgz"))


@pytest.fixture()
def op_repo(tmp_path: Path, hooked_chart: Path) -> OperatorRepo:
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=str(hooked_chart))
    repo.team("ml", namespaces=["ml"], group="ml")
    return repo


@pytest.fixture()
def quick(helm_settings: helm.Settings) -> helm.Settings:
    """helm with a 40 s kill deadline, so helm's own --timeout is 30 s."""
    settings = helm.Settings(
        binary=helm_settings.binary,
        kubeconfig=helm_settings.kubeconfig,
        context=helm_settings.context,
        home=helm_settings.home,
        timeout=40,
    )
    assert settings.operation_timeout == 30
    return settings


@pytest.fixture()
def tainted(kubectl: Kubectl) -> Iterator[None]:
    kubectl("taint", "node", SYSTEM_NODE, TAINT)
    try:
        yield
    finally:
        kubectl("taint", "node", SYSTEM_NODE, TAINT.rsplit(":", 1)[0] + ":NoSchedule-", check=False)


def _history(settings: helm.Settings) -> list[dict[str, Any]]:
    argv = [str(settings.binary), "history", RELEASE, "-n", NAMESPACE, "-o", "json"]
    argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(settings.kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return list(json.loads(done.stdout)) if done.returncode == 0 else []


def _entry(changes: engine.ChangeSet) -> engine.Change:
    return next(e for e in changes.entries if e.ref.kind == "HelmRelease")


def _hook(name: str, on: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "on": on, **extra}


def test_an_unschedulable_hook_is_named_rolled_back_then_converges(
    sandbox: Sandbox, kubectl: Kubectl, op_repo: OperatorRepo, quick: helm.Settings
) -> None:
    fleet = Engine(sandbox, op_repo)
    with StandInOperator(sandbox, upstream=UPSTREAM):
        assert _entry(fleet.apply(helm=quick)).error == ""
        kubectl("taint", "node", SYSTEM_NODE, TAINT)
        try:
            op_repo.values = {**op_repo.values, "dcgmExporter": {"enabled": False}}
            entry = _entry(fleet.apply(helm=quick))
            assert entry.failed
            assert f"pre-upgrade hook Job {NAMESPACE}/{UPGRADE_HOOK}: did not complete" in entry.error
            assert "FailedScheduling" in entry.error and "untolerated taint" in entry.error, entry.error
            assert "rolled back to revision 1" in entry.error
            assert entry.operator is not None and "rolled back to revision 1" in entry.operator.remedied
            history = _history(quick)
            assert [h["status"] for h in history] == ["superseded", "failed", "deployed"], history
        finally:
            kubectl("taint", "node", SYSTEM_NODE, TAINT.rsplit(":", 1)[0] + ":NoSchedule-")
        entry = _entry(fleet.apply(helm=quick))
        assert (entry.action, entry.error) == (engine.Action.CONFIGURED, "")
    assert _history(quick)[-1]["status"] == "deployed"
    # The chart deletes its hook Job once it succeeded (hook-succeeded); the Job controller's Events stay.
    events = kubectl("get", "events", "-n", NAMESPACE, "--field-selector", f"involvedObject.name={UPGRADE_HOOK}")
    assert "Completed" in events.stdout, events.stdout


def test_a_failed_post_install_hook_is_uninstalled_and_a_failed_post_upgrade_hook_rolled_back(
    sandbox: Sandbox, op_repo: OperatorRepo, quick: helm.Settings
) -> None:
    fleet = Engine(sandbox, op_repo)
    nowhere = {"fleet.test/no-such-node": "true"}
    base = dict(op_repo.values)
    op_repo.values = {
        **base,
        "testHooks": [_hook("gpu-operator-post-install", "post-install", deadline=2, nodeSelector=nowhere)],
    }
    entry = _entry(fleet.apply(helm=quick))
    assert f"post-install hook Job {NAMESPACE}/gpu-operator-post-install: failed (DeadlineExceeded" in entry.error
    assert "uninstalled the release (no revision ever deployed)" in entry.error, entry.error
    assert _history(quick) == []

    op_repo.values = base
    with StandInOperator(sandbox, upstream=UPSTREAM):
        assert _entry(fleet.apply(helm=quick)).error == ""
    op_repo.values = {
        **base,
        "testHooks": [_hook("gpu-operator-post-upgrade", "post-upgrade", deadline=2, nodeSelector=nowhere)],
    }
    entry = _entry(fleet.apply(helm=quick))
    assert f"post-upgrade hook Job {NAMESPACE}/gpu-operator-post-upgrade: failed (DeadlineExceeded" in entry.error
    assert "FailedScheduling" in entry.error, entry.error  # from the Events of the pod the deadline deleted
    assert "rolled back to revision 1" in entry.error, entry.error
    assert _history(quick)[-1]["status"] == "deployed"

    op_repo.remediation = {"retries": 1}
    entry = _entry(fleet.apply(helm=quick))
    assert "retrying (1 of 1 retries)" in entry.error and "gave up after 2 attempts" in entry.error, entry.error
    statuses = [h["status"] for h in _history(quick)]
    assert statuses[-4:] == ["failed", "superseded", "failed", "deployed"], statuses  # each attempt rolled back

    op_repo.remediation = {"strategy": "none"}
    entry = _entry(fleet.apply(helm=quick))
    assert "left failed (spec.remediation.strategy: none)" in entry.error, entry.error
    assert _history(quick)[-1]["status"] == "failed"


def test_a_release_left_pending_by_a_killed_helm_is_recovered_then_upgraded(
    sandbox: Sandbox, kubectl: Kubectl, op_repo: OperatorRepo, quick: helm.Settings
) -> None:
    fleet = Engine(sandbox, op_repo)
    with StandInOperator(sandbox, upstream=UPSTREAM):
        assert _entry(fleet.apply(helm=quick)).error == ""
    # A helm upgrade killed while its pre-upgrade hook waits: the release stays pending-upgrade.
    values = {**op_repo.values, "dcgmExporter": {"enabled": False}}  # the chart's pre-upgrade hook runs
    kubectl("taint", "node", SYSTEM_NODE, TAINT)
    try:
        values_file = op_repo.root.parent / "values.json"
        values_file.write_text(json.dumps(values))
        argv = [str(quick.binary), "upgrade", RELEASE, op_repo.chart_repo, "-n", NAMESPACE, "-f", str(values_file)]
        argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(quick.kubeconfig)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not _history(quick) or _history(quick)[-1]["status"] != "pending-upgrade":
                assert time.monotonic() < deadline, _history(quick)
                time.sleep(0.3)
        finally:
            proc.kill()
            proc.wait()
    finally:
        kubectl("taint", "node", SYSTEM_NODE, TAINT.rsplit(":", 1)[0] + ":NoSchedule-")
    assert _history(quick)[-1]["status"] == "pending-upgrade"

    op_repo.values = values
    entry = _entry(fleet.apply(helm=quick))  # the record is seconds old: someone may still run it
    assert "is pending-upgrade since" in entry.error and "may still be running" in entry.error, entry.error
    assert "older than helm's own timeout (30s)" in entry.error

    since = time.monotonic()
    while time.monotonic() - since < quick.operation_timeout:  # the record ages past helm's timeout
        time.sleep(1)
    with StandInOperator(sandbox, upstream=UPSTREAM):
        entry = _entry(fleet.apply(helm=quick))
    assert entry.error == "", entry.error
    assert entry.operator is not None
    assert "release was pending-upgrade (revision 2" in entry.operator.remedied
    assert "rolled back to revision 1" in entry.operator.remedied
    assert [h["status"] for h in _history(quick)][-1] == "deployed"
