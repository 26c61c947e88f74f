"""What a reconcile tells: FleetSync status, Events and the revision's commit status.

The reconcile hands each run's outcome here; ``Reporter`` keeps the ``Report`` that status is a
view of (``statuses``), the cluster's GPUMaintenances as the run left them (read from the watch
cache, ``live``), records the run's Events once each (``events``), sets the metrics, and
hands the revision's outcome to the git host as a commit status with context ``fleet/<cluster>``
(``rollouts.CONTEXT``): ``pending`` when a new revision starts to be applied, ``success``
(``applied N objects``) when it is applied completely, ``failure`` when it is refused (the first
finding with its ``file:line:col``) or failed (the first error). Handing it over is a dict update
(``Poster.submit``); the poster's own task in the task group posts it, so a slow, down or refusing
host never delays or fails a reconcile, and a repeated reconcile of the same revision posts
nothing new (statuses are coalesced).
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass, field

from fleet import engine, hosts
from fleet.controller import events, rollouts, sections, statuses
from fleet.controller.metrics import Metrics
from fleet.errors import FleetError
from fleet.manifests.findings import Finding

logger = logging.getLogger(__name__)


@dataclass
class Reporter:
    report: statuses.Report
    writer: statuses.Writer
    metrics: Metrics
    poster: hosts.Poster | None = None
    """Posts each revision's outcome as a commit status on the git host; None: none posted."""
    target_url: str = ""
    """The link posted with each commit status (``{sha}`` and ``{cluster}`` replaced); "" for none."""
    concluded: str = ""
    """The revision whose outcome (success or failure) was last handed to the poster: a reconcile
    retried after a failure posts no ``pending`` again, only a changed outcome."""
    drift_announced: set[tuple[str, str, str, str]] = field(default_factory=set)
    """Drift already announced by an Event: drift left alone under ``report`` is seen by every
    reconcile, and one Event per object (until it changes or goes) is enough."""
    stuck_announced: set[tuple[str, str]] = field(default_factory=set)
    """(node, state) of GPU nodes whose stuck driver upgrade was announced by an Event."""
    live: sections.Live = lambda _: ()
    """The live objects of a kind (the watch cache): the GPUMaintenances' rules, claims and slices."""

    def notify(self, revision: str, state: hosts.State, description: str) -> None:
        """Hand ``revision``'s outcome to the commit status poster (no I/O: it posts in its own task)."""
        if self.poster is None or not revision:
            return
        if state != "pending":
            self.concluded = revision
        cluster = self.report.cluster
        link = self.target_url.replace("{sha}", revision).replace("{cluster}", cluster)
        context = rollouts.context_of(cluster)
        self.poster.submit(
            hosts.CommitStatus(sha=revision, context=context, state=state, description=description, target_url=link)
        )

    async def refused(self, revision: str, findings: tuple[Finding, ...]) -> None:
        """A revision that does not validate (or cannot be planned, or is empty): a commit status and an Event."""
        first = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        self.notify(revision, "failure", f"{first.location} {first.rule}: {first.message}{more}")
        await self.writer.event(
            reason="ValidationFailed",
            message=f"revision {revision[:12]} not applied: {first.location} {first.rule} {first.message}{more}",
            warning=True,
        )

    def record(self, outcome: engine.Outcome, *, revision: str) -> None:
        """Keep the run's changes and error for status, its repairs (status shows those of the last hour)
        and the frozen objects it found."""
        self.report.changes = outcome.changes
        at = statuses.now()
        fresh = [d for d in sections.drift_of(outcome.changes, at=at) if d["action"] == "repaired"]
        drift = self.report.drift
        drift.repairs = sections.keep_repairs(fresh + drift.repairs, now=datetime.datetime.now(datetime.UTC))
        if outcome.started:
            drift.frozen = sections.frozen_of(outcome.frozen)
            self.metrics.reconciles.frozen.set(len(drift.frozen))
        self.report.maintenances = sections.maintenances_of(outcome.changes, live=self.live)
        self.metrics.record_maintenances(self.report)
        self.report.error = str(outcome.error) if outcome.error is not None else ""
        if outcome.unavailable is None and outcome.complete:
            self.report.applied = revision
            self.metrics.reconciles.last_success.set(time.time())

    def record_operator(
        self, plan: engine.Plan, changes: engine.ChangeSet, *, refused: engine.Change | None
    ) -> float | None:
        """Keep the operator release's entry for status; the seconds until a node would become stuck (None: none).

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
            return (deadline - seen.checked).total_seconds() + 1.0
        return None

    async def announce(self, changes: engine.ChangeSet) -> None:
        """The run's Events: what it did, drift and conflicts once each, maintenances' steps, its error, nodes
        newly stuck."""
        self.metrics.record_changeset(changes)
        announced = {(d["kind"], d["namespace"], d["name"], d["action"]) for d in sections.drift_of(changes)}
        announced |= {(c["kind"], c["namespace"], c["name"], "conflict") for c in sections.conflicts_of(changes)}
        # An Event the server did not take ends the reconcile's Events: with kube-apiserver down, each
        # further Event would spend the client's whole retry budget too.
        recorded = True
        found = events.events_for(changes, already=self.drift_announced)
        found += events.maintenance_events(changes, self.report.maintenances)
        for reason, message, warning in found:
            recorded = await self.writer.event(reason=reason, message=message, warning=warning)
            if not recorded:
                break
        if recorded:
            self.drift_announced = announced  # else announce the drift again next time
        error = self.report.error
        if error and recorded:
            await self.writer.event(reason="Failed", message=error.splitlines()[0], warning=True)
        stuck, now_stuck = events.stuck_events(self.report.operator, already=self.stuck_announced)
        for reason, message, warning in stuck if recorded else ():
            recorded = await self.writer.event(reason=reason, message=message, warning=warning)
            if not recorded:
                break
        # else announce them next time
        self.stuck_announced = now_stuck if recorded else self.stuck_announced & now_stuck

    async def write(self) -> None:
        """Write the FleetSync status (a failure is logged: the next reconcile writes it again)."""
        self.metrics.record_report(self.report)
        try:
            await self.writer.write(self.report)
        except FleetError as err:
            logger.warning("could not write FleetSync status: %s", err)


__all__ = ["Reporter"]
