"""The maintenance stage's reads, for ``applies.Sync``: the rules the GPUMaintenances want this run.

The stage itself is an object stage (``objectsteps``: diff, holds, classing, waits, decisions, then
the writes and the ``devices-emptied`` gate); what differs is where its objects come from and how
its changes are classed. ``desired`` expands each ``plans.MaintenanceRule`` over the devices the live
ResourceSlices publish (``fleet.engine.maintenances``), once per run: the stage, the prune (a rule
of a maintenance still in git is not pruned) and the record read the same list. ``classify`` says
what each rule's step disrupts, from the claims allocated on its devices and the live rule's
status (the API server's eviction preview).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

import anyio

from fleet.engine import disruptions, evictions, maintenances, plans
from fleet.engine.changesets import Change
from fleet.engine.syncstate import Run

KIND = "DeviceTaintRule"


def live_rules(sync: Run) -> dict[str, dict[str, Any]]:
    """The live DeviceTaintRules the run listed, by name."""
    infix = f"/{KIND}/"  # a key is group/Kind/namespace/name: no name or namespace holds a "/"
    return {o["metadata"]["name"]: o for k, o in sync.found.live.items() if infix in k and k.split("/", 2)[1] == KIND}


def pool_nodes(
    plan: plans.Plan, nodes: Sequence[dict[str, Any]], *, named: Collection[str] | None = None
) -> dict[str, list[str]]:
    """GPUNodePool name → the live nodes its selector matches (``named``: of those pools only)."""
    pools = [p for p in plan.pools if named is None or p.name in named]
    return {p.name: [n["metadata"]["name"] for n in nodes if p.matches(n)] for p in pools}


async def desired(sync: Run) -> list[plans.Desired]:
    """Every DeviceTaintRule the revision's GPUMaintenances want now, each at its staged effect.

    Each maintenance is expanded over an inventory of the pools where it may take a device
    (``maintenances.candidates``; every pool only for one that names no pool, node, device, uuid or
    health taint): converting devices for CEL is the costly part. A process that reconciles again
    and again keeps those inventories, and what each maintenance took there, while their slices are
    unchanged (``Memory.inventories``)."""
    managed = sync.managed
    if managed.maintenance is not None:
        return list(managed.maintenance)
    plan = sync.plan
    out: list[plans.Desired] = []
    wanted = [m for m in plan.maintenances if m.api_version]
    if wanted:
        slices = await sync.classing_reads().objects(disruptions.SLICE)
        named = {p for m in wanted for p in m.targets.pools}
        nodes = [o for k, o in sync.found.live.items() if k.startswith("/Node/")] if named else []
        owned = pool_nodes(plan, nodes, named=named)
        rules = live_rules(sync)
        kept = sync.memory.inventories if sync.memory is not None else maintenances.Inventories()

        def expand() -> None:
            for rule in wanted:
                some = maintenances.candidates(rule, slices, pool_nodes=owned)
                inventory, chosen = kept.select(rule, some, pool_nodes=owned)
                found = maintenances.targets(inventory, chosen)
                out.extend(
                    maintenances.desired(rule, found, live_rules=rules, cluster=plan.cluster, revision=plan.revision)
                )

        # CPU work (devices converted for CEL, selectors evaluated): off the loop that renews the Lease.
        await anyio.to_thread.run_sync(expand)
    if sync.memory is not None:
        sync.memory.inventories.sweep()  # what this run did not read goes: an old slice's, a gone maintenance's
    managed.maintenance = tuple(out)
    return out


def rules_of(plan: plans.Plan, change: Change) -> plans.ChangeRules:
    """The change rules of ``change``: its GPUMaintenance's for a maintenance's rule, else the Cluster's."""
    if change.ref.kind != KIND:
        return plan.rules
    return plan.rules_of(maintenances.owner(change.after or change.before))


async def excused(sync: Run) -> frozenset[tuple[str, str]]:
    """(pool, device) of every device the GPUMaintenances take ("" device: a whole pool): the classes
    stage's gate does not count them against their pools (``healths.slice_problems``)."""
    if not sync.plan.maintenances:
        return frozenset()
    out: set[tuple[str, str]] = set()
    for d in await desired(sync):
        selector = d.body["spec"]["deviceSelector"]
        out.add((str(selector.get("pool", "")), str(selector.get("device", ""))))
    return frozenset(out)


def namespace_teams(plan: plans.Plan) -> dict[str, str]:
    return {ns: team for team, namespaces in plan.teams.items() for ns in namespaces}


async def classify(sync: Run, changes: list[Change]) -> list[Change]:
    """``changes``, each written DeviceTaintRule with what its step disrupts (``evictions.disruption``)."""
    rules = [
        i
        for i, c in enumerate(changes)
        if c.ref.kind == KIND and c.action in ("created", "configured") and not c.failed and c.after is not None
    ]
    if not rules:
        return changes
    claims = await sync.classing_reads().objects(disruptions.CLAIM)
    pools = {(t.driver, t.pool) for t in (maintenances.target_of(changes[i].after or {}) for i in rules)}
    by_device = evictions.device_claims(claims, pools=pools)
    teams = namespace_teams(sync.plan)
    direct = {m.name: m.direct for m in sync.plan.maintenances}
    out = list(changes)
    for i in rules:
        change = out[i]
        assert change.after is not None
        found = evictions.disruption(
            before=sync.found.live.get(change.ref.key),
            after=change.after,
            claims=by_device,
            teams=teams,
            direct=direct.get(maintenances.owner(change.after), False),
        )
        if found is not None:
            out[i] = dataclasses.replace(change, disruption=found)
    return out


__all__ = ["classify", "desired", "excused", "live_rules", "namespace_teams", "pool_nodes", "rules_of"]
