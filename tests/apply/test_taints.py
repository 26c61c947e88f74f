"""Pool taints are written from a read, conditional on it: what others change meanwhile is neither lost nor restored."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from fleet import engine, kube
from fleet.engine import nodes, plans
from tests.apply.conftest import Engine, actions
from tests.apply.repos import Repo
from tests.conftest import Kubectl

pytestmark = pytest.mark.sandbox

NODE = "l4x4-01"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"


@pytest.fixture()
def node(kubectl: Kubectl, repo: Repo) -> Iterator[kube.Ref]:
    """The L4 node; afterwards its sandbox taint is back and nothing of this test is left, pass or fail."""
    yield kube.Ref("v1", "Node", "", NODE)
    kubectl("taint", "node", NODE, GPU_TAINT, "--overwrite")
    for suffix in ("dedicated", "appeared", "later"):
        kubectl("taint", "node", NODE, f"t{repo.id}.example.com/{suffix}-", check=False)
    kubectl("label", "node", NODE, f"t{repo.id}.example.com/p-", "fleet.gpufleet.dev/pool-", check=False)


def taints(fleet: Engine, ref: kube.Ref) -> dict[str, str]:
    node = fleet.run(lambda c: c.get(ref))
    return {t["key"]: t["effect"] for t in node["spec"].get("taints") or ()}


def test_taints_changed_between_read_and_write_stay_changed(
    fleet: Engine, repo: Repo, kubectl: Kubectl, node: kube.Ref
) -> None:
    ours = f"t{repo.id}.example.com/dedicated"
    appeared = f"t{repo.id}.example.com/appeared"
    repo.pool(
        "l4",
        selector={"sandbox.fleet.gpufleet.dev/pool": "l4x4"},
        labels={f"t{repo.id}.example.com/p": "l4"},
        taints=f"[{{key: {ours}, value: ml, effect: PreferNoSchedule}}]",
        gpus=4,
        product="NVIDIA L4",
    )
    plan = fleet.plan()

    def before_pools(step: str) -> None:  # after fleet's read of the Nodes, before it writes them
        if step == "pools":
            kubectl("taint", "node", NODE, f"{appeared}=yes:NoSchedule")  # e.g. the node controller's unreachable
            kubectl("taint", "node", NODE, "nvidia.com/gpu-")  # somebody removes one

    async def apply_with_changes_before_the_pools_step(c: kube.Client) -> engine.ChangeSet:
        options = engine.Options(health_timeout=30)
        return await engine.reconcile(
            client=c, plan=plan, options=options, hooks=engine.Hooks(before_step=before_pools)
        )

    changes = fleet.run(apply_with_changes_before_the_pools_step)
    assert actions(changes)[f"Node {NODE}"] == "configured" and not changes.failed
    assert taints(fleet, node) == {ours: "PreferNoSchedule", appeared: "NoSchedule"}, (
        "the added taint survives and the removed one does not come back"
    )

    repo.pools.clear()
    repo.team("ml", namespaces=["ml"], group="ml-research")
    later = f"t{repo.id}.example.com/later"

    def before_prune(step: str) -> None:
        if step == "prune":
            kubectl("taint", "node", NODE, f"{later}=yes:NoSchedule")
            kubectl("taint", "node", NODE, f"{appeared}-")

    async def release_with_a_change_before_prune(c: kube.Client) -> engine.ChangeSet:
        options = engine.Options(prune=True, health_timeout=30)
        hooks = engine.Hooks(before_step=before_prune)
        return await engine.reconcile(client=c, plan=fleet.plan(), options=options, hooks=hooks)

    released = fleet.run(release_with_a_change_before_prune)
    assert actions(released)[f"Node {NODE}"] == "deleted" and not released.failed
    assert taints(fleet, node) == {later: "NoSchedule"}, "fleet gives back only its own taint"


def l4_rule(repo: Repo, *, taint: str) -> plans.PoolRule:
    """A pool of the sandbox's L4 node with the test's label and one ``PreferNoSchedule`` taint."""
    return plans.PoolRule(
        name="l4",
        selector={"sandbox.fleet.gpufleet.dev/pool": "l4x4"},
        labels={f"t{repo.id}.example.com/p": "l4"},
        taints=({"key": taint, "effect": "PreferNoSchedule"},),
        nodes=1,
        gpu_product="NVIDIA L4",
        gpus_per_node=4,
        source="pools/l4.yaml:1:1",
    )


def test_a_node_changed_between_the_read_and_the_write_is_read_again(
    fleet: Engine, repo: Repo, kubectl: Kubectl, node: kube.Ref
) -> None:
    """The race the fresh read cannot close: a change lands after fleet's GET, before its write (409)."""
    ours = f"t{repo.id}.example.com/dedicated"
    appeared = f"t{repo.id}.example.com/appeared"
    rule = l4_rule(repo, taint=ours)
    reads: list[set[str]] = []

    def body(live: dict[str, Any]) -> dict[str, Any] | None:
        reads.append({t["key"] for t in live["spec"].get("taints") or ()})
        if len(reads) == 1:
            kubectl("taint", "node", NODE, f"{appeared}=yes:NoSchedule")  # lands between GET and write
        [desired] = plans.pool_objects((rule,), nodes=[live])
        return desired.obj

    assert fleet.run(lambda c: nodes.write(client=c, ref=node, body=lambda live: None)) is None
    assert fleet.last_client is not None and fleet.last_client.counts.writes == 0, "nothing wanted: nothing written"

    fleet.run(lambda c: nodes.write(client=c, ref=node, body=body))
    assert len(reads) == 2 and appeared not in reads[0] and appeared in reads[1]
    assert taints(fleet, node) == {"nvidia.com/gpu": "NoSchedule", appeared: "NoSchedule", ours: "PreferNoSchedule"}

    def always_changed(live: dict[str, Any]) -> dict[str, Any] | None:
        kubectl("annotate", "node", NODE, f"t{repo.id}.example.com/tick={uuid.uuid4().hex}", "--overwrite")
        return plans.release(node, live=live)

    with pytest.raises(kube.Conflict) as err:
        fleet.run(lambda c: nodes.write(client=c, ref=node, body=always_changed))
    assert f"{nodes.ATTEMPTS} times in a row" in str(err.value) and str(node) in str(err.value)
    assert ours in taints(fleet, node), "nothing was written: the release did not happen"
    kubectl("annotate", "node", NODE, f"t{repo.id}.example.com/tick-")
    fleet.run(lambda c: nodes.write(client=c, ref=node, body=lambda live: plans.release(node, live=live)))


def test_the_listed_node_is_the_first_read_and_the_write_is_conditional_on_it(
    fleet: Engine, repo: Repo, kubectl: Kubectl, node: kube.Ref
) -> None:
    """The Node as the run listed it saves a GET; a change since the listing still gets a 409 and a
    fresh read, and only a fresh read may say there is nothing to write."""
    ours = f"t{repo.id}.example.com/dedicated"
    later = f"t{repo.id}.example.com/later"
    rule = l4_rule(repo, taint=ours)
    reads: list[str] = []

    def body(live: dict[str, Any]) -> dict[str, Any] | None:
        reads.append(live["metadata"]["resourceVersion"])
        [desired] = plans.pool_objects((rule,), nodes=[live])
        return desired.obj

    listed = fleet.run(lambda c: c.get(node))
    kubectl("taint", "node", NODE, f"{later}=yes:NoSchedule")  # after the listing, before the write
    fleet.run(lambda c: nodes.write(client=c, ref=node, body=body, listed=listed))
    assert len(reads) == 2 and reads[0] == listed["metadata"]["resourceVersion"] != reads[1]
    assert fleet.last_client is not None and fleet.last_client.counts.snapshot() == {"apply": 2, "get": 1}
    assert taints(fleet, node) == {"nvidia.com/gpu": "NoSchedule", later: "NoSchedule", ours: "PreferNoSchedule"}

    current = fleet.run(lambda c: c.get(node))
    assert fleet.run(lambda c: nodes.write(client=c, ref=node, body=body, listed=current)) is not None
    assert fleet.last_client.counts.snapshot() == {"get": 1}, "as wanted when listed: read again, nothing written"

    fleet.run(
        lambda c: nodes.write(client=c, ref=node, body=lambda live: plans.release(node, live=live), listed=current)
    )
    assert fleet.last_client.counts.snapshot() == {"apply": 1}, "the listing is current: one request"
    assert taints(fleet, node) == {"nvidia.com/gpu": "NoSchedule", later: "NoSchedule"}
