"""Every long-lived cache of the controller stays bounded while managed objects churn.

A managed object's status changes all the time (a Node's heartbeat, a ResourceQuota's usage),
and each change is a new resourceVersion: a cache keyed by it grows with every reconcile
unless the one engine driver sweeps it. Here the controller runs on the sandbox and the
test churns the pool Nodes' resourceVersions (a label fleet does not manage, rewritten, as
heartbeats rewrite status) while reconciles run; ``fleet_cache_entries`` must stay flat.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio.lowlevel
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet import kube
from fleet.controller import controllers
from fleet.sandbox import Sandbox
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, running
from tests.waits import eventually

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

CHURNS = 12


def cache_entries(ctl: controllers.Controller) -> dict[str, float]:
    body, _ = ctl.metrics.render()
    return {
        s.labels["cache"]: s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "fleet_cache_entries"
    }


async def test_caches_stay_flat_while_managed_objects_churn(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "one-gpu")
    pool = f"t{repo.id}.example.com/pool"
    repo.pool("h100", selector={"sandbox.fleet.gpufleet.dev/pool": "h100x8"}, labels={pool: "h100"}, nodes=2)
    revision = remote.push(repo, message="a team and a pool")
    churn = f"t{repo.id}.example.com/heartbeat"
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", resync=0.2) as ctl:
        await eventually(functools.partial(_applied, ctl, revision), what="the first commit applied")
        nodes = [n["metadata"]["name"] for n in _pool_nodes(sandbox, pool)]
        assert len(nodes) == 2
        declared = len(good.objects) + len(nodes) if (good := ctl.reconciler.plans.good) else 0
        before = cache_entries(ctl)
        assert before["settled"] >= len(nodes), "the pool Nodes' answers are remembered"
        for i in range(CHURNS):
            reconciles = ctl.stats.finished
            for node in nodes:
                sandbox.kubectl("label", "node", node, f"{churn}={i}", "--overwrite")
            await eventually(functools.partial(_ran_since, ctl, reconciles), what=f"a reconcile after churn {i}")
        after = cache_entries(ctl)
    assert ctl.stats.finished >= CHURNS
    assert after["settled"] <= declared, f"one answer per declared object at most, not one per version: {after}"
    for name in (
        "settled",
        "operator_releases",
        "helm_indexes",
        "parsed_files",
        "last_check",
        "last_files",
        "file_hashes",
        "plans",
        "drift_announced",
    ):
        assert after[name] <= max(before[name], declared), f"{name} grew: {before[name]} -> {after[name]}"
    for node in nodes:
        sandbox.kubectl("label", "node", node, f"{churn}-")


async def _applied(ctl: controllers.Controller, revision: str) -> bool:
    return ctl.report.applied == revision


async def _ran_since(ctl: controllers.Controller, finished: int) -> bool:
    await anyio.lowlevel.checkpoint()
    return ctl.stats.finished > finished + 1


def _pool_nodes(sandbox: Sandbox, label: str) -> list[dict[str, Any]]:
    out = sandbox.kubectl("get", "nodes", "-l", label, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items
