"""Pruning: deleting what fleet applied and the revision no longer declares, in reverse stage order.

Every deletion carries the live ``uid`` as precondition (a recreated object of the same
name is never deleted by mistake). Objects fleet adopted, and pool Nodes, are released
(fleet gives back its labels, annotations and fields), never deleted. One guard,
``blocked``, says why a deletion may not be made; ``Pruner.propose`` asks it for every
deletion before the run decides (``proposals.decide_deletion``), so ``diff`` and the prune
refuse the same deletions: a ResourceClaim in use is never deleted, a pool Node whose GPUs
claims hold is not given back, and a namespace is deleted only while it holds nothing but
what this prune deletes. ``Pruner.prune`` executes only ``write`` decisions; a claim reserved
since the decision is found by the delete's own fresh read (``writes.free``), an outcome on
the entry. A failure stops pruning after its stage. Within a stage, deletes run concurrently.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.engine import (
    blockers,
    decisions,
    deletions,
    ledgers,
    nodes,
    operators,
    ownership,
    plans,
    stages,
    workers,
)
from fleet.engine.changesets import Action, Change
from fleet.engine.listings import LiveIndex
from fleet.engine.writes import free, refuse, span_attributes, uid_of
from fleet.kube import Client, Kind, KubeError, NotFound
from fleet.telemetry import tracing


def _nothing() -> None:
    return None


@dataclass
class Pruner:
    """What deleting a run's leftovers needs (one per run, made by ``Sync``)."""

    client: Client
    ledger: ledgers.Ledger
    """The run's ledger: an entry deleted (or found gone) is dropped from it."""
    live: Mapping[str, dict[str, Any]]
    namespaced: Callable[[], Awaitable[list[Kind]]]
    """The namespaced kinds to list before deleting a namespace (discovered once per run)."""
    concurrency: int = 16
    sent: Callable[[], None] = _nothing

    async def blocked(self, change: Change, *, ours: set[str]) -> str:
        """Why this deletion may not be made ("" when it may), from the run's listing and live reads."""
        ref = change.ref
        if ref.kind == "ResourceClaim":
            return blockers.claim_block(ref, self.live.get(ref.key))
        if ref.kind == "Node":
            return await operators.pool_node_blocked(self.client, node=ref.name)
        if ref.kind == "Namespace":
            return await blockers.namespace_block(
                client=self.client, namespace=ref.name, kinds=await self.namespaced(), ours=ours
            )
        return ""

    async def propose(self, found: list[Change], *, prune: bool) -> list[Change]:
        """Before the decisions: without ``prune`` (``--prune`` not given) each deletion is skipped, saying so;
        with it, each guarded deletion the guard forbids is refused, with why; after a refusal, the later
        prune stages' deletions are not made (a refusal stops pruning after its stage, as a failure does)."""
        ours = deleted_keys(found)
        out: list[Change] = []
        for change in found:
            if not prune and change.action == Action.DELETED:
                why = "no longer declared; not pruned (--prune not given)"
                change = change.replaced(action=Action.SKIPPED, reason=why)
            elif change.action == Action.DELETED and guarded(change):
                change = refuse(change, await self.blocked(change, ours=ours))
            out.append(change)
        failed = ""
        for stage in stages.prune_order():
            here = [i for i, c in enumerate(out) if (c.stage or "claims") == stage.name]
            if failed:
                for i in here:
                    out[i] = stopped(out[i], failed)
            elif any(out[i].failed for i in here):
                failed = stage.name
        return out

    async def prune(self, found: list[Change]) -> list[tuple[Change, Change]]:
        """Delete what ``found`` decided ``write``, one stage at a time in prune order (claims before the
        classes they name, namespaces last), concurrently within a stage; a failure stops pruning after its
        stage. Each executed entry with its result."""
        results: list[tuple[Change, Change]] = []
        with tracing.tracer().start_as_current_span("prune") as span:
            span.set_attribute("fleet.deletions", sum(c.action == Action.DELETED for c in found))

            async def delete(change: Change) -> None:
                results.append((change, await self._delete(change)))
                self.sent()

            failed = ""
            for stage in stages.prune_order():
                deleting = [c for c in found if (c.stage or "claims") == stage.name and c.verdict == "write"]
                if failed:  # the decision stands; the outcome: not sent
                    results += [(c, stopped(c, failed)) for c in deleting]
                    continue
                done = len(results)
                await workers.for_each(deleting, delete, concurrency=self.concurrency)
                if any(new.failed for _, new in results[done:]):
                    failed = stage.name
        return results

    async def _delete(self, change: Change) -> Change:
        started = time.monotonic()
        live = self.live.get(change.ref.key)
        decided = decisions.require(change.decision, what=change.ref)
        # As decided: what a team's folder declared is pruned as the team, whatever its kind; its
        # Namespace, Role and ServiceAccount (tenancy, rendered from its team.yaml) are the platform's.
        client = self.client.impersonating(decided.user)
        entries = self.ledger.entries
        attributes = span_attributes(change.ref, change.action)
        attributes[tracing.STAGE] = change.stage or "claims"
        outcome: dict[str, Any] = {}
        with tracing.tracer().start_as_current_span("apply object", attributes=attributes):
            try:
                if change.release and change.ref.kind == "Node":
                    ref = change.ref
                    await nodes.write(client=client, ref=ref, body=lambda node: plans.release(ref, live=node))
                    entries.pop(change.ref.key, None)
                elif change.release:
                    current = await client.get(change.ref)
                    if uid_of(current) == uid_of(live):  # else someone recreated it since: not the object fleet adopted
                        patch = ownership.release_patch(current)
                        await client.patch(change.ref, patch, field_manager=ownership.MANAGER)
                    entries.pop(change.ref.key, None)
                else:
                    preconditions = await free(self.client, change, live)
                    if isinstance(preconditions, str):  # reserved since the decision: the outcome, not a verdict
                        outcome = {"refused": True, "error": preconditions}
                    else:
                        await client.delete(
                            change.ref, uid=preconditions.uid, resource_version=preconditions.resource_version
                        )
                        entries.pop(change.ref.key, None)
            except NotFound:
                entries.pop(change.ref.key, None)
            except KubeError as err:
                outcome = {"error": str(err)}
        return change.replaced(duration=time.monotonic() - started, **outcome)


def leftovers(*, ledger: ledgers.Ledger, desired_keys: set[str], live: LiveIndex) -> list[Change]:
    """What the ledger holds and the revision no longer declares, in prune order; ledger entries of
    objects deleted outside fleet (only the record was left) are dropped from ``ledger``."""
    stage_of = {kind: s.name for s in stages.STAGES for kind in s.kinds}
    found = deletions.planned(ledger=ledger.entries, desired_keys=desired_keys, live=live, stage_of=stage_of)
    order = {s.name: i for i, s in enumerate(stages.prune_order())}
    found.sort(key=lambda c: (order.get(c.stage, 0), c.ref))
    for key in [k for k in ledger.entries if k not in desired_keys and k not in live]:
        ledger.entries.pop(key)
    return found


def stopped(change: Change, stage: str) -> Change:
    """A deletion not made because pruning stage ``stage`` failed or was refused (others as they are)."""
    if change.action != Action.DELETED:
        return change
    return change.replaced(action=Action.SKIPPED, reason=f"not pruned: pruning stage {stage} failed")


def deleted_keys(found: list[Change]) -> set[str]:
    """What this prune deletes (not releases): in a namespace, the only objects that do not block it."""
    return {c.ref.key for c in found if c.action == Action.DELETED and not c.release}


def guarded(change: Change) -> bool:
    """Whether ``blocked`` is asked before this deletion: everything but the release of an adopted object."""
    return not change.release or change.ref.kind == "Node"


__all__ = ["Pruner", "deleted_keys", "guarded", "leftovers", "stopped"]
