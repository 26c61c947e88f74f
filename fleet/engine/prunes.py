"""Pruning: deleting what fleet applied and the revision no longer declares, in reverse stage order.

Every deletion carries the live ``uid`` as precondition (a recreated object of the same
name is never deleted by mistake). Objects fleet adopted, and pool Nodes, are released
(fleet gives back its labels, annotations and fields), never deleted. One guard,
``blocked``, says why a deletion may not be made, and the preview (``diff``, a dry run)
and the prune both ask it, with the same idea of what is fleet's: a ResourceClaim in use
is never deleted, a pool Node whose GPUs claims hold is not given back, and a namespace
is deleted only while it holds nothing but what this prune deletes. Such an entry fails,
and pruning stops after its stage. Within a stage, deletes run concurrently.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from fleet.engine import blockers, deletions, disruptions, nodes, operators, ownership, plans, stages, workers
from fleet.engine.changesets import Action, Change
from fleet.engine.writes import free, refuse, span_attributes, uid_of
from fleet.kube import KubeError, NotFound
from fleet.telemetry import tracing

if TYPE_CHECKING:
    from fleet.engine.applies import Sync


async def prune(sync: Sync) -> None:
    """The prune step: plan the deletions; delete them (``--prune``), or say why each would be refused."""
    desired_keys = {d.ref.key for d in sync.plan.objects}
    desired_keys |= {d.ref.key for d in sync.desired(stages.by_name("pools"))}
    stage_of = {kind: s.name for s in stages.STAGES for kind in s.kinds}
    found = deletions.planned(ledger=sync.ledger.entries, desired_keys=desired_keys, live=sync.live, stage_of=stage_of)
    order = {s.name: i for i, s in enumerate(stages.prune_order())}
    found.sort(key=lambda c: (order.get(c.stage, 0), c.ref))
    for key in [k for k in sync.ledger.entries if k not in desired_keys and k not in sync.live]:
        sync.ledger.entries.pop(key)  # deleted outside fleet: only the record was left
    dry_run = sync.options.dry_run
    if sync.options.prune or dry_run:  # what this prune deletes (a diff shows it as deleted)
        await disruptions.classify_sync(sync, found)
        for change in found:
            sync.wait(change)  # a disruptive deletion waits as a disruptive write does, and drains as one
        await sync.drain(found)
    ours = deleted_keys(found)
    if not sync.options.prune or dry_run:
        for change in found:
            if not dry_run and change.action == Action.DELETED:
                change.action = Action.SKIPPED
                change.reason = "no longer declared; not pruned (--prune not given)"
            elif change.action == Action.DELETED and guarded(change):
                refuse(change, await blocked(sync, change, ours=ours))
        sync.changes.entries.extend(found)
        return
    with tracing.tracer().start_as_current_span("prune") as span:
        span.set_attribute("fleet.deletions", sum(c.action == Action.DELETED for c in found))

        async def delete(change: Change) -> None:
            await _delete(sync, change, ours=ours)
            sync.written()

        sync.start_writing("prune", sum(c.action == Action.DELETED for c in found))
        # One stage at a time, in prune order (claims before the classes they name, namespaces
        # last); within a stage, deletes run concurrently. A failure stops pruning after its stage.
        failed = ""
        for stage in stages.prune_order():
            here = [c for c in found if (c.stage or "claims") == stage.name]
            sync.changes.entries.extend(here)
            deleting = [c for c in here if c.action == Action.DELETED]
            if failed:
                for change in deleting:
                    change.action = Action.SKIPPED
                    change.reason = f"not pruned: pruning stage {failed} failed"
                continue
            await workers.for_each(deleting, delete, concurrency=sync.options.concurrency)
            if any(c.failed for c in deleting):
                failed = stage.name


def deleted_keys(found: list[Change]) -> set[str]:
    """What this prune deletes (not releases): in a namespace, the only objects that do not block it."""
    return {c.ref.key for c in found if c.action == Action.DELETED and not c.release}


def guarded(change: Change) -> bool:
    """Whether ``blocked`` is asked before this deletion: everything but the release of an adopted object."""
    return not change.release or change.ref.kind == "Node"


async def blocked(sync: Sync, change: Change, *, ours: set[str]) -> str:
    """Why this deletion may not be made ("" when it may), from the run's listing and live reads."""
    ref = change.ref
    if ref.kind == "ResourceClaim":
        return blockers.claim_block(ref, sync.live.get(ref.key))
    if ref.kind == "Node":
        return await operators.pool_node_blocked(sync.client, node=ref.name)
    if ref.kind == "Namespace":
        return await blockers.namespace_block(
            client=sync.client, namespace=ref.name, kinds=await sync.namespaced_kinds(), ours=ours
        )
    return ""


async def _delete(sync: Sync, change: Change, *, ours: set[str]) -> None:
    started = time.monotonic()
    live = sync.live.get(change.ref.key)
    team = (((live or {}).get("metadata") or {}).get("labels") or {}).get(ownership.TEAM_LABEL, "")
    # A team's claims are pruned as the team; its Namespace, Role and ServiceAccount (tenancy,
    # the platform's) carry its label too, but are not rendered from its directory.
    client = sync.identities.client(sync.client, team if change.stage == "claims" else "")
    attributes = span_attributes(change.ref, change.action)
    attributes[tracing.STAGE] = change.stage or "claims"
    with tracing.tracer().start_as_current_span("apply object", attributes=attributes):
        try:
            if guarded(change) and refuse(change, await blocked(sync, change, ours=ours)):
                pass
            elif change.release and change.ref.kind == "Node":
                ref = change.ref
                await nodes.write(client=client, ref=ref, body=lambda node: plans.release(ref, live=node))
                sync.ledger.entries.pop(change.ref.key, None)
            elif change.release:
                current = await client.get(change.ref)
                if uid_of(current) == uid_of(live):  # else someone recreated it since: not the object fleet adopted
                    await client.patch(change.ref, ownership.release_patch(current), field_manager=ownership.MANAGER)
                sync.ledger.entries.pop(change.ref.key, None)
            else:
                preconditions = await free(sync, change, live)
                if preconditions is not None:
                    await client.delete(
                        change.ref, uid=preconditions.uid, resource_version=preconditions.resource_version
                    )
                    sync.ledger.entries.pop(change.ref.key, None)
        except NotFound:
            sync.ledger.entries.pop(change.ref.key, None)
        except KubeError as err:
            change.error = str(err)
    change.duration = time.monotonic() - started


__all__ = ["blocked", "deleted_keys", "guarded", "prune"]
