"""The controller's event loop: one anyio task group wiring source, watches, queue and engine.

```
source   poll every --interval (up to 10 % early), or when poked (webhook) ─┐
watches  the cache's list→watch per kind; drift on fleet's objects ─────────┼─► queue ─► reconcile
resync   every --resync, whatever happened                                 ─┘   (one key: the cluster)
lag      how late the loop runs a timer (fleet_loop_lag_seconds)
leader   only the Lease holder dequeues; losing it cancels the write in flight
```

A reconcile is the engine's pipeline for the newest checkout, nothing else:
``pipelines.check_and_plan`` in a worker thread (loading and validating are CPU work,
and the loop must keep renewing the Lease and answering probes meanwhile), then a
step-wise ``engine.Sync`` whose live state is the watch cache (``Cache.prefetched``)
and whose health gates read the cache too — so a reconcile lists nothing.

A checkout that does not validate is never applied, not even in part: its findings go
to status and the **last good plan** stays enforced (drift on it is still repaired).
The next commit is planned afresh, so a fixing commit recovers by itself. A checkout
whose revision was already planned is not parsed again.

Drift comes from watch events, never from polling: an event on an object carrying
fleet's labels for this cluster (changed or deleted by someone else) queues a
reconcile, and the engine's drift policy (enforce, report, ignore) decides what is
written. Node events count only when labels or taints change (KWOK and kubelets
rewrite node status all the time): on a pool's Node, or, on any Node, a change of the GPU
Operator's ``nvidia.com/gpu-driver-upgrade-state`` label while an operator is declared (its
states are in FleetSync ``status.operator``). While a node is in a driver-upgrade state, one
more reconcile is queued for when it would pass ``driverStateTimeout``, so a node that stops
moving is reported as stuck on time (``statuses`` says why that leaves Ready alone).

Concurrent edits: under ``enforce`` git wins. A field fleet declares that someone changed
(``kubectl edit``, ``kubectl patch``, another controller) is taken back: the engine applies
the objects that conflict with force, on the fields fleet declares only (server-side apply
never touches the others, such as a label someone added). Every repair is a ``DriftRepaired``
Event naming the fields, the manager that had changed them and the values before and after,
a ``drift[]`` entry (``action: repaired``) and ``fleet_drift_repaired_total{stage,manager}``.
A person who must keep a hand edit freezes the live object (``fleet.gpufleet.dev/drift:
report|ignore``, ``fleet.engine.drifts``): nothing is written to it until the annotation
goes, and status lists it with who froze it and when (``fleet_objects_frozen``). Under
``report`` drift is reported and nothing is written; a commit that changes a field another
manager owns fails as a conflict naming that manager (FleetSync ``status.conflicts``,
``Ready=False`` reason ``Conflict``, a ``Conflict`` Event), retried with backoff, unless the
manifest says ``fleet.gpufleet.dev/take-ownership: "true"`` or ``--force-conflicts`` is set.

A git source that cannot bring the newest commit (unreachable, refused, over its size
limit, ...) is reported with its reason (``sourceReason``); a revision that declares no
object for the cluster is refused as a finding (``empty-revision``) unless the Fleet
sets ``spec.allowEmpty``. In every such case the last good plan stays enforced.

Teams often see only git: with a ``poster`` (``fleet.hosts.Poster``), each revision's
outcome is also handed to the git host as a commit status with context ``fleet/<cluster>``:
``pending`` when a new revision starts to be applied, ``success`` (``applied N objects``)
when it is applied completely, ``failure`` when it is refused (the first finding with its
``file:line:col``) or failed (the first error). Handing it over is a dict update
(``Poster.submit``); the poster's own task in the task group posts it, so a slow, down
or refusing host never delays or fails a reconcile, and a repeated reconcile of the same
revision posts nothing new (statuses are coalesced).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
from opentelemetry import context, trace

from fleet import engine, helm, hosts
from fleet.controller import caches, heaps, leaders, rollouts, settings, statuses
from fleet.controller.metrics import Metrics
from fleet.controller.queues import WorkQueue
from fleet.engine import disruptions, drivers, impersonations, ownership, pipelines, plancaches, waits
from fleet.errors import FleetError
from fleet.kube import Client, Kind, KubeError
from fleet.manifests.findings import Finding
from fleet.manifests.locations import Location
from fleet.telemetry import tracing

logger = logging.getLogger(__name__)


class Source(Protocol):
    """``fleet.source.GitSource``: the newest commit of the followed ref, checked out."""

    async def sync(self, *, collect: bool = True) -> Any: ...

    async def collect(self) -> None: ...


@dataclass
class Stats:
    """Counters the metrics endpoint and tests read (``fleet.controller.metrics`` exports them)."""

    reconciles: int = 0
    finished: int = 0
    """Reconciles that returned (``reconciles - finished`` is the one running now, if any)."""
    fetches: int = 0
    fetch_errors: int = 0
    plans: int = 0
    loop_lag: float = 0.0
    max_loop_lag: float = 0.0
    last_reasons: tuple[str, ...] = ()


@dataclass
class Options:
    cluster: str
    interval: float = 60.0
    resync: float = 600.0
    health_timeout: float = 120.0
    drift_policy: str | None = None
    """Overrides the repository's Fleet default (``--drift-policy``); None keeps the repository's."""
    jitter: float = 0.1
    """Each poll starts up to this fraction of the interval early (drawn anew each time), never
    late: replicas and clusters spread over the interval, and a commit is still found within one."""
    lag_interval: float = 0.5
    settle_every: float = 0.5
    """Seconds between ``heaps.settle`` calls while the loop runs (also after each reconcile): a settle
    collects what was allocated since the last, so the shorter the period the shorter each pause."""
    helm: helm.Settings | None = None
    """How the operator stage runs helm; None skips the stage (reported as skipped)."""
    team_impersonation: impersonations.Mode = "optional"
    """As whom each team's objects are written (``--team-impersonation``, ``fleet.engine.impersonations``)."""
    force_conflicts: bool = False
    """Take fields other field managers own under every policy (``--force-conflicts``); default: ``enforce``
    takes back the fields fleet declares, ``report`` reports them as conflicts."""
    watch_timeout: int = 240
    """Seconds the API server keeps each watch open (``timeoutSeconds``) before it is resumed."""
    commit_status_target_url: str = ""
    """The link posted with each commit status (``{sha}`` and ``{cluster}`` replaced); "" for none."""
    store_after: float = 10.0
    """Seconds without a newer plan before the last one is put in the plan store (and at shutdown)."""
    emergency_poll: float = 60.0
    """While changes wait for a maintenance window, seconds between reads of the FleetSync for an
    emergency annotation (``fleet.gpufleet.dev/emergency``)."""
    wave_poll: float = 30.0
    """Seconds between looks at the earlier rollout waves' commit statuses while a change waits for them
    to report (a bake's end is looked at when it comes)."""


def poll_delay(interval: float, *, busy: float, jitter: float) -> float:
    """Seconds to wait before the next poll, counted so that polls *start* every ``interval``.

    ``busy`` is how long this poll's fetch and maintenance took; ``jitter`` (a fraction, drawn by
    the caller; the controller draws it from ``[-Options.jitter, 0]``) spreads replicas and
    clusters over the interval. Waiting a whole interval after
    the work instead would stretch every cycle by the fetch and the maintenance, and a commit's
    wait for the poll with it. A poll that
    outlasts the interval is followed after a tenth of it, so a slow remote is never polled
    back to back.
    """
    period = interval * (1 + jitter)
    return max(period - busy, interval / 10)


@dataclass
class Controller:
    client: Client
    source: Source
    options: Options
    leader: leaders.Leader = field(default_factory=leaders.Leader)
    report: statuses.Report = field(init=False)
    stats: Stats = field(default_factory=Stats)
    metrics: Metrics = field(default_factory=Metrics)
    queue: WorkQueue = field(default_factory=WorkQueue)
    cache: caches.Cache = field(init=False)
    writer: statuses.Writer = field(init=False)
    checkout: Any = None
    good: engine.Plan | None = None
    loads: pipelines.LoadCache = field(default_factory=pipelines.LoadCache)
    """Kept between plans: a commit re-reads and re-parses only the files it changed."""
    store: plancaches.PlanCache | None = None
    """Plans kept on disk (the state directory's volume): a restarted container takes the plan of an
    unchanged revision back instead of validating and planning it again."""
    memory: engine.Memory = field(default_factory=engine.Memory)
    """Kept between reconciles, bounded: a repeated no-op re-derives no "unchanged" answer, and an
    unchanged operator release costs no helm process."""
    poster: hosts.Poster | None = None
    """Posts each revision's outcome as a commit status on the git host; None: none posted."""
    reader: hosts.Reader | None = None
    """Reads the earlier rollout waves' commit statuses (``rollouts``); None: a cluster of a later wave
    holds every disruptive change, as it cannot tell what the earlier waves did."""
    _opened: str = ""
    """The revision the earlier waves let go (success standing for the bake): not read again."""
    _concluded: str = ""
    """The revision whose outcome (success or failure) was last handed to the poster: a reconcile
    retried after a failure posts no ``pending`` again, only a changed outcome."""
    _checked: str = ""
    _unstored: pipelines.Checked | None = None
    """The last plan made, until it is in ``store`` (``_stash``)."""
    _planned_at: float = 0.0
    _reported: set[tuple[str, str, str, str]] = field(default_factory=set)
    """Drift already announced by an Event: drift left alone under ``report`` is seen by every
    reconcile, and one Event per object (until it changes or goes) is enough."""
    _stuck: set[tuple[str, str]] = field(default_factory=set)
    """(node, state) of GPU nodes whose stuck driver upgrade was announced by an Event."""
    _poke: anyio.Event = field(default_factory=anyio.Event)
    _unavailable: KubeError | None = None
    """The API server failure (no answer, 5xx, 429) that ended the last sync, if one did."""
    _frozen: int = 0
    """Objects out of the collector's sight (``heaps``) at the last sweep."""
    _journey: tuple[str, trace.SpanContext] | None = None
    """The newest revision and the ``git fetch`` span that found it, until the revision is applied
    or refused: every reconcile meanwhile continues that trace (FleetSync ``status.traceID``)."""
    _journeyed: trace.SpanContext | None = None
    """The ``git fetch`` span of the last revision applied or refused: other reconciles link to it."""
    _waits: tuple[str, ...] = ()
    """What the last run's held-back disruptive changes wait for (``window``, ``claims``): a released
    claim then wakes a reconcile, and status is read afresh for an emergency annotation."""
    _emergency_announced: tuple[str, str] = ("", "")
    """(revision, why) of the emergency last announced by an Event."""
    _overdue: set[str] = field(default_factory=set)
    """``Ref.key`` of held changes announced overdue by an Event (those still overdue: bounded by them)."""

    def __post_init__(self) -> None:
        self.report = statuses.Report(cluster=self.options.cluster)
        self.cache = caches.Cache(
            kinds=caches.watched_kinds(),
            on_event=self._on_event,
            on_resume=self._on_resume,
            watch_timeout=self.options.watch_timeout,
        )
        self.writer = statuses.Writer(client=self.client, cluster=self.options.cluster)
        self.metrics.watch_caches(self.cache_sizes)

    @property
    def key(self) -> str:
        return self.options.cluster

    def cache_sizes(self) -> dict[str, int]:
        """Entries held by each long-lived cache: every one is bounded (a limit, a sweep the one path
        always runs, or the cluster's own size for the watch cache), and ``fleet_cache_entries`` shows it."""
        sizes = self.memory.sizes()
        sizes["watch"] = self.cache.size()
        sizes["shapes"] = len(self.cache.shapes.table)
        loads = self.loads.sizes()
        sizes["parsed_files"] = loads["parsed"]
        sizes["file_stats"] = loads["tree"]
        sizes["last_check"] = loads["increments"]
        sizes["last_files"] = loads["last"]
        sizes["file_hashes"] = loads["digests"]
        sizes["plans"] = int(self.good is not None)
        sizes["drift_announced"] = len(self._reported)
        sizes["stuck_announced"] = len(self._stuck)
        sizes["overdue_announced"] = len(self._overdue)
        sizes["repairs"] = len(self.report.repairs)
        sizes["heaps"] = self._frozen
        if self.poster is not None:
            sizes["commit_statuses"] = self.poster.size()
        if self.reader is not None:
            sizes["commit_status_reads"] = self.reader.size()
        return sizes

    # -- the task group ----------------------------------------------------------------------

    async def run(self) -> None:
        """Run every task until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: self.cache.run(client=self.client))
            tg.start_soon(self._poll)
            tg.start_soon(self._resync)
            tg.start_soon(self._lag)
            tg.start_soon(self._work)
            tg.start_soon(self._stash)
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

    def poke(self, *, reason: str = "webhook") -> None:
        """Fetch now (the webhook calls this after verifying the delivery)."""
        logger.info("fetch requested: %s", reason)
        self._poke.set()

    @property
    def ready(self) -> bool:
        """Caches synced and a first checkout fetched (leader or follower): what /readyz answers."""
        return self.cache.synced and self.checkout is not None

    async def _poll(self) -> None:
        while True:
            started = time.monotonic()
            await self.fetch()
            # Maintenance of the cache (a repack, spare checkouts) after the new revision is queued,
            # not inside its fetch. It may fail, it must never stop the poll loop: the next call tries again.
            try:
                await self.source.collect()
            except Exception as err:  # a maintenance step of a loop that never stops
                logger.warning("git source maintenance failed (tried again after the next fetch): %s", err)
            delay = poll_delay(
                self.options.interval,
                busy=time.monotonic() - started,
                jitter=random.uniform(-self.options.jitter, 0.0),
            )
            with anyio.move_on_after(delay):
                await self._poke.wait()
            self._poke = anyio.Event()

    async def fetch(self) -> None:
        """Sync the source; a new revision queues a reconcile, a failure is reported (and retried by polling)."""
        self.stats.fetches += 1
        started = time.monotonic()
        try:
            checkout = await self.source.sync(collect=False)
        except FleetError as err:
            self.stats.fetch_errors += 1
            self.metrics.fetch_errors.labels(reason=getattr(err, "reason", "error")).inc()
            logger.warning("git fetch failed: %s", err)
            first = str(err).splitlines()[0]
            if self.report.source_reachable or self.report.source_error != first:
                self.report.source_reachable = False
                self.report.source_error = first
                self.report.source_reason = getattr(err, "reason", "error")
                self.queue.add(self.key, reason="source unreachable")
            return
        finally:
            self.metrics.fetch_duration.observe(time.monotonic() - started)
        if not self.report.source_reachable:
            self.report.source_reachable, self.report.source_error, self.report.source_reason = True, "", ""
            self.queue.add(self.key, reason="source reachable again")
        if self.checkout is None or checkout.revision != self.checkout.revision:
            self.checkout = checkout
            found = getattr(checkout, "fetched_in", None)  # a source that does not trace has none
            self._journey = (checkout.revision, found) if found is not None and found.is_valid else None
            self.queue.add(self.key, reason=f"revision {checkout.revision[:12]}")

    async def _resync(self) -> None:
        while True:
            await anyio.sleep(self.options.resync)
            self.cache.renew_shapes()  # shapes of objects gone or changed since the last period go
            heaps.sweep()  # the one full collection per period (see heaps)
            heaps.trim()
            self._frozen = heaps.frozen()  # walks the frozen list: not on every tick, nor at each scrape
            self.metrics.gc_frozen.set(self._frozen)
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
            self.metrics.loop_lag.set(lag)
            self.metrics.queue_depth.set(len(self.queue))
            self.metrics.leader.set(1 if self.leader.leading else 0)

    def _on_resume(self, kind: Kind) -> None:
        """A watch got an answer after failures: if reconciles failed meanwhile, retry now, not after their backoff."""
        if self.queue.limiter.retries(self.key):
            self.queue.forget(self.key)
            self.queue.add(self.key, reason=f"API server answers again (watch {kind.group_kind})")

    async def _on_event(self, etype: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        if not self.cache.synced or self.good is None:
            return
        if new.get("kind") == "Node":
            if etype == "MODIFIED" and _node_shape(new) == _node_shape(old):
                return
            if _upgrade_state(new) != _upgrade_state(old) and self.good.operator is not None:
                state = _upgrade_state(new) or "(none)"
                self.queue.add(self.key, reason=f"Node {new['metadata']['name']} driver upgrade {state}")
            elif any(p.matches(new) for p in self.good.pools):
                self.queue.add(self.key, reason=f"Node {new['metadata']['name']} {etype.lower()}")
            return
        if new.get("kind") == "ResourceClaim":
            if "claims" in self._waits and _released(new, old, etype):
                meta = new.get("metadata") or {}
                reason = f"ResourceClaim {meta.get('namespace')}/{meta.get('name')} released: a held change may go"
                self.queue.add(self.key, reason=reason)
            return
        labels = (new.get("metadata") or {}).get("labels") or {}
        if labels.get(ownership.MANAGED_BY) != ownership.MANAGER:
            if old is None or ((old.get("metadata") or {}).get("labels") or {}).get(ownership.MANAGED_BY) is None:
                return
        elif labels.get(ownership.CLUSTER_LABEL, self.options.cluster) != self.options.cluster:
            return
        if etype == "ADDED":
            return  # fleet's own creations; a re-creation by someone else is not drift
        if etype == "MODIFIED" and declared_shape(new) == declared_shape(old):
            return  # status only (a quota's usage): nothing fleet declares can have changed
        meta = new.get("metadata") or {}
        where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        self.queue.add(self.key, reason=f"{new.get('kind')} {where}{meta.get('name')} {etype.lower()}")

    async def _work(self) -> None:
        await self.cache.wait_synced()
        while True:
            try:
                item = await self.queue.get()
            except anyio.EndOfStream:
                return
            try:
                await self.leader.wait()
                self.stats.last_reasons = item.reasons
                started = time.monotonic()
                ok = await self.reconcile(reasons=item.reasons)
                result = "invalid" if self.report.findings else ("success" if ok else "failed")
                self.metrics.reconcile_duration.labels(result=result).observe(time.monotonic() - started)
            finally:
                self.stats.finished += 1
                self.queue.done(item.key)
                heaps.settle()
                heaps.trim()
                if not self._frozen:  # until the first resync's sweep measures it
                    self._frozen = heaps.frozen()
            if ok:
                self.queue.forget(item.key)
            else:
                delay = self.queue.add_rate_limited(item.key, reason="retry")
                failed = statuses.last_error(self.report) or self.report.source_error or "see the FleetSync status"
                logger.info("reconcile failed (%s); retrying in %.2fs", failed.splitlines()[0][:300], delay)

    # -- one reconcile -----------------------------------------------------------------------

    async def reconcile(self, *, reasons: tuple[str, ...] = ()) -> bool:
        """Plan the newest checkout (if new) and apply the newest good plan; True when nothing failed.

        Until the newest revision is applied or refused, the reconcile's span is a child of the
        ``git fetch`` span that found it, and status names that trace; any other reconcile (a
        resync, drift) is a trace of its own, linked to the fetch of the last revision concluded.
        """
        self.stats.reconciles += 1
        tracer = tracing.tracer()
        journey = self._journey
        parent, links = context.Context(), [trace.Link(self._journeyed)] if self._journeyed else []
        if journey is not None:
            parent, links = trace.set_span_in_context(trace.NonRecordingSpan(journey[1]), parent), []
            self.report.trace_id = f"{journey[1].trace_id:032x}"
        with tracer.start_as_current_span(
            "reconcile",
            context=parent,
            links=links,
            attributes={tracing.CLUSTER: self.options.cluster, "fleet.reasons": list(reasons)},
        ) as span:
            self.report.last_reconcile = statuses.now()
            await self._plan()
            plan = self.good
            if plan is None:
                await self._write_status()
                return self._traced(span, ok=self.checkout is None or not self.report.findings)
            span.set_attribute(tracing.REVISION, plan.revision)
            self.report.enforced = plan.revision
            self.report.reconciling = True
            if plan.revision != self.report.applied and self._unavailable is None:
                if plan.revision != self._concluded:
                    self._notify(plan.revision, "pending", f"applying {_objects(len(plan.objects))}")
                await self._write_status()  # Reconciling=True while a new revision is applied
            ok = False
            with self.leader.writing() as scope:
                ok = await self._sync(plan)
            if scope.cancelled_caught:
                logger.warning("leadership lost during the reconcile: stopped writing")
                self.report.reconciling = False
                return True
            self.report.reconciling = False
            if self._unavailable is not None:
                return self._traced(span, ok=False)
            held = statuses.waiting_summary(self.report.changes)
            if ok and held:
                self._notify(plan.revision, "pending", held)
            elif ok:
                self._notify(plan.revision, "success", f"applied {_objects(len(plan.objects))}")
            else:
                failed = statuses.last_error(self.report) or "see the FleetSync status"
                self._notify(plan.revision, "failure", f"failed: {failed.splitlines()[0]}")
            await self._write_status()
            return self._traced(span, ok=ok and self.report.source_reachable)

    async def _stash(self) -> None:
        """Put the last plan made in the store once no newer one came for ``store_after`` seconds,
        and at shutdown: a restart then takes it back instead of planning the revision again.
        Pickling 10,000 objects is CPU that no commit on its way to the cluster should wait for,
        and a restart needs one plan, not one per commit."""
        try:
            while True:
                await anyio.sleep(self.options.store_after / 2)
                quiet = time.monotonic() - self._planned_at >= self.options.store_after
                if self._unstored is not None and quiet and not self.report.reconciling:
                    await self._store_plan()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.options.store_after):
                await self._store_plan()

    async def _store_plan(self) -> None:
        unstored, self._unstored = self._unstored, None
        if unstored is not None:
            await anyio.to_thread.run_sync(lambda: pipelines.store_plan(self.store, unstored))

    def _traced(self, span: trace.Span, *, ok: bool) -> bool:
        """Close the reconcile's span: error status when it failed; the journey ends once applied."""
        if not ok:
            first = self.report.findings[0] if self.report.findings else None
            why = (
                statuses.last_error(self.report)
                or self.report.source_error
                or (f"{first.location} {first.rule}: {first.message}" if first else "see the FleetSync status")
            )
            span.set_status(trace.StatusCode.ERROR, why.splitlines()[0][:300])
        if self._journey is not None and self._journey[0] == self.report.applied:
            self._conclude(self.report.applied)
        return ok

    def _conclude(self, revision: str) -> None:
        if self._journey is not None and self._journey[0] == revision:
            self._journeyed, self._journey = self._journey[1], None

    async def _plan(self) -> None:
        checkout = self.checkout
        if checkout is None or checkout.revision == self._checked:
            return
        self.stats.plans += 1
        self.report.attempted = checkout.revision
        try:
            checked = await anyio.to_thread.run_sync(
                lambda: pipelines.check_and_plan(
                    Path(checkout.path),
                    cluster=self.options.cluster,
                    revision=checkout.revision,
                    cache=self.loads,
                    store=self.store,
                    changed=getattr(checkout, "changed", None),  # a source that does not diff has none
                    defer_store=True,
                )
            )
        except FleetError as err:
            # The revision cannot be planned (no Cluster of this name, a team naming a reserved
            # namespace...): refused like a finding, the last good plan stays enforced.
            checked = pipelines.Checked(revision=checkout.revision, plan=None, findings=(_unplannable(err, self.key),))
        self._checked = checkout.revision
        self._unstored = checked if checked.unstored else None
        self._planned_at = time.monotonic()
        if checked.plan is not None and checked.plan.empty and not checked.plan.allow_empty:
            checked = dataclasses.replace(checked, plan=None, findings=(_empty(self.options.cluster, self.good),))
        self.report.findings = checked.findings
        if checked.plan is not None:
            self.good = _with_policy(checked.plan, self.options.drift_policy)
            self.report.error = ""
        else:
            first = checked.findings[0]
            more = f" (and {len(checked.findings) - 1} more)" if len(checked.findings) > 1 else ""
            trace.get_current_span().set_status(
                trace.StatusCode.ERROR, f"revision {checkout.revision[:12]} refused: {first.location} {first.rule}"
            )
            self._conclude(checkout.revision)
            self._notify(checkout.revision, "failure", f"{first.location} {first.rule}: {first.message}{more}")
            await self.writer.event(
                reason="ValidationFailed",
                message=f"revision {checkout.revision[:12]} not applied: {first.location} {first.rule} {first.message}"
                + (f" (and {len(checked.findings) - 1} more)" if len(checked.findings) > 1 else ""),
                warning=True,
            )

    async def _emergency(self, plan: engine.Plan) -> tuple[str, str]:
        """(why, who) when this revision may skip the maintenance window: its commit's
        ``Fleet-Emergency:`` trailer, else the FleetSync's ``fleet.gpufleet.dev/emergency`` annotation
        (read afresh while changes wait for a window); ("", "") otherwise."""
        checkout = self.checkout
        if checkout is not None and checkout.revision == plan.revision and checkout.emergency:
            return checkout.emergency, f"commit {plan.revision[:12]} by {checkout.author}"
        if {"window", "wave"} & set(self._waits):  # what an emergency would skip holds changes: read afresh
            with contextlib.suppress(KubeError):
                self.writer.current = await self.client.get(statuses.ref(self.options.cluster))
        current = self.writer.current or {}
        why = str(((current.get("metadata") or {}).get("annotations") or {}).get(statuses.EMERGENCY) or "").strip()
        if not why:
            return "", ""
        by = statuses.annotated_by(current, statuses.EMERGENCY)
        return why, f"the FleetSync annotation {statuses.EMERGENCY}" + (f" set by {by}" if by else "")

    async def _waves(self, plan: engine.Plan, *, emergency: str) -> waits.Reported | None:
        """The earlier rollout waves' commit statuses for the plan's revision, and ``status.rollout``;
        None where no wave holds it: the cluster is in no wave or the first, an emergency skips the
        waves, or the waves let this revision go already."""
        rules = plan.rules
        if rules.wave <= 1 or not rules.earlier or emergency or self._opened == plan.revision:
            self.report.rollout = rollouts.status(rules, gate=None) if rules.wave else None
            return None
        reported = await rollouts.read(reader=self.reader, rules=rules, revision=plan.revision)
        if reported.error:
            logger.warning(
                "rollout wave %d: disruptive changes held, statuses not read: %s", rules.wave, reported.error
            )
        gate = waits.wave(rules, reported=reported, now=datetime.datetime.now(datetime.UTC))
        if gate is None:
            self._opened = plan.revision
        self.report.rollout = rollouts.status(rules, gate=gate)
        return reported

    async def _sync(self, plan: engine.Plan) -> bool:
        emergency, asked = await self._emergency(plan)
        waves = await self._waves(plan, emergency=emergency)
        options = settings.engine_options(self.options, plan=plan, emergency=emergency, reported=waves)
        sync = engine.Sync(
            client=self.client,
            plan=plan,
            options=options,
            prefetched=self.cache.prefetched(),
            reader=self.cache,
            memory=self.memory,
        )
        outcome = await engine.drive(sync)
        self._unavailable = outcome.unavailable
        error = str(outcome.error) if outcome.error is not None else ""
        changes = outcome.changes
        self._record_operator(plan, changes, refused=outcome.refused)
        self.report.changes = changes
        self._record_drift(outcome)
        self.report.error = error
        complete = outcome.complete
        if self._unavailable is not None:
            # Status and Events would fail the same way, each after the client's six attempts: the
            # reconcile is retried (and the status written) once the server answers again.
            logger.warning("the API server is unavailable, reconcile to be retried: %s", self._unavailable.what)
            return False
        if complete:
            self.report.applied = plan.revision
            self.metrics.last_success.set(time.time())
        self.metrics.record_changeset(changes)
        reported = {(d["kind"], d["namespace"], d["name"], d["action"]) for d in statuses.drift_of(changes)}
        reported |= {(c["kind"], c["namespace"], c["name"], "conflict") for c in statuses.conflicts_of(changes)}
        # An Event the server did not take ends the reconcile's Events: with kube-apiserver down, each
        # further Event would spend the client's whole retry budget too.
        recorded = True
        for reason, message, warning in statuses.events_for(changes, already=self._reported):
            recorded = await self.writer.event(reason=reason, message=message, warning=warning)
            if not recorded:
                break
        if recorded:
            self._reported = reported  # else announce the drift again next time
        if error and recorded:
            await self.writer.event(reason="Failed", message=error.splitlines()[0], warning=True)
        stuck, now_stuck = statuses.stuck_events(self.report.operator, already=self._stuck)
        for reason, message, warning in stuck if recorded else ():
            recorded = await self.writer.event(reason=reason, message=message, warning=warning)
            if not recorded:
                break
        self._stuck = now_stuck if recorded else self._stuck & now_stuck  # else announce them next time
        await self._held(changes, rules=plan.rules, emergency=emergency, asked=asked)
        trace.get_current_span().set_attribute("fleet.writes", len(changes.changed))
        return complete

    async def _held(self, changes: engine.ChangeSet, *, rules: engine.ChangeRules, emergency: str, asked: str) -> None:
        """Look again when a held change may go (a bake ends, the window opens, a deadline passes; every
        ``wave_poll`` while an earlier wave has not reported; a released claim wakes a reconcile by itself),
        and announce an emergency that let changes skip the waves and the window."""
        held = [e.waiting for e in changes.waiting if e.waiting is not None]
        self._waits = tuple(sorted({w.on for w in held}))
        looks = [waits.next_look(held, now=datetime.datetime.now(datetime.UTC))]
        if {"window", "wave"} & set(self._waits):  # a person may annotate the FleetSync for an emergency
            looks.append(self.options.emergency_poll)
        on_wave = [w for w in held if w.on == "wave"]
        if any(w.until is None for w in on_wave):  # an earlier wave has not reported yet
            looks.append(self.options.wave_poll)
        delay = min((d for d in looks if d is not None), default=None)
        if delay is not None:
            self.queue.add_after(self.key, delay=delay + 1.0, reason="a held disruptive change may go")
        if self.report.rollout is not None:
            self.report.rollout["held"] = len(on_wave)
        overdue = {e.ref.key: e for e in changes.waiting if e.waiting is not None and e.waiting.overdue}
        for key in sorted(set(overdue) - self._overdue):
            entry = overdue[key]
            if not await self.writer.event(
                reason="DisruptionOverdue", message=f"{entry.ref}: {entry.reason}", warning=True
            ):
                overdue.pop(key)  # announce it next time
        self._overdue = set(overdue)
        now = datetime.datetime.now(datetime.UTC)
        skipping = changes.disruptive if emergency and waits.emergency_skips(rules, now=now) else []
        if skipping and self._emergency_announced != (changes.revision, emergency):
            self._emergency_announced = (changes.revision, emergency)
            went = sum(1 for e in skipping if e.waiting is None)
            await self.writer.event(
                reason="EmergencyChange",
                message=f"{len(skipping)} disruptive change(s) skip the rollout waves and the maintenance window "
                f"({went} applied, the rest wait for running jobs), asked by {asked}: {emergency}",
                warning=True,
            )

    def _notify(self, revision: str, state: hosts.State, description: str) -> None:
        """Hand ``revision``'s outcome to the commit status poster (no I/O: it posts in its own task)."""
        if self.poster is None or not revision:
            return
        if state != "pending":
            self._concluded = revision
        cluster = self.options.cluster
        link = self.options.commit_status_target_url.replace("{sha}", revision).replace("{cluster}", cluster)
        self.poster.submit(
            hosts.CommitStatus(
                sha=revision, context=f"fleet/{cluster}", state=state, description=description, target_url=link
            )
        )

    def _record_drift(self, outcome: engine.Outcome) -> None:
        """Keep this run's repairs (status shows those of the last hour) and the frozen objects it found."""
        at = statuses.now()
        fresh = [d for d in statuses.drift_of(outcome.changes, at=at) if d["action"] == "repaired"]
        self.report.repairs = statuses.keep_repairs(
            fresh + self.report.repairs, now=datetime.datetime.now(datetime.UTC)
        )
        if outcome.started:
            self.report.frozen = statuses.frozen_of(outcome.frozen)
            self.metrics.frozen.set(len(self.report.frozen))

    def _record_operator(self, plan: engine.Plan, changes: engine.ChangeSet, *, refused: engine.Change | None) -> None:
        """Keep the operator release's entry for status; re-check when a node would become stuck.

        A run that stopped before the operator stage (or skipped it, done before a restart)
        leaves the last entry in place: the release did not change since.
        """
        entry = refused or next(
            (e for e in changes.entries if e.stage == "operator" and e.ref.kind == "HelmRelease"), None
        )
        if entry is not None or plan.operator is None:
            self.report.operator = entry
        seen = entry.operator if entry is not None else None
        deadline = seen.next_deadline() if seen is not None else None
        if seen is not None and deadline is not None:
            delay = (deadline - seen.checked).total_seconds() + 1.0
            self.queue.add_after(self.key, delay=delay, reason="driver upgrade: a node reaches driverStateTimeout")

    async def _write_status(self) -> None:
        self.metrics.record_report(self.report)
        try:
            await self.writer.write(self.report)
        except FleetError as err:
            logger.warning("could not write FleetSync status: %s", err)


def _objects(count: int) -> str:
    return f"{count} object{'' if count == 1 else 's'}"


def _empty(cluster: str, good: engine.Plan | None) -> Finding:
    """The finding that refuses a revision declaring nothing for ``cluster`` (it would prune everything)."""
    held = f"the {len(good.objects)} object(s) of revision {good.revision[:12]}" if good else "what fleet applied"
    return Finding(
        location=Location("fleet.yaml"),
        rule="empty-revision",
        message=f"the revision declares no object for cluster {cluster}; applying it would prune {held}",
        hint="restore the deleted files, or set spec.allowEmpty: true in fleet.yaml to empty the cluster on purpose",
    )


def _unplannable(err: FleetError, cluster: str) -> Finding:
    where = err.where.split(" (cluster ")[0] if err.where else f"clusters/{cluster}.yaml"
    return Finding(location=Location(where), rule="revision", message=err.what, hint=err.hint)


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


def _with_policy(plan: engine.Plan, policy: str | None) -> engine.Plan:
    """``--drift-policy`` replaces the policy of every object whose repository left it at the default.

    Each changed object is a copy that keeps what the original computed once (its Ref, its leaves):
    ``dataclasses.replace`` would make every commit recompute them for every object."""
    if policy is None:
        return plan
    objects = tuple(_drifting(d, policy) if d.drift == "enforce" else d for d in plan.objects)
    return dataclasses.replace(plan, objects=objects)


def _drifting(desired: engine.Desired, policy: str) -> engine.Desired:
    copy = object.__new__(type(desired))
    copy.__dict__.update(desired.__dict__)
    copy.__dict__["drift"] = policy
    return copy


__all__ = ["Controller", "Options", "Source", "Stats"]
