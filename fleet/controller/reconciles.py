"""The reconcile loop: the queue's one key dequeued by the leader, the newest plan applied, retried with backoff.

A reconcile is the engine's pipeline for the newest checkout, nothing else:
``pipelines.check_and_plan`` in a worker thread (loading and validating are CPU work,
and the loop must keep renewing the Lease and answering probes meanwhile), then a
step-wise ``engine.Sync`` driven by ``engine.drive``, whose live state is the watch cache
(``Cache.prefetched``) and whose health gates read the cache too — so a reconcile lists nothing.

A checkout that does not validate is never applied, not even in part: its findings go
to status and the **last good plan** stays enforced (drift on it is still repaired).
The next commit is planned afresh, so a fixing commit recovers by itself. A checkout
whose revision was already planned is not parsed again. A revision that cannot be planned for
the cluster, and one that declares no object for it (unless the Fleet sets ``spec.allowEmpty``),
is refused the same way.

Concurrent edits: under ``enforce`` git wins. A field fleet declares that someone changed
(``kubectl edit``, ``kubectl patch``, another controller) is taken back: the engine applies
the objects that conflict with force, on the fields fleet declares only (server-side apply
never touches the others, such as a label someone added). Every repair is a ``DriftRepaired``
Event, a ``drift[]`` entry (``action: repaired``) and ``fleet_drift_repaired_total{stage,manager}``.
A person who must keep a hand edit freezes the live object (``fleet.gpufleet.dev/drift:
report|ignore``, ``fleet.engine.drifts``). Under ``report`` drift is reported and nothing is
written; a commit that changes a field another manager owns fails as a conflict naming that
manager, retried with backoff, unless the manifest says ``fleet.gpufleet.dev/take-ownership:
"true"`` or ``--force-conflicts`` is set.

What a run tells (status, Events, commit statuses) is ``reports``; what its held changes wait for
is ``holds``; its trace is ``journeys``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from opentelemetry import trace

from fleet import engine
from fleet.controller import caches, heaps, leaders, sections, settings, statuses
from fleet.controller.holds import Holds
from fleet.controller.intakes import Intake
from fleet.controller.journeys import Journey
from fleet.controller.metrics import Metrics, Stats
from fleet.controller.options import Options
from fleet.controller.queues import WorkQueue
from fleet.controller.reports import Reporter
from fleet.engine import pipelines, plancaches
from fleet.errors import FleetError
from fleet.kube import Client, KubeError
from fleet.manifests.findings import Finding
from fleet.manifests.locations import Location
from fleet.telemetry import tracing

logger = logging.getLogger(__name__)


@dataclass
class Plans:
    """The plans one controller keeps: the one enforced, the parse caches, and the store on disk."""

    loads: pipelines.LoadCache = field(default_factory=pipelines.LoadCache)
    """Kept between plans: a commit re-reads and re-parses only the files it changed."""
    store: plancaches.PlanCache | None = None
    """Plans kept on disk (the state directory's volume): a restarted container takes the plan of an
    unchanged revision back instead of validating and planning it again."""
    good: engine.Plan | None = None
    checked: str = ""
    unstored: pipelines.Checked | None = None
    """The last plan made, until it is in ``store`` (``stash``)."""
    planned_at: float = 0.0

    async def check(self, checkout: Any, *, cluster: str) -> pipelines.Checked:
        """Validate and plan ``checkout`` in a worker thread; a revision that cannot be planned, or that
        declares nothing for ``cluster``, is refused with a finding."""
        try:
            checked = await anyio.to_thread.run_sync(
                lambda: pipelines.check_and_plan(
                    Path(checkout.path),
                    cluster=cluster,
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
            checked = pipelines.Checked(revision=checkout.revision, plan=None, findings=(_unplannable(err, cluster),))
        self.checked = checkout.revision
        self.unstored = checked if checked.unstored else None
        self.planned_at = time.monotonic()
        if checked.plan is not None and checked.plan.empty and not checked.plan.allow_empty:
            checked = dataclasses.replace(checked, plan=None, findings=(_empty(cluster, self.good),))
        return checked

    async def stash(self, *, after: float, busy: Callable[[], bool]) -> None:
        """Put the last plan made in the store once no newer one came for ``after`` seconds (and
        nothing is ``busy``), and at shutdown: a restart then takes it back instead of planning the
        revision again. Pickling 10,000 objects is CPU that no commit on its way to the cluster should
        wait for, and a restart needs one plan, not one per commit."""
        try:
            while True:
                await anyio.sleep(after / 2)
                quiet = time.monotonic() - self.planned_at >= after
                if self.unstored is not None and quiet and not busy():
                    await self._store()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(after):
                await self._store()

    async def _store(self) -> None:
        unstored, self.unstored = self.unstored, None
        if unstored is not None:
            await anyio.to_thread.run_sync(lambda: pipelines.store_plan(self.store, unstored))


@dataclass
class Reconciler:
    client: Client
    options: Options
    cache: caches.Cache
    leader: leaders.Leader
    queue: WorkQueue
    stats: Stats
    metrics: Metrics
    intake: Intake
    reporter: Reporter
    holds: Holds
    journey: Journey
    plans: Plans = field(default_factory=Plans)
    memory: engine.Memory = field(default_factory=engine.Memory)
    """Kept between reconciles, bounded: a repeated no-op re-derives no "unchanged" answer, and an
    unchanged operator release costs no helm process."""
    unavailable: KubeError | None = None
    """The API server failure (no answer, 5xx, 429) that ended the last sync, if one did."""

    @property
    def report(self) -> statuses.Report:
        return self.reporter.report

    async def work(self) -> None:
        """Dequeue and reconcile while leading; a failure is queued again after its backoff."""
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
                self.metrics.reconciles.reconcile_duration.labels(result=result).observe(time.monotonic() - started)
            finally:
                self.stats.finished += 1
                self.queue.done(item.key)
                heaps.settle()
                heaps.trim()
                if not self.stats.gc_frozen:  # until the first resync's sweep measures it
                    self.stats.gc_frozen = heaps.frozen()
            if ok:
                self.queue.forget(item.key)
            else:
                delay = self.queue.add_rate_limited(item.key, reason="retry")
                failed = statuses.last_error(self.report) or self.report.source.error or "see the FleetSync status"
                logger.info("reconcile failed (%s); retrying in %.2fs", failed.splitlines()[0][:300], delay)

    async def reconcile(self, *, reasons: tuple[str, ...] = ()) -> bool:
        """Plan the newest checkout (if new) and apply the newest good plan; True when nothing failed.

        Until the newest revision is applied or refused, the reconcile's span is a child of the
        ``git fetch`` span that found it, and status names that trace; any other reconcile (a
        resync, drift) is a trace of its own, linked to the fetch of the last revision concluded.
        """
        self.stats.reconciles += 1
        report, notify = self.report, self.reporter.notify
        parent, links, trace_id = self.journey.parent()
        if trace_id:
            report.trace_id = trace_id
        with tracing.tracer().start_as_current_span(
            "reconcile",
            context=parent,
            links=links,
            attributes={tracing.CLUSTER: self.options.cluster, "fleet.reasons": list(reasons)},
        ) as span:
            report.last_reconcile = statuses.now()
            await self._plan()
            plan = self.plans.good
            if plan is None:
                await self.reporter.write()
                return self._traced(span, ok=self.intake.checkout is None or not report.findings)
            span.set_attribute(tracing.REVISION, plan.revision)
            report.enforced = plan.revision
            report.reconciling = True
            if plan.revision != report.applied and self.unavailable is None:
                if plan.revision != self.reporter.concluded:
                    notify(plan.revision, "pending", f"applying {_objects(len(plan.objects))}")
                await self.reporter.write()  # Reconciling=True while a new revision is applied
            ok = False
            with self.leader.writing() as scope:
                ok = await self._sync(plan)
            if scope.cancelled_caught:
                logger.warning("leadership lost during the reconcile: stopped writing")
                report.reconciling = False
                return True
            report.reconciling = False
            if self.unavailable is not None:
                return self._traced(span, ok=False)
            held = sections.waiting_summary(report.changes)
            if ok and held:
                notify(plan.revision, "pending", held)
            elif ok:
                notify(plan.revision, "success", f"applied {_objects(len(plan.objects))}")
            else:
                failed = statuses.last_error(report) or "see the FleetSync status"
                notify(plan.revision, "failure", f"failed: {failed.splitlines()[0]}")
            await self.reporter.write()
            return self._traced(span, ok=ok and report.source.reachable)

    def _traced(self, span: trace.Span, *, ok: bool) -> bool:
        """Close the reconcile's span: error status when it failed; the journey ends once applied."""
        report = self.report
        if not ok:
            first = report.findings[0] if report.findings else None
            why = (
                statuses.last_error(report)
                or report.source.error
                or (f"{first.location} {first.rule}: {first.message}" if first else "see the FleetSync status")
            )
            span.set_status(trace.StatusCode.ERROR, why.splitlines()[0][:300])
        self.journey.conclude(report.applied)
        return ok

    async def _plan(self) -> None:
        checkout = self.intake.checkout
        if checkout is None or checkout.revision == self.plans.checked:
            return
        self.stats.plans += 1
        self.report.attempted = checkout.revision
        checked = await self.plans.check(checkout, cluster=self.options.cluster)
        self.report.findings = checked.findings
        if checked.plan is not None:
            self.plans.good = checked.plan
            self.report.error = ""
        else:
            first = checked.findings[0]
            trace.get_current_span().set_status(
                trace.StatusCode.ERROR, f"revision {checkout.revision[:12]} refused: {first.location} {first.rule}"
            )
            self.journey.conclude(checkout.revision)
            await self.reporter.refused(checkout.revision, checked.findings)

    async def _sync(self, plan: engine.Plan) -> bool:
        emergency, asked = await self.holds.emergency(plan, checkout=self.intake.checkout)
        waves = await self.holds.waves(plan, emergency=emergency)
        sync = engine.Sync(
            client=self.client,
            plan=plan,
            options=settings.engine_options(self.options, plan=plan, emergency=emergency, reported=waves),
            prefetched=self.cache.prefetched(),
            reader=self.cache,
            memory=self.memory,
        )
        outcome = await engine.drive(sync)
        self.unavailable = outcome.unavailable
        changes = outcome.changes
        recheck = self.reporter.record_operator(plan, changes, refused=outcome.refused)
        if recheck is not None:
            self.queue.add_after(
                self.options.cluster, delay=recheck, reason="driver upgrade: a node reaches driverStateTimeout"
            )
        self.reporter.record(outcome, revision=plan.revision)
        if self.unavailable is not None:
            # Status and Events would fail the same way, each after the client's six attempts: the
            # reconcile is retried (and the status written) once the server answers again.
            logger.warning("the API server is unavailable, reconcile to be retried: %s", self.unavailable.what)
            return False
        await self.reporter.announce(changes)
        await self.holds.held(changes, key=self.options.cluster, plan=plan, emergency=emergency, asked=asked)
        trace.get_current_span().set_attribute("fleet.writes", len(changes.changed))
        return outcome.complete


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


__all__ = ["Plans", "Reconciler"]
