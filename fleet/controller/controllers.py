"""The controller's event loop: one anyio task group wiring source, watches, queue and engine.

```
intake   poll every --interval (up to 10 % early), or when poked (webhook) ─┐
watches  the cache's list→watch per kind; drift on fleet's objects ─────────┼─► queue ─► reconcile
resync   every --resync, whatever happened                                 ─┘   (one key: the cluster)
lag      how late the loop runs a timer (fleet_loop_lag_seconds)
leader   only the Lease holder dequeues; losing it cancels the write in flight
```

``Controller`` builds one object per concern and runs their tasks; it keeps no state of theirs:

- ``intakes``     the git source (polls, webhook pokes) and which watch events wake a reconcile
- ``reconciles``  the reconcile loop: plan the newest checkout, drive the engine, retry with backoff
- ``holds``       disruptive changes held for the rollout waves and the maintenance window; emergencies
- ``reports``     FleetSync status, Events and the revision's commit status
- ``journeys``    a revision's trace, from the fetch that found it until it is applied or refused

Here remain the loop's own housekeeping (the resync, the loop lag, the collector's settles and
sweeps) and ``cache_sizes``, which shows that every long-lived cache is bounded.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet import hosts
from fleet.controller import caches, heaps, leaders, statuses
from fleet.controller.holds import Holds
from fleet.controller.intakes import Intake, Source, wakes
from fleet.controller.journeys import Journey
from fleet.controller.metrics import Metrics, Stats
from fleet.controller.options import Options, Watching
from fleet.controller.queues import WorkQueue
from fleet.controller.reconciles import Plans, Reconciler
from fleet.controller.reports import Reporter
from fleet.engine import plancaches
from fleet.kube import Client, Kind

logger = logging.getLogger(__name__)


@dataclass
class Controller:
    client: Client
    source: Source
    options: Options
    leader: leaders.Leader = field(default_factory=leaders.Leader)
    stats: Stats = field(default_factory=Stats)
    metrics: Metrics = field(default_factory=Metrics)
    queue: WorkQueue = field(default_factory=WorkQueue)
    spec: statuses.Spec = field(default_factory=statuses.Spec)
    """The FleetSync's spec (what is followed), written when the controller creates it."""
    store: plancaches.PlanCache | None = None
    """Plans kept on disk (``reconciles.Plans.store``)."""
    poster: hosts.Poster | None = None
    """Posts each revision's outcome as a commit status on the git host; None: none posted."""
    reader: hosts.Reader | None = None
    """Reads the earlier rollout waves' commit statuses (``holds``); None: none read."""
    cache: caches.Cache = field(init=False)
    writer: statuses.Writer = field(init=False)
    """Writes the FleetSync; ``writer.current`` is the last one written (what the console shows)."""
    intake: Intake = field(init=False)
    reconciler: Reconciler = field(init=False)

    def __post_init__(self) -> None:
        cluster = self.options.cluster
        self.cache = caches.Cache(
            kinds=caches.watched_kinds(),
            on_event=self._on_event,
            on_resume=self._on_resume,
            watch_timeout=self.options.watching.timeout,
            extra=self.options.watching.extra,
        )
        report = statuses.Report(cluster=cluster)
        writer = self.writer = statuses.Writer(client=self.client, cluster=cluster, spec=self.spec)
        journey = Journey()
        self.intake = Intake(
            source=self.source,
            queue=self.queue,
            key=cluster,
            report=report,
            metrics=self.metrics,
            stats=self.stats,
            journey=journey,
            interval=self.options.interval,
            jitter=self.options.jitter,
        )
        self.reconciler = Reconciler(
            client=self.client,
            options=self.options,
            cache=self.cache,
            leader=self.leader,
            queue=self.queue,
            stats=self.stats,
            metrics=self.metrics,
            intake=self.intake,
            reporter=Reporter(
                report=report,
                writer=writer,
                metrics=self.metrics,
                poster=self.poster,
                target_url=self.options.commit_status_target_url,
                live=lambda key: self.cache.objects.get(key, {}).values(),
            ),
            holds=Holds(writer=writer, report=report, queue=self.queue, looks=self.options.looks, reader=self.reader),
            journey=journey,
            plans=Plans(store=self.store),
        )
        self.metrics.watch_caches(self.cache_sizes)

    @property
    def key(self) -> str:
        return self.options.cluster

    @property
    def report(self) -> statuses.Report:
        """What the FleetSync status shows (``reports``)."""
        return self.reconciler.report

    @property
    def ready(self) -> bool:
        """Caches synced and a first checkout fetched (leader or follower): what /readyz answers."""
        return self.cache.synced and self.intake.checkout is not None

    def poke(self, *, reason: str = "webhook") -> None:
        """Fetch now (the webhook calls this after verifying the delivery)."""
        self.intake.poke(reason=reason)

    def cache_sizes(self) -> dict[str, int]:
        """Entries held by each long-lived cache: every one is bounded (a limit, a sweep the one path
        always runs, or the cluster's own size for the watch cache), and ``fleet_cache_entries`` shows it."""
        reconciler = self.reconciler
        sizes = reconciler.memory.sizes()
        sizes["watch"] = self.cache.size()
        sizes["shapes"] = len(self.cache.shapes.table)
        loads = reconciler.plans.loads.sizes()
        sizes["parsed_files"] = loads["parsed"]
        sizes["file_stats"] = loads["tree"]
        sizes["last_check"] = loads["increments"]
        sizes["last_files"] = loads["last"]
        sizes["file_hashes"] = loads["digests"]
        sizes["plans"] = int(reconciler.plans.good is not None)
        sizes["drift_announced"] = len(reconciler.reporter.drift_announced)
        sizes["stuck_announced"] = len(reconciler.reporter.stuck_announced)
        sizes["overdue_announced"] = len(reconciler.holds.overdue)
        sizes["repairs"] = len(self.report.drift.repairs)
        sizes["heaps"] = self.stats.gc_frozen
        if self.poster is not None:
            sizes["commit_statuses"] = self.poster.size()
        if self.reader is not None:
            sizes["commit_status_reads"] = self.reader.size()
        return sizes

    # -- the task group ----------------------------------------------------------------------

    async def run(self) -> None:
        """Run every task until cancelled."""
        reconciler = self.reconciler
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: self.cache.run(client=self.client))
            tg.start_soon(self.intake.poll)
            tg.start_soon(self._resync)
            tg.start_soon(self._lag)
            tg.start_soon(reconciler.work)
            tg.start_soon(
                lambda: reconciler.plans.stash(after=self.options.store_after, busy=lambda: self.report.reconciling)
            )
            if self.poster is not None:
                tg.start_soon(self.poster.run)
            if self.reader is not None:
                tg.start_soon(self._close_reader, self.reader)

    @staticmethod
    async def _close_reader(reader: hosts.Reader) -> None:
        """Close the commit status reader's connections when the task group ends."""
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await reader.aclose()

    async def stop(self) -> None:
        """Stop taking work and stop writing (the object in flight finishes: the engine shields it)."""
        self.queue.close()
        self.leader.lost()

    async def _resync(self) -> None:
        while True:
            await anyio.sleep(self.options.resync)
            self.cache.renew_shapes()  # shapes of objects gone or changed since the last period go
            heaps.sweep()  # the one full collection per period (see heaps)
            heaps.trim()
            self.stats.gc_frozen = heaps.frozen()  # walks the frozen list: not on every tick, nor at each scrape
            self.metrics.loop.gc_frozen.set(self.stats.gc_frozen)
            self.queue.add(self.key, reason="resync")

    async def _lag(self) -> None:
        """How late a timer fires: the event loop's lag (blocking work on the loop shows here).
        Every ``settle_every`` seconds, survivors are moved out of the collector's sight (``heaps``)."""
        settled = time.monotonic()
        while True:
            start = time.monotonic()
            if start - settled >= self.options.settle_every:
                heaps.settle()
                settled = start
            await anyio.sleep(self.options.lag_interval)
            lag = max(0.0, time.monotonic() - start - self.options.lag_interval)
            self.stats.loop_lag = lag
            self.stats.max_loop_lag = max(self.stats.max_loop_lag, lag)
            self.metrics.loop.loop_lag.set(lag)
            self.metrics.loop.queue_depth.set(len(self.queue))
            self.metrics.loop.leader.set(1 if self.leader.leading else 0)

    def _on_resume(self, kind: Kind) -> None:
        """A watch got an answer after failures: if reconciles failed meanwhile, retry now, not after their backoff."""
        if self.queue.limiter.retries(self.key):
            self.queue.forget(self.key)
            self.queue.add(self.key, reason=f"API server answers again (watch {kind.group_kind})")

    async def _on_event(self, etype: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        if not self.cache.synced:
            return
        plan, waits = self.reconciler.plans.good, self.reconciler.holds.wakes_on
        if self.reconciler.report.reconciling:
            # What a run in progress will wait for is not known until it ends: a claim released or a
            # preview written meanwhile must still queue the next run, or nothing would.
            waits = (*waits, "claims", "preview")
        reason = wakes(etype, new, old, plan=plan, cluster=self.options.cluster, waits=waits)
        if reason:
            self.queue.add(self.key, reason=reason)


__all__ = ["Controller", "Options", "Source", "Stats", "Watching"]
