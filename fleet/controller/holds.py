"""Disruptive changes held back: the rollout waves, the maintenance window, emergencies.

The engine decides which disruptive change waits and for what (``fleet.engine.waits``); this
module gives it what the controller alone knows, and acts on its answer:

- **Emergencies.** A revision may skip the rollout waves and the maintenance window when its
  commit carries a ``Fleet-Emergency:`` trailer, or the FleetSync the annotation ``EMERGENCY``
  (why) — the FleetSync is read afresh for it while a window or a wave holds changes. Changes
  that skip are announced once per revision and reason by a Warning Event ``EmergencyChange``
  naming who asked.
- **Waves.** A cluster of a later rollout wave reads the earlier waves' commit statuses for the
  revision (``rollouts.read``) and sets ``status.rollout``; once the waves let a revision go it is
  not read again.
- **The next look.** A held change is looked at again when it may go: a bake ends, the window
  opens, a deadline passes, every ``Looks.emergency_poll`` while a window or wave holds changes (a
  person may annotate the FleetSync), every ``Looks.wave_poll`` while an earlier wave has not
  reported. A released ResourceClaim, or the API server's eviction preview in a DeviceTaintRule's
  status, wakes a reconcile by itself (``intakes.wakes`` reads ``Holds.wakes_on``). A held change
  past ``spec.disruption.deadline`` is one Warning Event ``DisruptionOverdue``.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from fleet import engine, hosts
from fleet.controller import rollouts, statuses
from fleet.controller.queues import WorkQueue
from fleet.engine import maintenances, waits

logger = logging.getLogger(__name__)

EMERGENCY = "fleet.gpufleet.dev/emergency"
"""The FleetSync annotation whose value (why) lets disruptive changes skip the maintenance window."""


@dataclass
class Looks:
    """How often held changes are looked at again when nothing else says when."""

    emergency_poll: float = 60.0
    """While changes wait for a maintenance window, seconds between reads of the FleetSync for an
    emergency annotation (``EMERGENCY``)."""
    wave_poll: float = 30.0
    """Seconds between looks at the earlier rollout waves' commit statuses while a change waits for them
    to report (a bake's end is looked at when it comes)."""
    maintenance_step: float = 1.0
    """Seconds after a run that moved a GPUMaintenance's rule one effect and has more to go: the next
    step is looked at then (its own waits say whether it goes)."""


def annotated_by(obj: dict[str, Any], annotation: str) -> str:
    """The field manager that set ``annotation`` on ``obj`` and when (``kubectl-annotate at …``), from managedFields."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        annotations = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if f"f:{annotation}" in annotations:
            return f"{entry.get('manager', '?')} at {entry.get('time', '?')}"
    return ""


@dataclass
class Holds:
    """What one cluster's held changes wait for, and what has been announced about them."""

    writer: statuses.Writer
    report: statuses.Report
    queue: WorkQueue
    looks: Looks
    reader: hosts.Reader | None = None
    """Reads the earlier rollout waves' commit statuses (``rollouts``); None: a cluster of a later wave
    holds every disruptive change, as it cannot tell what the earlier waves did."""
    opened: str = ""
    """The revision the earlier waves let go (success standing for the bake): not read again."""
    waits_for: tuple[str, ...] = ()
    """What the last run's held-back disruptive changes wait for (``window``, ``claims``): a released
    claim then wakes a reconcile, and status is read afresh for an emergency annotation."""
    wakes_on: tuple[str, ...] = ()
    """The watch events that may let the next run do more (``intakes.wakes``): ``waits_for``, and while
    a GPUMaintenance walks, its rules' preview and released claims: a rule the run wrote at ``None``
    holds nothing back yet, and its next step needs the API server's preview."""
    announced: tuple[str, str] = ("", "")
    """(revision, why) of the emergency last announced by an Event."""
    overdue: set[str] = field(default_factory=set)
    """``Ref.key`` of held changes announced overdue by an Event (those still overdue: bounded by them)."""

    async def emergency(self, plan: engine.Plan, *, checkout: Any) -> tuple[str, str]:
        """(why, who) when this revision may skip the maintenance window: its commit's
        ``Fleet-Emergency:`` trailer, else the FleetSync's ``EMERGENCY`` annotation
        (read afresh while changes wait for a window); ("", "") otherwise."""
        if checkout is not None and checkout.revision == plan.revision and checkout.emergency:
            return checkout.emergency, f"commit {plan.revision[:12]} by {checkout.author}"
        if {"window", "wave"} & set(self.waits_for):  # what an emergency would skip holds changes: read afresh
            await self.writer.refresh()
        current = self.writer.current or {}
        why = str(((current.get("metadata") or {}).get("annotations") or {}).get(EMERGENCY) or "").strip()
        if not why:
            return "", ""
        by = annotated_by(current, EMERGENCY)
        return why, f"the FleetSync annotation {EMERGENCY}" + (f" set by {by}" if by else "")

    async def waves(self, plan: engine.Plan, *, emergency: str) -> waits.Reported | None:
        """The earlier rollout waves' commit statuses for the plan's revision, and ``status.rollout``;
        None where no wave holds it: the cluster is in no wave or the first, an emergency skips the
        waves, or the waves let this revision go already."""
        rules = plan.rules
        if rules.wave <= 1 or not rules.earlier or emergency or self.opened == plan.revision:
            self.report.rollout = rollouts.status(rules, gate=None) if rules.wave else None
            return None
        reported = await rollouts.read(reader=self.reader, rules=rules, revision=plan.revision)
        if reported.error:
            logger.warning(
                "rollout wave %d: disruptive changes held, statuses not read: %s", rules.wave, reported.error
            )
        gate = waits.wave(rules, reported=reported, now=datetime.datetime.now(datetime.UTC))
        if gate is None:
            self.opened = plan.revision
        self.report.rollout = rollouts.status(rules, gate=gate)
        return reported

    async def held(self, changes: engine.ChangeSet, *, key: str, plan: engine.Plan, emergency: str, asked: str) -> None:
        """Queue ``key`` again when a held change may go, or a GPUMaintenance's next step is due, and
        announce overdue changes and an emergency that let changes skip the waves and the window."""
        rules = plan.rules
        held = [e.held for e in changes.waiting if e.held is not None]
        self.waits_for = tuple(sorted({w.on for w in held}))
        self.wakes_on = self.waits_for
        looks = [waits.next_look(held, now=datetime.datetime.now(datetime.UTC))]
        if maintenances.walking(changes.entries, plan.maintenances):
            self.wakes_on = tuple(sorted({*self.waits_for, "claims", "preview"}))
            looks.append(self.looks.maintenance_step)
        if {"window", "wave"} & set(self.waits_for):  # a person may annotate the FleetSync for an emergency
            looks.append(self.looks.emergency_poll)
        on_wave = [w for w in held if w.on == "wave"]
        if any(w.until is None for w in on_wave):  # an earlier wave has not reported yet
            looks.append(self.looks.wave_poll)
        delay = min((d for d in looks if d is not None), default=None)
        if delay is not None:
            self.queue.add_after(key, delay=delay + 1.0, reason="a held disruptive change may go")
        if self.report.rollout is not None:
            self.report.rollout["held"] = len(on_wave)
        overdue = {e.ref.key: e for e in changes.waiting if e.held is not None and e.held.overdue}
        for ref in sorted(set(overdue) - self.overdue):
            entry = overdue[ref]
            if not await self.writer.event(
                reason="DisruptionOverdue", message=f"{entry.ref}: {entry.reason}", warning=True
            ):
                overdue.pop(ref)  # announce it next time
        self.overdue = set(overdue)
        now = datetime.datetime.now(datetime.UTC)
        skipping = changes.disruptive if emergency and waits.emergency_skips(rules, now=now) else []
        if skipping and self.announced != (changes.revision, emergency):
            self.announced = (changes.revision, emergency)
            went = sum(1 for e in skipping if e.held is None)
            await self.writer.event(
                reason="EmergencyChange",
                message=f"{len(skipping)} disruptive change(s) skip the rollout waves and the maintenance window "
                f"({went} applied, the rest wait for running jobs), asked by {asked}: {emergency}",
                warning=True,
            )


__all__ = ["EMERGENCY", "Holds", "Looks", "annotated_by"]
