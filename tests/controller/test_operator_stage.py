"""The controller loop with the operator stage: real helm, NVIDIA's chart on the loopback
repository, the sandbox's API server, and a GPU node's driver-upgrade label in FleetSync status.

The controller installs the GPU Operator release as ``fleetctl apply`` does (the same engine),
a no-op reconcile writes nothing through helm or the API, and a node the operator is upgrading
shows in ``status.operator.driverUpgrade`` and in ``fleetctl status``. The release and the
GPUCluster are cluster-wide, so ``cleanup_release`` uninstalls them afterwards.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet import helm, kube
from fleet.controller import controllers
from fleet.engine import drivers, stages
from fleet.sandbox import Sandbox, credentials
from fleet.sandbox.operators import StandInOperator
from tests import servermetrics as metrics
from tests import waits
from tests.conftest import NAMESPACE, RELEASE, Kubectl
from tests.controller.conftest import Remote, running
from tests.controller.test_loop import fleetctl_status, fleetsync
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.anyio,
    pytest.mark.usefixtures("fleetsync_crd", "cleanup_release"),
]

HELM_WRITES = stages.WRITTEN_RESOURCES | {"secrets", "customresourcedefinitions", "gpuclusters", "daemonsets"}
"""What an install or upgrade writes: helm's release Secrets, the chart's CRDs and objects, fleet's own."""
NODE = "h100x8-01"


def _release(settings: helm.Settings) -> dict[str, Any]:
    argv = [str(settings.binary), "list", "-n", NAMESPACE, "-a", "-o", "json"]
    argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(settings.kubeconfig)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    return next((r for r in json.loads(out or "[]") if r["name"] == RELEASE), {})


async def _operator(client: kube.Client, cluster: str) -> dict[str, Any]:
    return dict(((await fleetsync(client, cluster)).get("status") or {}).get("operator") or {})


async def test_the_controller_installs_the_operator_and_reports_driver_upgrades(
    sandbox: Sandbox,
    remote: Remote,
    chart_repo: str,
    helm_settings: helm.Settings,
    admin_client: kube.Client,
    kubectl: Kubectl,
    tmp_path: Path,
) -> None:
    repo = OperatorRepo(root=tmp_path / "unused", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    first = remote.push(repo, message="the GPU Operator")
    cluster = repo.cluster
    with StandInOperator(sandbox, upstream=UPSTREAM):
        async with running(
            sandbox, remote, cluster=cluster, cache_dir=tmp_path / "cache", helm=helm_settings, health_timeout=120
        ) as ctl:

            async def installed() -> dict[str, Any] | None:
                synced = await fleetsync(admin_client, cluster)
                status = synced.get("status") or {}
                return synced if status.get("lastAppliedRevision") == first and status.get("operator") else None

            synced = await waits.eventually(installed, within=180, what="FleetSync applied with status.operator")
            assert synced["status"]["operator"] == {
                "release": f"{NAMESPACE}/{RELEASE}",
                "version": "v26.7.0",
                "action": "created",
                "error": "",
                "driverStateTimeout": 1800,
                "driverUpgrade": [],
                "stuckCount": 0,
            }
            assert (_release(helm_settings)["chart"], _release(helm_settings)["revision"]) == (
                "gpu-operator-v26.7.0",
                "1",
            )

            # A no-op reconcile: the release matches, so no helm write and no API write.
            await waits.eventually(lambda: _idle(ctl), what="the controller idle after the install")
            finished = ctl.stats.finished
            before = metrics.request_totals(await admin_client.metrics())
            ctl.queue.add(ctl.key, reason="test: no-op")

            async def reconciled() -> bool:
                return ctl.stats.finished > finished and "test: no-op" in ctl.stats.last_reasons

            await waits.eventually(reconciled, what="the test's reconcile")
            after = metrics.request_totals(await admin_client.metrics())
            writes = metrics.writes(before, after, resources=set(HELM_WRITES))
            print(f"\nno-op reconcile with the operator stage: {writes} writes to {sorted(HELM_WRITES)}")
            assert writes == 0
            assert _release(helm_settings)["revision"] == "1"
            entry = ctl.report.operator
            assert entry is not None and (str(entry.action), entry.error) == ("unchanged", "")
            await waits.eventually(
                lambda: _has(admin_client, cluster, action="unchanged"), what="status.operator.action unchanged"
            )

            # The operator starts a driver upgrade on a node: the label's event queues a reconcile
            # (the controller is idle and no pool selects the node: nothing else would, for 10 min).
            kubectl("label", "node", NODE, f"{drivers.UPGRADE_STATE}=upgrade-required")
            try:
                op = await waits.eventually(
                    lambda: _has(admin_client, cluster, node=NODE), what=f"status.operator shows {NODE}"
                )
                item = next(n for n in op["driverUpgrade"] if n["node"] == NODE)
                assert (item["state"], item["stuck"], op["stuckCount"]) == ("upgrade-required", False, 0)
                assert item["since"].endswith("Z") and "events" not in item

                shown = await _fleetctl_status(sandbox, cluster)
                assert shown.returncode == 0, shown.stdout + shown.stderr
                lines = shown.stdout.splitlines()
                assert f"operator   {NAMESPACE}/{RELEASE} v26.7.0  unchanged" in lines, shown.stdout
                assert f"  {NODE}  upgrade-required" in lines, shown.stdout
                printed = json.loads((await _fleetctl_status(sandbox, cluster, "-o", "json")).stdout)
                assert printed[0]["status"]["operator"]["driverUpgrade"] == op["driverUpgrade"]
            finally:
                kubectl("label", "node", NODE, f"{drivers.UPGRADE_STATE}-")
            await waits.eventually(lambda: _cleared(admin_client, cluster), what="the node gone from status.operator")

            # A major upgrade not allowed is refused before helm runs: status says so, with the version deployed.
            major = remote.push(_with_version(repo, "v27.1.0"), message="GPU Operator v27")
            op = await waits.eventually(
                lambda: _has(admin_client, cluster, action="refused"), what="the refusal in status"
            )
            assert op["version"] == "v26.7.0", op
            assert "v26.7.0 → v27.1.0 crosses a major version" in op["error"], op
            assert "set spec.upgrade.allowMajor: true" in op["error"], op
            synced = await fleetsync(admin_client, cluster)
            assert synced["status"]["lastAttemptedRevision"] == major
            assert _release(helm_settings)["revision"] == "1"
            shown = await _fleetctl_status(sandbox, cluster)
            assert f"operator   {NAMESPACE}/{RELEASE} v26.7.0  refused" in shown.stdout.splitlines(), shown.stdout


def _with_version(repo: OperatorRepo, version: str) -> OperatorRepo:
    repo.version = version
    return repo


async def _idle(ctl: controllers.Controller) -> bool:
    """Nothing queued or running, twice 0.5 s apart (a reconcile may queue another as it ends)."""
    for _ in range(2):
        if len(ctl.queue) or ctl.stats.finished != ctl.stats.reconciles:
            return False
        await anyio.sleep(0.5)
    return True


async def _has(client: kube.Client, cluster: str, *, action: str = "", node: str = "") -> dict[str, Any] | None:
    op = await _operator(client, cluster)
    if action and op.get("action") != action:
        return None
    if node and not any(n.get("node") == node for n in op.get("driverUpgrade") or ()):
        return None
    return op


async def _cleared(client: kube.Client, cluster: str) -> bool:
    op = await _operator(client, cluster)
    return bool(op) and not op.get("driverUpgrade")


async def _fleetctl_status(sandbox: Sandbox, cluster: str, *args: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: fleetctl_status(sandbox, cluster, *args))


@pytest.mark.slow  # waits out the shortest driverStateTimeout the schema allows (60 s)
async def test_a_node_stuck_past_the_timeout_is_reported_once_with_its_events(
    sandbox: Sandbox,
    remote: Remote,
    chart_repo: str,
    helm_settings: helm.Settings,
    admin_client: kube.Client,
    kubectl: Kubectl,
    tmp_path: Path,
) -> None:
    repo = OperatorRepo(root=tmp_path / "unused", chart_repo=chart_repo, upgrade={"driverStateTimeout": 60})
    repo.team("ml", namespaces=["ml"], group="ml")
    remote.push(repo, message="the GPU Operator, 60 s per driver-upgrade state")
    cluster = repo.cluster
    with StandInOperator(sandbox, upstream=UPSTREAM):
        async with running(
            sandbox, remote, cluster=cluster, cache_dir=tmp_path / "cache", helm=helm_settings, health_timeout=120
        ):
            await waits.eventually(lambda: _has(admin_client, cluster, action="created"), within=180, what="installed")
            kubectl("label", "node", NODE, f"{drivers.UPGRADE_STATE}=cordon-required")
            kubectl(
                "create", "-f", "-", stdin=json.dumps(_node_event(NODE, "DrainBlocked", "pod ml/train-0 has a PDB"))
            )
            try:
                await waits.eventually(lambda: _has(admin_client, cluster, node=NODE), what=f"{NODE} in status")
                # No event on the node until the deadline: the controller re-checks by itself then.
                op = await waits.eventually(lambda: _stuck(admin_client, cluster), within=120, what=f"{NODE} stuck")
                item = next(n for n in op["driverUpgrade"] if n["node"] == NODE)
                assert (item["state"], item["stuck"], op["stuckCount"]) == ("cordon-required", True, 1)
                assert "DrainBlocked: pod ml/train-0 has a PDB" in item["events"], item
                shown = await _fleetctl_status(sandbox, cluster)
                assert shown.returncode == 0, shown.stdout  # Ready: git is applied; the rollout is the operator's
                line = next(x for x in shown.stdout.splitlines() if x.startswith(f"  {NODE}"))
                assert "cordon-required  STUCK for 1 min (driverStateTimeout 1 min)" in line, line
                assert "; events: " in line and "DrainBlocked: pod ml/train-0 has a PDB" in line, line
                # Another reconcile sees it stuck still: still one Event.
                await waits.eventually(lambda: _stuck_events(kubectl, cluster), what="the DriverUpgradeStuck Event")
                before = await _operator(admin_client, cluster)
                kubectl("label", "node", "h100x8-02", f"{drivers.UPGRADE_STATE}=upgrade-done")
                await waits.eventually(
                    lambda: _has(admin_client, cluster, node="h100x8-02"), what="h100x8-02 in status"
                )
                assert before["stuckCount"] == 1
                events = await _stuck_events(kubectl, cluster)
                assert len(events) == 1 and events[0]["type"] == "Warning", events
                assert f"Node {NODE} has been in driver-upgrade state cordon-required" in events[0]["message"]
            finally:
                kubectl("label", "node", NODE, "h100x8-02", f"{drivers.UPGRADE_STATE}-")
                kubectl("delete", "events", "-n", "default", f"{NODE}.drain-blocked", "--ignore-not-found")


def _node_event(node: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node}.drain-blocked", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "gpu-operator-upgrade"},
    }


async def _stuck(client: kube.Client, cluster: str) -> dict[str, Any] | None:
    op = await _operator(client, cluster)
    return op if op.get("stuckCount") else None


async def _stuck_events(kubectl: Kubectl, cluster: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={cluster},reason=DriverUpgradeStuck"
    out = kubectl("get", "events", "-n", "default", "--field-selector", selector, "-o", "json").stdout
    return list(json.loads(out)["items"])
