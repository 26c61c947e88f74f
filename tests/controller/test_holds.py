"""The controller holds a disruptive change for the window, takes an emergency from its FleetSync,
waits for the GPU job, and applies the change by itself once the job's claim is released."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.controller import holds
from fleet.sandbox import Sandbox
from tests import waits
from tests.apply.repos import Repo
from tests.changes.test_holds import closed_window, live_selector, template_count, trainer
from tests.conftest import Kubectl
from tests.controller.conftest import Remote, fleetsync_events, git, running
from tests.controller.test_loop import fleetsync

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), {})


async def applied_at(client: kube.Client, cluster: str, revision: str) -> dict[str, Any] | None:
    obj = await fleetsync(client, cluster)
    return obj if (obj.get("status") or {}).get("lastAppliedRevision") == revision else None


async def test_a_held_change_waits_for_the_window_then_an_emergency_then_the_job(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    repo.claim_template("ml", "one-gpu")
    repo.cluster_spec = {"maintenance": closed_window()}
    ns = repo.ns("ml")
    first = remote.push(repo, message="a team")
    try:
        async with running(
            sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", looks=holds.Looks(emergency_poll=1.0)
        ) as ctl:
            await waits.eventually(lambda: applied_at(admin_client, repo.cluster, first), what="the team applied")
            node, uuid = trainer(kubectl, ns)
            before = live_selector(kubectl, repo)
            repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
            repo.claim_template("ml", "one-gpu", count=2)
            second = remote.push(repo, message="tighten the class; two GPUs per claim")

            async def waiting(on: str) -> dict[str, Any] | None:
                obj = await fleetsync(admin_client, repo.cluster)
                status = obj.get("status") or {}
                held = status.get("waiting") or []
                ok = status.get("lastAppliedRevision") == second and held and held[0]["waitsFor"] == on
                return obj if ok else None

            obj = await waits.eventually(lambda: waiting("window"), what="the class change held for the window")
            [held] = obj["status"]["waiting"]
            assert (held["kind"], held["name"], held["action"]) == ("DeviceClass", repo.device_class_name, "configured")
            assert held["until"] and "tightens the selectors" in held["disruption"]
            assert ready(obj)["reason"] == "Waiting" and ready(obj)["status"] == "True"
            assert template_count(kubectl, ns) == 2, "the safe part applied"
            assert live_selector(kubectl, repo) == before
            assert b'fleet_changes_waiting{waits_for="window"} 1.0' in ctl.metrics.render()[0]

            kubectl("annotate", "fleetsync", repo.cluster, f"{holds.EMERGENCY}=CVE-2026-0001 in the driver")
            obj = await waits.eventually(lambda: waiting("claims"), what="the emergency skips the window")
            assert (
                f"{ns}/held" in obj["status"]["waiting"][0]["reason"] and node in obj["status"]["waiting"][0]["reason"]
            )
            assert live_selector(kubectl, repo) == before, "the job is not cut"

            kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s")

            async def applied() -> dict[str, Any] | None:
                obj = await fleetsync(admin_client, repo.cluster)
                status = obj.get("status") or {}
                return obj if status.get("waitingCount") == 0 and ready(obj).get("reason") == "Applied" else None

            await waits.eventually(applied, within=60, what="the change applied once the claim was released")
            assert live_selector(kubectl, repo) == repo.device_class_expression
            assert b'fleet_changes_waiting{waits_for="claims"} 0.0' in ctl.metrics.render()[0]
            [event] = [e for e in fleetsync_events(sandbox, repo.cluster) if e["reason"] == "EmergencyChange"]
            assert "CVE-2026-0001 in the driver" in event["message"]
            assert f"the FleetSync annotation {holds.EMERGENCY} set by kubectl-annotate at " in event["message"]
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        kubectl("annotate", "fleetsync", repo.cluster, f"{holds.EMERGENCY}-", check=False)


async def test_a_commits_emergency_trailer_skips_the_window_and_an_overdue_wait_is_announced(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    repo.cluster_spec = {"maintenance": closed_window(), "disruption": {"policy": "wait", "deadline": "2s"}}
    ns = repo.ns("ml")
    first = remote.push(repo, message="a team")
    try:
        async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache"):
            await waits.eventually(lambda: applied_at(admin_client, repo.cluster, first), what="the team applied")
            node, uuid = trainer(kubectl, ns)
            repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
            second = remote.push(
                repo, message="Tighten the class now\n\nFleet-Emergency: the driver leaks memory on this device\n"
            )
            author = f"{git(remote.work, 'log', '-1', '--format=%an <%ae>')}"

            async def overdue() -> dict[str, Any] | None:
                obj = await fleetsync(admin_client, repo.cluster)
                held = (obj.get("status") or {}).get("waiting") or []
                return obj if held and held[0]["waitsFor"] == "claims" and held[0]["overdue"] else None

            obj = await waits.eventually(overdue, what="held for the pod, past its 2 s deadline", within=60)
            assert obj["status"]["lastAppliedRevision"] == second
            reasons = {e["reason"]: e["message"] for e in fleetsync_events(sandbox, repo.cluster)}
            assert reasons["EmergencyChange"].endswith(
                f"asked by commit {second[:12]} by {author}: the driver leaks memory on this device"
            )
            assert f"DeviceClass {repo.device_class_name}" in reasons["DisruptionOverdue"]
            assert reasons["DisruptionOverdue"].endswith("(overdue)") and node in reasons["DisruptionOverdue"]
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
