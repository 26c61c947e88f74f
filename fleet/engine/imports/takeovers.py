"""The import's one write to the cluster: fleet takes over what the repository now declares.

After ``fleetctl import`` the promise is that ``diff`` shows nothing and ``apply``
writes nothing. Both need the cluster to carry what fleet's own apply leaves: its
ownership labels and annotations on every object, and the ledger. So the import
ends with an apply of the repository it just wrote, through the one driver
(``fleet.engine.drives``), without pruning, under the cluster's Lease. The
mapping's ``handover`` tells it which objects become fleet's (``created``) and
which it adopts; their content is what the cluster already holds, so the apply
changes only fleet's marks. The Nodes its pools select are handed over too (adopted,
as pool Nodes always are): the import read them and made the pools from their labels
and taints. An object handed over is not dry-run before its write
(``fleet.engine.diffs``): the dry-run would only say "configured" before the same apply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import anyio

from fleet import engine, kube
from fleet.engine import ledgers, listings, pipelines, plans, writers


async def take_over(
    *,
    root: Path,
    cluster: str,
    plan: plans.Plan | None = None,
    client: kube.Client,
    handover: Mapping[str, ledgers.Origin],
    options: engine.Options,
) -> engine.Outcome:
    """Apply ``root`` (``plan``, when already made) to ``cluster`` under ``options`` (``fleetctl import``'s
    flags), recording ``handover``'s origins in the ledger."""
    if plan is None:
        plan = await anyio.to_thread.run_sync(lambda: pipelines.load_plan(root, cluster=cluster))
    async with writers.lock(client=client, cluster=cluster):
        prefetched = await listings.prefetch(client=client)
        pooled: dict[str, ledgers.Origin] = {
            key: "adopted"
            for key, node in prefetched.live.items()
            if key.startswith("/Node/") and any(p.matches(node) for p in plan.pools)
        }
        taking = dataclasses.replace(options, handover={**pooled, **handover})
        sync = engine.Sync(client=client, plan=plan, options=taking, prefetched=prefetched)
        return await engine.drive(sync)


__all__ = ["take_over"]
