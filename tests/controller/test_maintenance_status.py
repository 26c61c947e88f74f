"""What the controller tells of a GPUMaintenance on the real 1.37 control plane: its FleetSync's
``status.maintenances``, one Event per step and the gauges, from merge to removal.

A pod holds a claim the real scheduler allocated; a GPUMaintenance takes that pod's node whole. The
controller reconciles every two seconds (``resync``), so each step is seen by several reconciles:
the Events must still come once per step. The status the test reads is the one the API server kept,
through the CRD of ``overlays/base`` (a field it does not declare would be pruned).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.controller import controllers
from fleet.sandbox import Sandbox
from tests import waits
from tests.changes.test_holds import trainer
from tests.changes.test_maintenance import maintenance, rules_of
from tests.conftest import Kubectl
from tests.controller.conftest import Remote, fleetsync_events, running
from tests.controller.test_holds import applied_at
from tests.controller.test_loop import fleetsync
from tests.controller.test_maintenance import team_on_137

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]


async def in_phase(client: kube.Client, cluster: str, phase: str, *, waits: str = "") -> dict[str, Any] | None:
    """The FleetSync's one maintenance once it is in ``phase`` (and its next step waits for ``waits``)."""
    found = ((await fleetsync(client, cluster)).get("status") or {}).get("maintenances") or []
    if len(found) != 1 or found[0]["phase"] != phase:
        return None
    return found[0] if not waits or (found[0].get("waiting") or {}).get("on") == waits else None


def announced(sandbox: Sandbox, cluster: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in fleetsync_events(sandbox, cluster) if "Maintenance" in e["reason"]]


def gauges(ctl: controllers.Controller, name: str) -> dict[str, float]:
    """``fleet_maintenance_*`` of maintenance ``name`` as /metrics serves them: devices by effect, ``pods_waited``
    and ``overdue``."""
    out = {}
    for line in ctl.metrics.render()[0].decode().splitlines():
        if line.startswith("fleet_maintenance_") and f'maintenance="{name}"' in line:
            key = line.split('effect="')[1].split('"')[0] if "effect=" in line else line.split("{")[0][18:]
            out[key] = float(line.rsplit(" ", 1)[1])
    return out


async def test_status_events_and_gauges_follow_a_maintenance_from_merge_to_removal(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    repo, ns, name = team_on_137(tmp_path)
    first = remote.push(repo, message="a team")
    try:
        async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", resync=2.0) as ctl:
            await waits.eventually(lambda: applied_at(admin_client, repo.cluster, first), what="the team applied")
            node, _ = trainer(kubectl, ns)
            maintenance(repo, name, f"{{nodes: [{node}]}}")
            remote.push(repo, message="take the node out")

            # Out of scheduling: NoExecute waits for the job, whose pod is named with its team.
            out = await waits.eventually(
                lambda: in_phase(admin_client, repo.cluster, "Out of scheduling", waits="claims"),
                within=90,
                what="the maintenance out of scheduling, its NoExecute held for the job, in the FleetSync",
            )
            devices = [d["name"] for s in slices_of(kubectl, node) for d in s["spec"]["devices"]]
            assert (out["name"], out["effect"], out["reason"]) == (name, "NoSchedule", "HBM errors, RMA 4711")
            assert out["where"] == f"every device of node {node}" and out["deviceCount"] == len(devices)
            assert out["podsWaitedOn"] == [{"namespace": ns, "name": "trainer", "team": "ml"}]
            assert f"{ns}/held" in out["waiting"]["reason"], out["waiting"]
            assert gauges(ctl, name) == {
                "None": 0,
                "NoSchedule": len(devices),
                "NoExecute": 0,
                "pods_waited": 1,
                "overdue": 0,
            }
            where = f"every device of node {node}"
            assert sorted(announced(sandbox, repo.cluster), reverse=True) == [
                (
                    "MaintenancePreview",
                    f"GPUMaintenance {name}: {where} marked for maintenance, still in scheduling "
                    "(HBM errors, RMA 4711); 1 pod on them",
                ),
                (
                    "MaintenanceNoSchedule",
                    f"GPUMaintenance {name}: {where} out of scheduling (HBM errors, RMA 4711); 1 pod waited on",
                ),
            ]

            # The job ends: NoExecute, the devices emptied; one more Event.
            kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s")
            emptied = await waits.eventually(
                lambda: in_phase(admin_client, repo.cluster, "Emptied"), within=60, what="the devices emptied"
            )
            assert (emptied["effect"], emptied["podCount"], emptied.get("waiting")) == ("NoExecute", 0, None)
            assert gauges(ctl, name) == {
                "None": 0,
                "NoSchedule": 0,
                "NoExecute": len(devices),
                "pods_waited": 0,
                "overdue": 0,
            }
            assert [r for r, _ in announced(sandbox, repo.cluster)].count("MaintenanceNoExecute") == 1

            # The file goes: so do the rule, the status item and the gauges.
            del repo.files[f"clusters/{repo.cluster}/maintenance/{name}.yaml"]
            remote.push(repo, message="repaired")

            async def gone() -> bool:
                status = (await fleetsync(admin_client, repo.cluster)).get("status") or {}
                return status.get("maintenanceCount") == 0 and not gauges(ctl, name)

            await waits.eventually(gone, within=60, what="the maintenance gone from status and metrics")
            ended = [m for r, m in announced(sandbox, repo.cluster) if r == "MaintenanceEnded"]
            assert ended == [f"GPUMaintenance {name} ended: every device of pool {node} back in service"]
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        for left in rules_of(kubectl, name):
            kubectl("delete", "devicetaintrule", left, check=False)


def slices_of(kubectl: Kubectl, node: str) -> list[dict[str, Any]]:
    slices = json.loads(kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    return [s for s in slices if s["spec"].get("nodeName") == node]
