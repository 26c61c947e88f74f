"""A run's Sync is freed when its run ends, without the cyclic collector.

The controller runs for months with its collector tuned down (``fleet.controller.heaps``): a run
whose Sync sits in a reference cycle keeps its live index and its 10,000 entries until a full
collection, and the process grows by that much per commit (a writer kept on the Sync holding a
bound method of it doubled the controller's RSS in ``bench/run controller``).
"""

from __future__ import annotations

import gc
import weakref

import pytest

from fleet import engine, kube
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox


def test_a_run_that_writes_and_prunes_leaves_no_cycle(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    repo.claim_template("ml", "two-gpu", count=2)
    first = fleet.plan()
    repo.claims.pop("ml/two-gpu")
    second = fleet.plan()

    async def runs(client: kube.Client) -> list[weakref.ref[engine.Sync]]:
        refs = []
        for plan in (first, second):  # writes every stage, then writes nothing and prunes
            sync = engine.Sync(client=client, plan=plan, options=engine.Options(prune=True, health_timeout=30))
            outcome = await engine.drive(sync)
            assert not outcome.changes.failed and outcome.error is None
            refs.append(weakref.ref(sync))
            del sync, outcome
        return refs

    gc.collect()
    gc.disable()
    try:
        refs = fleet.run(runs)
        assert [r() for r in refs] == [None, None], "a Sync outlived its run: it is in a reference cycle"
    finally:
        gc.enable()
