"""Concurrent edits: a person and fleet edit the same objects (issue 24, part 1), on the sandbox
with the controller loop following a real git remote.

Under ``enforce`` git wins: a field fleet declares that a person took with ``kubectl patch``
is put back with force, and the repair is announced (a ``DriftRepaired`` Event naming the
manager and the old value, ``drift[]`` with ``action: repaired``, the metric); a label fleet
never set survives. A person freezes the live object with ``fleet.gpufleet.dev/drift=report``:
fleet leaves it alone and lists it until the annotation goes. Under ``report`` a commit that
changes a field another manager owns is a conflict naming that manager, until the manifest says
``fleet.gpufleet.dev/take-ownership: "true"``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from fleet import kube
from fleet.sandbox import Sandbox
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, fleetsync_events, running
from tests.controller.test_loop import _fleet_default_drift, _ready_at, fleetctl_status, fleetsync, get

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

RCT = "resource.k8s.io/v1"
PATCH = json.dumps({"spec": {"selectors": [{"cel": {"expression": "true"}}]}})
"""The patch of issue 24, as a person would type it."""
DRIFT = "fleet.gpufleet.dev/drift"
REPAIR_DEADLINE = 5.0


def _expression(dc: dict[str, Any] | None) -> str:
    return str((dc or {})["spec"]["selectors"][0]["cel"]["expression"])


def _repo(tmp_path: Path) -> Repo:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "single-gpu")
    return repo


async def _expression_is(client: kube.Client, dc: str, expression: str) -> bool:
    return _expression(await get(client, RCT, "DeviceClass", dc)) == expression


async def test_a_patched_field_is_repaired_announced_and_counted_and_a_foreign_label_survives(
    sandbox: Sandbox, remote: Remote, tmp_path: Path, admin_client: kube.Client
) -> None:
    repo = _repo(tmp_path)
    dc, ns = repo.device_class_name, repo.ns("ml")
    first = remote.push(repo, message="a team, a template, a DeviceClass (enforce: the default)")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache") as ctl:
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")
        sandbox.kubectl("label", "deviceclass", dc, "owner=alice")
        sandbox.kubectl("label", "resourceclaimtemplate", "single-gpu", "-n", ns, "owner=alice")
        sandbox.kubectl("patch", "deviceclass", dc, "--type=merge", "-p", PATCH)

        await waits.eventually(
            lambda: _expression_is(admin_client, dc, repo.device_class_expression),
            within=REPAIR_DEADLINE,
            what="the DeviceClass's selectors put back to git's",
        )
        live = await get(admin_client, RCT, "DeviceClass", dc) or {}
        assert live["metadata"]["labels"]["owner"] == "alice", "a label fleet does not declare was touched"
        template = await get(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", ns) or {}
        assert template["metadata"]["labels"]["owner"] == "alice"
        owners = {m["manager"] for m in live["metadata"]["managedFields"] if "f:selectors" in json.dumps(m)}
        assert owners == {"fleet"}, owners

        def repaired_event() -> list[dict[str, Any]]:
            return [e for e in fleetsync_events(sandbox, repo.cluster) if e["reason"] == "DriftRepaired"]

        [event] = await waits.eventually(lambda: anyio.to_thread.run_sync(repaired_event), what="a DriftRepaired Event")
        assert "kubectl-patch" in event["message"] and '"expression":"true"' in event["message"], event["message"]
        assert repo.device_class_expression in event["message"] and ".spec.selectors" in event["message"]

        async def repaired_in_status() -> dict[str, Any] | None:
            drift = ((await fleetsync(admin_client, repo.cluster)).get("status") or {}).get("drift") or []
            return next((d for d in drift if d["name"] == dc and d["action"] == "repaired"), None)

        row = await waits.eventually(repaired_in_status, what="drift[] lists the repair")
        assert row["manager"] == "kubectl-patch" and row["time"].endswith("Z")
        [field] = row["fields"]
        assert (field["field"], field["manager"]) == (".spec.selectors", "kubectl-patch")
        assert field["before"] == '[{"cel":{"expression":"true"}}]' and repo.device_class_expression in field["after"]
        scraped = ctl.metrics.render()[0].decode()
        assert 'fleet_drift_repaired_total{manager="kubectl-patch",stage="classes"} 1.0' in scraped
        obj = await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, first), what="Ready after the repair"
        )
        assert obj["status"]["conflicts"] == []
        print(f"\nEvent: {event['message']}\ndrift[]: {row}")

        # A person's annotation in fleet's domain that is no freeze: the forced repair leaves it on.
        sandbox.kubectl("annotate", "deviceclass", dc, f"{DRIFT}=enforce")
        sandbox.kubectl("patch", "deviceclass", dc, "--type=merge", "-p", PATCH)
        await waits.eventually(
            lambda: _expression_is(admin_client, dc, repo.device_class_expression),
            within=REPAIR_DEADLINE,
            what="the second patch repaired",
        )
        live = await get(admin_client, RCT, "DeviceClass", dc) or {}
        assert live["metadata"]["annotations"][DRIFT] == "enforce"
        assert live["metadata"]["labels"]["owner"] == "alice"


async def test_a_frozen_object_is_left_alone_and_listed_until_unfrozen(
    sandbox: Sandbox, remote: Remote, tmp_path: Path, admin_client: kube.Client
) -> None:
    repo = _repo(tmp_path)
    dc = repo.device_class_name
    first = remote.push(repo, message="a team, a template, a DeviceClass")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache") as ctl:
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")
        sandbox.kubectl("annotate", "deviceclass", dc, f"{DRIFT}=report")
        sandbox.kubectl("patch", "deviceclass", dc, "--type=merge", "-p", PATCH)

        async def frozen_and_reported() -> dict[str, Any] | None:
            status = (await fleetsync(admin_client, repo.cluster)).get("status") or {}
            reported = any(d["name"] == dc and d["action"] == "reported" for d in status.get("drift") or ())
            return status if reported and status.get("frozen") else None

        status = await waits.eventually(
            frozen_and_reported, within=30, what="the frozen DeviceClass listed, drift reported"
        )
        [frozen] = status["frozen"]
        assert (frozen["kind"], frozen["name"], frozen["mode"], frozen["by"]) == (
            "DeviceClass",
            dc,
            "report",
            "kubectl-annotate",
        )
        assert frozen["since"].endswith("Z") and status["frozenCount"] == 1
        assert _expression(await get(admin_client, RCT, "DeviceClass", dc)) == "true", "a frozen object was written"
        assert "fleet_objects_frozen 1.0" in ctl.metrics.render()[0].decode()
        shown: subprocess.CompletedProcess[str] = await anyio.to_thread.run_sync(
            lambda: fleetctl_status(sandbox, repo.cluster)
        )
        assert f"  DeviceClass {dc}: report, set by kubectl-annotate at {frozen['since']}" in shown.stdout, shown.stdout
        drift_events = [e for e in fleetsync_events(sandbox, repo.cluster) if e["reason"] == "Drift"]
        assert any(dc in e["message"] and "frozen" in e["message"] for e in drift_events), drift_events

        # A commit does not reach a frozen object either: the revision is applied around it.
        repo.device_class_expression = (
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        )
        second = remote.push(repo, message="narrow the class while it is frozen")
        held = await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, second), within=30, what="Ready")
        assert "1 object(s) frozen" in next(c for c in held["status"]["conditions"] if c["type"] == "Ready")["message"]
        assert _expression(await get(admin_client, RCT, "DeviceClass", dc)) == "true", "a commit wrote a frozen object"

        sandbox.kubectl("annotate", "deviceclass", dc, f"{DRIFT}-")
        await waits.eventually(
            lambda: _expression_is(admin_client, dc, repo.device_class_expression),
            within=REPAIR_DEADLINE,
            what="unfrozen: git's newest content applied",
        )

        async def unlisted() -> bool:
            status = (await fleetsync(admin_client, repo.cluster)).get("status") or {}
            return status.get("frozenCount") == 0

        await waits.eventually(unlisted, what="no frozen object listed")
        assert "fleet_objects_frozen 0.0" in ctl.metrics.render()[0].decode()


async def test_under_report_a_commit_on_a_person_s_field_is_a_conflict_until_git_takes_it(
    sandbox: Sandbox, remote: Remote, tmp_path: Path, admin_client: kube.Client
) -> None:
    repo = _repo(tmp_path)
    dc = repo.device_class_name
    first = remote.push(repo, message="report", edit=lambda work: _fleet_default_drift(work, "report"))
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache"):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")
        drifted = "device.driver == 'drifted'"
        sandbox.kubectl("patch", "deviceclass", dc, "--type=merge", "-p", PATCH.replace('"true"', json.dumps(drifted)))
        repo.device_class_expression = (
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        )
        second = remote.push(repo, message="narrow the class", edit=lambda work: _fleet_default_drift(work, "report"))

        async def conflicted() -> dict[str, Any] | None:
            obj = await fleetsync(admin_client, repo.cluster)
            status = obj.get("status") or {}
            return obj if status.get("lastAttemptedRevision") == second and status.get("conflicts") else None

        obj = await waits.eventually(conflicted, within=30, what="the conflict reported")
        status = obj["status"]
        assert [(c["kind"], c["name"], c["manager"]) for c in status["conflicts"]] == [
            ("DeviceClass", dc, "kubectl-patch")
        ], status["conflicts"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Conflict"), ready
        assert "kubectl-patch" in ready["message"] and "take-ownership" in ready["message"]
        assert _expression(await get(admin_client, RCT, "DeviceClass", dc)) == drifted, "report wrote the object"
        conflict_events = [e for e in fleetsync_events(sandbox, repo.cluster) if e["reason"] == "Conflict"]
        assert len(conflict_events) == 1 and "kubectl-patch" in conflict_events[0]["message"], conflict_events

        def take(work: Path) -> None:
            _fleet_default_drift(work, "report")
            path = work / "deviceclasses" / f"{dc}.yaml"
            text = path.read_text()
            annotation = '  annotations: {fleet.gpufleet.dev/take-ownership: "true"}\n'
            path.write_text(text.replace(f"  name: {dc}\n", f"  name: {dc}\n{annotation}", 1))

        third = remote.push(repo, message="take the DeviceClass's selectors back", edit=take)
        synced = await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, third), within=30, what="Ready once git takes ownership"
        )
        assert synced["status"]["conflicts"] == [] and synced["status"]["conflictCount"] == 0
        live = await get(admin_client, RCT, "DeviceClass", dc)
        assert _expression(live) == repo.device_class_expression
        assert "fleet.gpufleet.dev/take-ownership" not in ((live or {})["metadata"].get("annotations") or {})
