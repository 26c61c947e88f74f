"""Sending a stage's objects: server-side apply, a replace, a pool's Node from a fresh read.

Each object is written inside a shielded scope: a cancelled run (SIGTERM, lost
leadership) finishes the object in flight rather than leave a replace half done, and
objects not started are not started. The first failure of the API server itself (no
answer, 5xx, 429 after the client's retries) skips the rest of the stage
(``Sync.unavailable``). A replace deletes first, and only with the preconditions
``free`` gives: the uid fleet listed, and for a ResourceClaim the resourceVersion of a
fresh read that found it free. Every Node write is computed from a read (the listing,
then fresh ones) and carries its resourceVersion (``fleet.engine.nodes``), so a taint
somebody else added or removed meanwhile stays so.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
import anyio.lowlevel

from fleet.engine import blockers, healths, ledgers, nodes, plans, workers
from fleet.engine.changesets import Action, Change
from fleet.kube import KubeError, NotFound, Ref
from fleet.kube.errors import UNAVAILABLE
from fleet.telemetry import tracing

if TYPE_CHECKING:
    from fleet.engine.applies import Sync


class Preconditions(NamedTuple):
    """What a delete must find: the uid fleet listed, and for a claim the resourceVersion found free."""

    uid: str | None
    resource_version: str | None = None


async def write_all(sync: Sync, todo: list[tuple[Change, plans.Desired]]) -> None:
    """Write each object concurrently (``Options.concurrency``), recording the outcome on its Change."""
    tracer = tracing.tracer()

    async def one(item: tuple[Change, plans.Desired]) -> None:
        change, d = item
        if sync.unavailable is not None:
            change.action = Action.SKIPPED
            change.reason = f"not sent: the API server is unavailable ({sync.unavailable.what})"
            sync.written()
            return
        attrs = span_attributes(d.ref, change.action)
        attrs[tracing.FIELD_MANAGER] = d.field_manager
        with tracer.start_as_current_span("apply object", attributes=attrs) as span:
            started = time.monotonic()
            await anyio.lowlevel.checkpoint()
            try:
                with anyio.CancelScope(shield=True):
                    await _write(sync, change, d)
            except KubeError as err:
                change.error = str(err)
                span.set_attribute("error.type", type(err).__name__)
                if isinstance(err, UNAVAILABLE) and sync.unavailable is None:
                    sync.unavailable = err
            change.duration = time.monotonic() - started
            sync.written()

    await workers.for_each(todo, one, concurrency=sync.options.concurrency)


async def _write(sync: Sync, change: Change, d: plans.Desired) -> None:
    # As the run decided (``fleet.engine.decisions``): a team's object is written as the team.
    decided = change.decision
    client = (
        sync.client.impersonating(decided.user) if decided is not None else sync.identities.client(sync.client, d.team)
    )
    if change.replace:
        preconditions = await free(sync, change, sync.live.get(d.ref.key))
        if preconditions is None:
            return
        with contextlib.suppress(NotFound):
            await client.delete(
                d.ref, uid=preconditions.uid, resource_version=preconditions.resource_version, propagation="Foreground"
            )
        await _gone(sync, d.ref)
    if d.ref.kind == "Node":
        pools = sync.plan.pools

        def body(node: dict[str, Any]) -> dict[str, Any] | None:
            found = plans.pool_objects(pools, nodes=[node])  # None once no pool matches it
            return found[0].obj if found else None

        written = await nodes.write(client=client, ref=d.ref, body=body, listed=sync.live.get(d.ref.key))
        if written is None:
            change.reason = "no pool selects this Node any more (it changed since it was read)"
        else:
            sync.applied[d.ref.key] = healths.gate_view(written)
    else:
        force = sync.options.force_conflicts or d.force or change.forced
        answer = await client.apply(d.obj, field_manager=d.field_manager, force=force)
        sync.applied[d.ref.key] = healths.gate_view(answer)


def guard_replace(sync: Sync, change: Change) -> None:
    """A replace deletes the object: refuse it for what fleet did not create, and for claims in use."""
    if sync.origin(change.ref.key) == ledgers.ADOPTED:
        refuse(
            change,
            f"immutable fields differ, and fleet adopted this object rather than created it: replacing it "
            f"would delete it\n  hint: change the repository back, or delete {change.ref} yourself",
        )
    elif change.ref.kind == "ResourceClaim":
        refuse(change, blockers.claim_block(change.ref, sync.live.get(change.ref.key)))


async def free(sync: Sync, change: Change, live: dict[str, Any] | None) -> Preconditions | None:
    """The preconditions of a delete fleet may make; None (and the entry refused) for a claim in use.

    Always the uid fleet listed: an object recreated since by someone else is never deleted.
    A ResourceClaim is read again first, and deleted only as that read found it (its
    resourceVersion): a claim reserved in between fails the delete (409) instead of being
    deleted from under its new pod.
    """
    if change.ref.kind != "ResourceClaim":
        return Preconditions(uid=uid_of(live))
    try:
        fresh = await sync.client.get(change.ref)
    except NotFound:
        return Preconditions(uid=uid_of(live))
    if refuse(change, blockers.claim_block(change.ref, fresh)):
        return None
    return Preconditions(uid=uid_of(live), resource_version=(fresh.get("metadata") or {}).get("resourceVersion"))


def refuse(change: Change, why: str) -> bool:
    """Fail ``change`` as refused when ``why`` says why ("" refuses nothing); True if refused."""
    if not why:
        return False
    change.refused = True
    change.error = why
    return True


async def _gone(sync: Sync, ref: Ref) -> None:
    """Wait (bounded by the health timeout) until a replaced object is really deleted."""
    with anyio.move_on_after(sync.options.health_timeout):
        while True:
            try:
                await sync.client.get(ref)
            except NotFound:
                return
            await anyio.sleep(0.2)


def uid_of(obj: dict[str, Any] | None) -> str | None:
    uid = ((obj or {}).get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def span_attributes(ref: Ref, action: Action) -> dict[str, Any]:
    return {
        tracing.KIND: ref.kind,
        tracing.NAMESPACE: ref.namespace,
        tracing.NAME: ref.name,
        tracing.ACTION: str(action),
    }


__all__ = ["Preconditions", "free", "guard_replace", "refuse", "span_attributes", "uid_of", "write_all"]
