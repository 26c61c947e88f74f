"""The controller walks a GPUMaintenance by itself, and a restarted controller carries it on.

Pushed to git, a maintenance of the node a job runs on goes None → (the API server's preview) →
NoSchedule without anyone running a command; NoExecute waits for the job. The controller is then
stopped and a new one started (its memory gone: the state is the cluster's rules and the ledger);
when the job ends, the new one writes NoExecute. Removing the file gives the devices back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from fleet import kube
from fleet.controller import holds
from fleet.sandbox import Sandbox
from tests import waits
from tests.apply.repos import Repo
from tests.changes.test_holds import trainer
from tests.changes.test_maintenance import effect, maintenance, rules_of
from tests.conftest import Kubectl
from tests.controller.conftest import Remote, running
from tests.controller.test_holds import applied_at

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]
LOOKS = holds.Looks(maintenance_step=3600.0)


def team_on_137(tmp_path: Path) -> tuple[Repo, str, str]:
    """A 1.37 cluster's team ``ml`` with claim ``held``: (the repository, its namespace, a maintenance name)."""
    repo = Repo(root=tmp_path / "unused", kubernetes="1.37")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    return repo, repo.ns("ml"), f"repair-{repo.id}"


async def test_the_controller_walks_a_maintenance_and_a_restarted_one_carries_it_on(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    repo, ns, name = team_on_137(tmp_path)
    first = remote.push(repo, message="a team")
    try:
        # No look after a step (``maintenance_step``): what carries the walk on is the watch, the rule's
        # preview and the job's end waking the controller, even when they come after the run that wrote it.
        async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", looks=LOOKS):
            await waits.eventually(lambda: applied_at(admin_client, repo.cluster, first), what="the team applied")
            node, uuid = trainer(kubectl, ns)
            path = maintenance(repo, name, f"{{uuids: [{uuid}]}}", reason=f"fans failing on {node}")
            remote.push(repo, message="take the node out")
            await waits.eventually(
                lambda: seen(lambda: bool(rules_of(kubectl, name)) and effect(kubectl, name) == "NoSchedule"),
                what="the controller walks the rule to NoSchedule by itself",
                details=lambda: (
                    kubectl("get", "devicetaintrules", "-o", "yaml").stdout[-2500:]
                    + json.dumps(
                        {
                            k: v
                            for k, v in json.loads(kubectl("get", "fleetsync", repo.cluster, "-o", "json").stdout)[
                                "status"
                            ].items()
                            if k in ("stages", "changes", "lastError", "waiting")
                        }
                    )[-4000:]
                ),
            )
            [rule] = rules_of(kubectl, name).values()
            assert rule["spec"]["deviceSelector"]["pool"] == node
        # A new controller: no memory of the walk; the job still runs, so NoExecute still waits.
        async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", looks=LOOKS):
            await waits.eventually(
                lambda: seen(lambda: "claims" in json.dumps(fleetsync_waiting(kubectl, repo.cluster))),
                what="the restarted controller holds NoExecute for the job",
            )
            assert effect(kubectl, name) == "NoSchedule"
            kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s")
            await waits.eventually(
                lambda: seen(lambda: effect(kubectl, name) == "NoExecute"), what="NoExecute once the job ended"
            )
            del repo.files[path]
            remote.push(repo, message="repaired")
            await waits.eventually(
                lambda: seen(lambda: not rules_of(kubectl, name)), what="the rule removed with the file"
            )
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--ignore-not-found", "--wait=false")
        for left in rules_of(kubectl, name):
            kubectl("delete", "devicetaintrule", left, check=False)


async def seen(check: Callable[[], bool]) -> bool | None:
    """``check`` (kubectl, blocking) run in a worker thread, so the controller's loop goes on meanwhile."""
    return True if await anyio.to_thread.run_sync(check) else None


def fleetsync_waiting(kubectl: Kubectl, cluster: str) -> list[dict[str, object]]:
    obj = json.loads(kubectl("get", "fleetsync", cluster, "-o", "json", check=False).stdout or "{}")
    waiting: list[dict[str, object]] = (obj.get("status") or {}).get("waiting") or []
    return waiting
