"""Concurrent edits (issue 11, item 6): a person and fleet edit the same objects.

The controller applies without force (``fleet.controller.controllers``): a field a person
took with ``kubectl patch`` is reported as a conflict naming their field manager and is
not overwritten; a field fleet never set (a label someone added) is never touched; what
fleet still owns (a deleted RoleBinding) is repaired meanwhile. Taking the field back is
an explicit commit: the manifest's ``fleet.gpufleet.dev/take-ownership: "true"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.sandbox import Sandbox
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, eventually, fleetsync_events, running
from tests.controller.test_loop import _ready_at, fleetsync, get

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

RCT = "resource.k8s.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"
DRIFTED = "device.driver == 'drifted'"


def _expression(dc: dict[str, Any] | None) -> str:
    return str((dc or {})["spec"]["selectors"][0]["cel"]["expression"])


async def test_a_person_s_field_is_reported_with_its_manager_never_overwritten_until_git_takes_it(
    sandbox: Sandbox, remote: Remote, tmp_path: Path, admin_client: kube.Client
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "single-gpu")
    ns, dc = repo.ns("ml"), repo.device_class_name
    first = remote.push(repo, message="a team and a template")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache"):
        await eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit")

        # A person, with kubectl: takes the DeviceClass's selectors (field manager kubectl-patch),
        # labels the template (a field fleet never set) and deletes a RoleBinding fleet owns.
        patch = json.dumps({"spec": {"selectors": [{"cel": {"expression": DRIFTED}}]}})
        sandbox.kubectl("patch", "deviceclass", dc, "--type=merge", "-p", patch)
        sandbox.kubectl("label", "resourceclaimtemplate", "single-gpu", "-n", ns, "owner=alice")
        sandbox.kubectl("delete", "rolebinding", "fleet-team-claims", "-n", ns)

        async def reported() -> dict[str, Any] | None:
            obj = await fleetsync(admin_client, repo.cluster)
            rb = await get(admin_client, RBAC, "RoleBinding", "fleet-team-claims", ns)
            conflicts = (obj.get("status") or {}).get("conflicts") or []
            return obj if rb is not None and conflicts else None

        obj = await eventually(reported, within=30, what="the conflict reported and the RoleBinding repaired")
        status = obj["status"]
        assert [(c["kind"], c["name"], c["manager"]) for c in status["conflicts"]] == [
            ("DeviceClass", dc, "kubectl-patch")
        ], status["conflicts"]
        assert "selectors" in status["conflicts"][0]["field"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Conflict"), ready
        assert "kubectl-patch" in ready["message"] and "take-ownership" in ready["message"]
        assert next(c for c in status["conditions"] if c["type"] == "Stalled")["status"] == "False"

        # Never silently overwritten: the person's selector and label are still there.
        assert _expression(await get(admin_client, RCT, "DeviceClass", dc)) == DRIFTED
        template = await get(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", ns)
        assert (template or {})["metadata"]["labels"]["owner"] == "alice"
        events = fleetsync_events(sandbox, repo.cluster)
        conflict_events = [e for e in events if e["reason"] == "Conflict"]
        assert len(conflict_events) == 1 and "kubectl-patch" in conflict_events[0]["message"], conflict_events
        assert conflict_events[0]["type"] == "Warning"
        print(
            f"\nconflict: {status['conflicts'][0]}\nReady: {ready['message']}\nEvent: {conflict_events[0]['message']}"
        )

        # Git takes the field back, explicitly, for this one object.
        def take(work: Path) -> None:
            path = work / "deviceclasses" / f"{dc}.yaml"
            text = path.read_text()
            annotation = '  annotations: {fleet.gpufleet.dev/take-ownership: "true"}\n'
            path.write_text(text.replace(f"  name: {dc}\n", f"  name: {dc}\n{annotation}", 1))

        second = remote.push(repo, message="take the DeviceClass's selectors back", edit=take)
        synced = await eventually(
            lambda: _ready_at(admin_client, repo.cluster, second), within=30, what="Ready once git takes ownership"
        )
        assert synced["status"]["conflicts"] == [] and synced["status"]["conflictCount"] == 0
        live = await get(admin_client, RCT, "DeviceClass", dc)
        assert _expression(live) == repo.device_class_expression
        assert "fleet.gpufleet.dev/take-ownership" not in ((live or {})["metadata"].get("annotations") or {})
        owners = {m["manager"] for m in (live or {})["metadata"]["managedFields"] if "selectors" in json.dumps(m)}
        assert "kubectl-patch" not in owners, owners
        template = await get(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", ns)
        assert (template or {})["metadata"]["labels"]["owner"] == "alice"
