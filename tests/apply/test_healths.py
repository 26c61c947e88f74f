"""Health gates wait by watching: one list, then the change that makes the stage healthy."""

from __future__ import annotations

import anyio
import pytest

from fleet import engine, kube
from fleet.engine import healths, stages
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox


def test_pools_gate_passes_when_a_watched_node_gets_its_label(fleet: Engine, repo: Repo) -> None:
    label = f"t{repo.id}.example.com/pool"
    repo.pool("h100", selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"}, labels={label: "h100"}, nodes=2)
    plan = fleet.plan()
    nodes = ["h100x8-01", "h100x8-02"]

    def patch(name: str, value: str | None) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {label: value}}}

    async def main(c: kube.Client) -> dict[str, int]:
        # Someone else labels the nodes, one at a time, only once the gate is watching.
        async def label_later() -> None:
            while c.counts.by_verb["watch"] == 0:  # noqa: ASYNC110 - the only sign that the watch is open
                await anyio.sleep(0.05)
            for name in nodes:
                await c.apply(patch(name, "h100"), field_manager="t-labeller")

        async with anyio.create_task_group() as tg:
            tg.start_soon(label_later)
            await healths.wait(client=c, stage=stages.by_name("pools"), written=[], plan=plan, timeout=60)
        return c.counts.snapshot()

    try:
        counts = fleet.run(main)
    finally:

        async def unlabel(c: kube.Client) -> None:
            for name in nodes:
                await c.apply(
                    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}, field_manager="t-labeller"
                )

        fleet.run(unlabel)
    assert counts["list"] == 1, "Nodes were listed once and then watched, not polled"
    assert counts["watch"] == 1


def test_exist_gate_needs_no_request_when_the_writes_prove_it(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    plan = fleet.plan()

    async def main(c: kube.Client) -> tuple[int, dict[str, int]]:
        lists: list[int] = []

        def after_start(step: str) -> None:  # start has read the ledger and the live objects
            if not lists:
                lists.append(c.counts.by_verb["list"])

        changes = await engine.reconcile(
            client=c, plan=plan, options=engine.Options(health_timeout=30), hooks=engine.Hooks(before_step=after_start)
        )
        # the class; the team's namespace, ServiceAccount, Role, RoleBinding, quota and template
        assert not changes.failed and len(changes.changed) == 7
        return c.counts.by_verb["list"] - lists[0], c.counts.snapshot()

    lists, counts = fleet.run(main)
    assert lists == 0, "three stages wrote and passed their gates without a list"
    assert counts.get("watch", 0) == 0


def test_a_reader_stands_in_for_the_gates_own_watches(fleet: Engine, repo: Repo) -> None:
    """The controller passes its watch cache as the reader; here the client itself reads (it lists)."""
    label = f"t{repo.id}.example.com/pool"
    repo.pool("h100", selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"}, labels={label: "h100"}, nodes=2)
    plan = fleet.plan()

    async def main(c: kube.Client) -> dict[str, int]:
        with pytest.raises(engine.HealthTimeout) as err:
            await healths.wait(client=c, stage=stages.by_name("pools"), written=[], plan=plan, timeout=1, reader=c)
        assert "pool h100 labels missing" in str(err.value)
        return c.counts.snapshot()

    counts = fleet.run(main)
    assert counts.get("watch", 0) == 0 and counts["list"] >= 1
