"""Sending a stage's objects: server-side apply, a replace, a pool's Node from a fresh read.

Each object is written inside a shielded scope: a cancelled run (SIGTERM, lost
leadership) finishes the object in flight rather than leave a replace half done, and
objects not started are not started. The first failure of the API server itself (no
answer, 5xx, 429 after the client's retries) skips the rest of the stage
(``Writer.unavailable``). A replace deletes first, and only with the preconditions
``free`` gives: the uid fleet listed, and for a ResourceClaim the resourceVersion of a
fresh read that found it free. Every Node write is computed from a read (the listing,
then fresh ones) and carries its resourceVersion (``fleet.engine.nodes``), so a taint
somebody else added or removed meanwhile stays so.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel

from fleet.engine import blockers, decisions, healths, ledgers, nodes, plans, workers
from fleet.engine.changesets import Action, Change
from fleet.kube import Client, KubeError, NotFound, Ref
from fleet.kube.errors import UNAVAILABLE
from fleet.telemetry import tracing


class Preconditions(NamedTuple):
    """What a delete must find: the uid fleet listed, and for a claim the resourceVersion found free."""

    uid: str | None
    resource_version: str | None = None


def _nothing() -> None:
    return None


@dataclass
class Writer:
    """What sending a run's objects needs, and what the sends found (one per run, made by ``Sync``).

    Each object goes as its decision says (``Change.decision``, ``fleet.engine.decisions``): as whom,
    with or without force, by which verb; a change without a ``write`` decision is not sent
    (``decisions.require``). What the write finds (a 403, a conflict, a claim reserved since the plan)
    is recorded on the entry: an outcome, never a second verdict."""

    client: Client
    live: Mapping[str, dict[str, Any]]
    """The run's listing, by key: a replace's uid, a pool Node's first read."""
    pools: tuple[plans.PoolRule, ...] = ()
    concurrency: int = 16
    timeout: float = 120.0
    """How long a replace waits for the object it deleted to be gone (the health timeout)."""
    sent: Callable[[], None] = _nothing
    """Told after each object (progress)."""
    unavailable: KubeError | None = None
    """The first failure of the API server itself; the objects after it are not sent."""

    async def write_all(self, todo: list[tuple[Change, plans.Desired]]) -> Written:
        """Write each object concurrently; each change's result (a new entry: error, duration, outcome), in
        ``todo``'s order, and the API server's answers as the gates read them (``healths.gate_view``), by
        key: the exist gate's evidence."""
        for change, d in todo:  # before anything is sent: a change not decided ``write`` stops the writer
            decisions.require(change.decision, what=d.ref)
        tracer = tracing.tracer()
        applied: dict[str, dict[str, Any]] = {}
        results: list[Change | None] = [None] * len(todo)

        async def one(i: int) -> None:
            change, d = todo[i]
            if self.unavailable is not None:
                why = f"not sent: the API server is unavailable ({self.unavailable.what})"
                results[i] = change.replaced(action=Action.SKIPPED, reason=why)
                self.sent()
                return
            attrs = span_attributes(d.ref, change.action)
            attrs[tracing.FIELD_MANAGER] = d.field_manager
            with tracer.start_as_current_span("apply object", attributes=attrs) as span:
                started = time.monotonic()
                await anyio.lowlevel.checkpoint()
                outcome: dict[str, Any] = {}
                try:
                    with anyio.CancelScope(shield=True):
                        answer, outcome = await self._write(change, d)
                    if answer is not None:
                        applied[d.ref.key] = healths.gate_view(answer)
                except KubeError as err:
                    outcome = {"error": str(err)}
                    span.set_attribute("error.type", type(err).__name__)
                    if isinstance(err, UNAVAILABLE) and self.unavailable is None:
                        self.unavailable = err
                results[i] = change.replaced(duration=time.monotonic() - started, **outcome)
                self.sent()

        await workers.for_each(range(len(todo)), one, concurrency=self.concurrency)
        return Written(results=[r for r in results if r is not None], applied=applied)

    async def _write(self, change: Change, d: plans.Desired) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """The API server's answer, and what the write found beside it (the result's fields)."""
        decided = decisions.require(change.decision, what=d.ref)
        client = self.client.impersonating(decided.user)
        if decided.verb == "replace":
            preconditions = await free(self.client, change, self.live.get(d.ref.key))
            if isinstance(preconditions, str):  # a claim reserved since the plan: the outcome, not a verdict
                return None, {"refused": True, "error": preconditions}
            with contextlib.suppress(NotFound):
                await client.delete(
                    d.ref,
                    uid=preconditions.uid,
                    resource_version=preconditions.resource_version,
                    propagation="Foreground",
                )
            await _gone(self.client, d.ref, timeout=self.timeout)
        if decided.verb == "node-write":
            pools = self.pools

            def body(node: dict[str, Any]) -> dict[str, Any] | None:
                found = plans.pool_objects(pools, nodes=[node])  # None once no pool matches it
                return found[0].obj if found else None

            written = await nodes.write(client=client, ref=d.ref, body=body, listed=self.live.get(d.ref.key))
            if written is None:
                return None, {"reason": "no pool selects this Node any more (it changed since it was read)"}
            return written, {}
        return await client.apply(d.obj, field_manager=d.field_manager, force=decided.force), {}


class Written(NamedTuple):
    """What ``Writer.write_all`` did: each change's result (in the order given) and the answers by key."""

    results: list[Change]
    applied: dict[str, dict[str, Any]]


def guard_replace(change: Change, *, origin: ledgers.Origin, live: dict[str, Any] | None) -> Change:
    """A replace deletes the object: refuse it for what fleet did not create, and for claims in use."""
    if origin == ledgers.ADOPTED:
        return refuse(
            change,
            f"immutable fields differ, and fleet adopted this object rather than created it: replacing it "
            f"would delete it\n  hint: change the repository back, or delete {change.ref} yourself",
        )
    if change.ref.kind == "ResourceClaim":
        return refuse(change, blockers.claim_block(change.ref, live))
    return change


async def free(client: Client, change: Change, live: dict[str, Any] | None) -> Preconditions | str:
    """The preconditions of a delete fleet may make; for a claim in use, why it may not be deleted.

    Always the uid fleet listed: an object recreated since by someone else is never deleted.
    A ResourceClaim is read again first, and deleted only as that read found it (its
    resourceVersion): a claim reserved in between fails the delete (409) instead of being
    deleted from under its new pod.
    """
    if change.ref.kind != "ResourceClaim":
        return Preconditions(uid=uid_of(live))
    try:
        fresh = await client.get(change.ref)
    except NotFound:
        return Preconditions(uid=uid_of(live))
    why = blockers.claim_block(change.ref, fresh)
    if why:
        return why
    return Preconditions(uid=uid_of(live), resource_version=(fresh.get("metadata") or {}).get("resourceVersion"))


def refuse(change: Change, why: str) -> Change:
    """``change`` failed as refused when ``why`` says why ("" refuses nothing: ``change`` as it is)."""
    return change.replaced(refused=True, error=why) if why else change


async def _gone(client: Client, ref: Ref, *, timeout: float) -> None:  # noqa: ASYNC109 - the health timeout
    """Wait (bounded by the health timeout) until a replaced object is really deleted."""
    with anyio.move_on_after(timeout):
        while True:
            try:
                await client.get(ref)
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


__all__ = ["Preconditions", "Writer", "Written", "free", "guard_replace", "refuse", "span_attributes", "uid_of"]
