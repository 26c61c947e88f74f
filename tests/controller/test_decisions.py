"""The controller reads the one decision per change: a held Node label is not a failed health gate.

A GPU pod selects its node by a pool's label; a commit changes that label and adds a team
template while the maintenance window is closed. The label is held (the pod would no longer
match its node), the template applies, and the controller reports ``Waiting`` and a ``pending``
commit status, not ``ReconcileFailed`` and ``failure`` after the health timeout: the pools gate
verifies what the run wrote, never the held label.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet import hosts, kube
from fleet.hosts import providers
from fleet.sandbox import Sandbox
from tests import waits
from tests.apply.repos import Repo
from tests.changes.test_holds import closed_window, selecting_trainer
from tests.conftest import Kubectl
from tests.controller.conftest import Remote, running
from tests.controller.test_holds import ready
from tests.controller.test_loop import fleetsync
from tests.hosts.apis import StatusAPI

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

NODE = "l4x4-01"


def states(api: StatusAPI, sha: str) -> list[str]:
    with api.lock:
        return [str(r.json()["state"]) for r in api.received if r.path.endswith(f"/statuses/{sha}")]


async def test_a_held_pool_label_leaves_the_controller_waiting_and_pending_not_failed(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, kubectl: Kubectl, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused")
    label = f"t{repo.id}.example.com/p"
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    repo.pool(
        "l4", selector={"sandbox.fleet.gpufleet.dev/pool": "l4x4"}, labels={label: "l4"}, gpus=4, product="NVIDIA L4"
    )
    ns = repo.ns("ml")
    first = remote.push(repo, message="a team and its pool")
    token = tmp_path / "token"
    token.write_text("status-token\n")
    api = StatusAPI()

    async def synced(revision: str) -> dict[str, Any] | None:
        obj = await fleetsync(admin_client, repo.cluster)
        return obj if (obj.get("status") or {}).get("lastAppliedRevision") == revision else None

    try:
        with api.serving() as base:
            target = hosts.Target(
                provider="github", api_url=f"{base}{providers.API_PATHS['github']}", repository="org/fleet"
            )
            poster = hosts.Poster(target=target, token_file=token, debounce=0.0)
            async with anyio.create_task_group() as tg:
                tg.start_soon(poster.run)
                async with running(
                    sandbox,
                    remote,
                    cluster=repo.cluster,
                    cache_dir=tmp_path / "cache",
                    poster=poster,
                    health_timeout=20,
                ):
                    await waits.eventually(lambda: synced(first), what="the team and pool applied")
                    assert selecting_trainer(kubectl, ns, label={label: "l4"}) == NODE

                    repo.cluster_spec = {"maintenance": closed_window()}
                    repo.pools["l4"] = repo.pools["l4"].replace(f'{label}: "l4"', f'{label}: "l4-renamed"')
                    repo.claim_template("ml", "added")
                    second = remote.push(repo, message="rename the pool's label; a new template")
                    obj = await waits.eventually(lambda: synced(second), what="the second commit applied", within=90)
                    [held] = obj["status"]["waiting"]
                    assert (held["kind"], held["name"], held["waitsFor"]) == ("Node", NODE, "window")
                    assert ready(obj)["reason"] == "Waiting" and ready(obj)["status"] == "True", ready(obj)
                    kubectl("get", "resourceclaimtemplate", "-n", ns, "added")
                    labels = (await admin_client.get(kube.Ref("v1", "Node", "", NODE)))["metadata"]["labels"]
                    assert labels[label] == "l4", "the held label is not written"

                    async def posted() -> list[str] | None:
                        return states(api, second) or None

                    assert (await waits.eventually(posted, what="the commit status posted"))[-1] == "pending"
                    assert "failure" not in states(api, second)
                tg.cancel_scope.cancel()
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        kubectl("label", "node", NODE, f"{label}-", "fleet.gpufleet.dev/pool-", check=False)
