"""What wakes a reconcile: the git source (polled, or poked by a webhook) and the watch events.

**The source.** A poll starts every ``--interval``, up to ``jitter`` early (drawn anew each time),
never late, counted from the start of the last (``poll_delay``); a verified webhook push pokes it
at once. A new revision queues a reconcile; a failed fetch is reported with its reason
(``SourceState``) and queues one when that changes, and the poll retries it. A git source that
cannot bring the newest commit (unreachable, refused, over its size limit, ...) leaves the last
good plan enforced.

**Watch events** (``wakes``, pure). Drift comes from watch events, never from polling: an event on
an object carrying fleet's labels for this cluster (changed or deleted by someone else) queues a
reconcile, and the engine's drift policy (enforce, report, ignore) decides what is written. Only a
change to what an object holds besides its status and the server's bookkeeping counts
(``declared_shape``: a ResourceQuota's usage changes with every claim and is not drift). Node
events count only when labels or taints change (KWOK and kubelets rewrite node status all the
time): on a pool's Node, or, on any Node, a change of the GPU Operator's
``nvidia.com/gpu-driver-upgrade-state`` label while an operator is declared. A released
ResourceClaim (deleted, or its allocation or a reservation gone) queues one while held changes
wait for jobs.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from fleet import engine
from fleet.controller import statuses
from fleet.controller.journeys import Journey
from fleet.controller.metrics import Metrics, Stats
from fleet.controller.queues import WorkQueue
from fleet.engine import disruptions, drivers, ownership
from fleet.errors import FleetError

logger = logging.getLogger(__name__)


class Source(Protocol):
    """``fleet.source.GitSource``: the newest commit of the followed ref, checked out."""

    async def sync(self, *, collect: bool = True) -> Any: ...

    async def collect(self) -> None: ...


def poll_delay(interval: float, *, busy: float, jitter: float) -> float:
    """Seconds to wait before the next poll, counted so that polls *start* every ``interval``.

    ``busy`` is how long this poll's fetch and maintenance took; ``jitter`` (a fraction, drawn by
    the caller; ``Intake`` draws it from ``[-jitter, 0]``) spreads replicas and clusters over the
    interval. Waiting a whole interval after the work instead would stretch every cycle by the fetch
    and the maintenance, and a commit's wait for the poll with it. A poll that outlasts the interval
    is followed after a tenth of it, so a slow remote is never polled back to back.
    """
    period = interval * (1 + jitter)
    return max(period - busy, interval / 10)


@dataclass
class Intake:
    """The git source's side of the loop: polls, pokes, and the newest checkout."""

    source: Source
    queue: WorkQueue
    key: str
    report: statuses.Report
    metrics: Metrics
    stats: Stats
    journey: Journey
    interval: float = 60.0
    jitter: float = 0.1
    """Each poll starts up to this fraction of the interval early, never late: replicas and clusters
    spread over the interval, and a commit is still found within one."""
    checkout: Any = None
    _poke: anyio.Event = field(default_factory=anyio.Event)

    def poke(self, *, reason: str = "webhook") -> None:
        """Fetch now (the webhook calls this after verifying the delivery)."""
        logger.info("fetch requested: %s", reason)
        self._poke.set()

    async def poll(self) -> None:
        while True:
            started = time.monotonic()
            await self.fetch()
            # Maintenance of the cache (a repack, spare checkouts) after the new revision is queued,
            # not inside its fetch. It may fail, it must never stop the poll loop: the next call tries again.
            try:
                await self.source.collect()
            except Exception as err:  # a maintenance step of a loop that never stops
                logger.warning("git source maintenance failed (tried again after the next fetch): %s", err)
            delay = poll_delay(self.interval, busy=time.monotonic() - started, jitter=random.uniform(-self.jitter, 0.0))
            with anyio.move_on_after(delay):
                await self._poke.wait()
            self._poke = anyio.Event()

    async def fetch(self) -> None:
        """Sync the source; a new revision queues a reconcile, a failure is reported (and retried by polling)."""
        self.stats.fetches += 1
        started = time.monotonic()
        source = self.report.source
        try:
            checkout = await self.source.sync(collect=False)
        except FleetError as err:
            self.stats.fetch_errors += 1
            self.metrics.git.fetch_errors.labels(reason=getattr(err, "reason", "error")).inc()
            logger.warning("git fetch failed: %s", err)
            first = str(err).splitlines()[0]
            if source.reachable or source.error != first:
                source.reachable = False
                source.error = first
                source.reason = getattr(err, "reason", "error")
                self.queue.add(self.key, reason="source unreachable")
            return
        finally:
            self.metrics.git.fetch_duration.observe(time.monotonic() - started)
        if not source.reachable:
            source.reachable, source.error, source.reason = True, "", ""
            self.queue.add(self.key, reason="source reachable again")
        if self.checkout is None or checkout.revision != self.checkout.revision:
            self.checkout = checkout
            self.journey.found(checkout)
            self.queue.add(self.key, reason=f"revision {checkout.revision[:12]}")


def wakes(
    etype: str,
    new: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    plan: engine.Plan | None,
    cluster: str,
    waits: tuple[str, ...],
) -> str:
    """Why a watch event queues a reconcile of ``cluster`` ("": it does not); ``plan`` is the one
    enforced (None: nothing is yet, and no event counts), ``waits`` what held changes wait for."""
    if plan is None:
        return ""
    meta = new.get("metadata") or {}
    if new.get("kind") == "Node":
        if etype == "MODIFIED" and _node_shape(new) == _node_shape(old):
            return ""
        if _upgrade_state(new) != _upgrade_state(old) and plan.operator is not None:
            return f"Node {meta['name']} driver upgrade {_upgrade_state(new) or '(none)'}"
        if any(p.matches(new) for p in plan.pools):
            return f"Node {meta['name']} {etype.lower()}"
        return ""
    if new.get("kind") == "ResourceClaim":
        if "claims" in waits and _released(new, old, etype):
            return f"ResourceClaim {meta.get('namespace')}/{meta.get('name')} released: a held change may go"
        return ""
    labels = meta.get("labels") or {}
    if new.get("kind") == "DeviceTaintRule" and "preview" in waits and _conditions(new) != _conditions(old):
        return f"DeviceTaintRule {meta.get('name')}: the API server's eviction preview"
    if labels.get(ownership.MANAGED_BY) != ownership.MANAGER:
        if old is None or ((old.get("metadata") or {}).get("labels") or {}).get(ownership.MANAGED_BY) is None:
            return ""
    elif labels.get(ownership.CLUSTER_LABEL, cluster) != cluster:
        return ""
    if etype == "ADDED":
        return ""  # fleet's own creations; a re-creation by someone else is not drift
    if etype == "MODIFIED" and declared_shape(new) == declared_shape(old):
        return ""  # status only (a quota's usage): nothing fleet declares can have changed
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{new.get('kind')} {where}{meta.get('name')} {etype.lower()}"


def _conditions(obj: dict[str, Any] | None) -> list[Any]:
    return list(((obj or {}).get("status") or {}).get("conditions") or ())


_SERVER_SET = frozenset({"resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"})


def declared_shape(obj: dict[str, Any] | None) -> tuple[Any, ...]:
    """What a change to ``obj`` could be drift in: everything but its status and the server's bookkeeping.

    A managed object's status changes all the time (a ResourceQuota's ``used`` with every pod that
    holds a claim); each such change is an event, and none of them can touch a field fleet declares."""
    obj = obj or {}
    meta = obj.get("metadata") or {}
    rest = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    return (rest, {k: v for k, v in meta.items() if k not in _SERVER_SET})


def _released(new: dict[str, Any], old: dict[str, Any] | None, etype: str) -> bool:
    """A ResourceClaim deleted, or its allocation or a reservation gone: devices a held change waits for are free."""
    if etype == "DELETED":
        return True
    before = old or {}
    lost = bool(disruptions.allocation(before)) and not disruptions.allocation(new)
    return lost or len(disruptions.holders(new)) < len(disruptions.holders(before))


def _node_shape(node: dict[str, Any] | None) -> tuple[Any, ...]:
    node = node or {}
    return ((node.get("metadata") or {}).get("labels"), (node.get("spec") or {}).get("taints"))


def _upgrade_state(node: dict[str, Any] | None) -> str:
    return str((((node or {}).get("metadata") or {}).get("labels") or {}).get(drivers.UPGRADE_STATE, ""))


__all__ = ["Intake", "Source", "declared_shape", "poll_delay", "wakes"]
