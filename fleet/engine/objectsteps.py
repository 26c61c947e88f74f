"""An object stage's step: propose, decide, and (an apply) execute, for ``applies.Sync``.

``propose`` is what ``fleetctl diff`` and an apply share: the server-side dry-run diff
(``diffs``), the drift policy and freezes (``holds``), the replace guard, classing and waits,
and each change's one decision (``proposals.decide_write``). ``execute`` sends only what was
decided ``write`` (``writes.Writer``, kinds in the stage's order), then waits for the stage's
health gate on what this run wrote (``Decision.expected``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fleet.engine import (
    decisions,
    diffs,
    drifts,
    healths,
    holds,
    impersonations,
    ledgers,
    maintenancesteps,
    plans,
    proposals,
    stages,
    writes,
)
from fleet.engine.changesets import Action, Change
from fleet.engine.syncstate import Run
from fleet.telemetry import tracing


async def late_refusals(sync: Run, desired: list[plans.Desired], refused: list[Change]) -> bool:
    """Teams whose rights this run set up or restored: they exist now; ask before the stage writes.
    True when the API server refuses one (the run stops, its refusals recorded)."""
    identities = sync.found.identities
    if sync.options.dry_run or not (identities.pending or identities.restoring):
        return False
    late = await impersonations.refusals(
        client=sync.client,
        identities=identities,
        desired=[d for d in desired if identities.deferred(d.team, d.ref.namespace) and sync.new(d)],
        concurrency=sync.options.concurrency,
    )
    if not late:
        return False
    declared = {d.ref.key: d for d in desired}
    sync.changes.entries.extend(refused + [sync.refusal(c, declared.get(c.ref.key)) for c in late])
    sync.stopped = True
    return True


async def propose(sync: Run, stage: stages.Stage, desired: list[plans.Desired]) -> list[Change]:
    """The stage's proposal (diff, holds, refusals, classing, waits), each change decided once."""
    options = sync.options
    freezes = [sync.freeze(d) for d in desired]
    # A frozen object is diffed under its freeze's policy: never forced, drift reported or ignored.
    desired = [d if f is None else dataclasses.replace(d, drift=f.mode) for d, f in zip(desired, freezes, strict=True)]
    with tracing.tracer().start_as_current_span("diff", attributes={tracing.STAGE: stage.name}) as diffed:
        found = await diffs.diff_objects(
            settled=sync.memory.settled if sync.memory is not None else None,
            client=sync.client,
            identities=sync.found.identities,
            desired=desired,
            live=sync.found.live,
            concurrency=options.concurrency,
            ignore_managers=options.ignore_managers,
            force=options.force_conflicts,
            preview=options.dry_run,
            handover=options.handover,
            drift_policy=options.drift_policy,
        )
        # Where a resumed run picks up inside a stage: what is already in place, what is left.
        diffed.set_attributes(
            {
                "fleet.unchanged": sum(c.action == Action.UNCHANGED for c in found),
                "fleet.writes": sum(c.action in (Action.CREATED, Action.CONFIGURED) for c in found),
            }
        )
    proposed: list[Change] = []
    for change, d, freeze in zip(found, desired, freezes, strict=True):
        if change.action == Action.CREATED and sync.deleted_outside(d.ref.key):
            why = "deleted in the cluster" + (f"; {change.reason}" if change.reason else "")
            change = change.replaced(drift=True, reason=why)
        if freeze is not None:
            change = change.replaced(frozen=freeze)
        if freeze is not None and freeze.live:
            change = holds.hold(change, freeze)
        else:
            change = holds.apply_policy(change, options.drift(d.drift))
        if change.drift and change.action in (Action.CREATED, Action.CONFIGURED) and not change.failed:
            repairs = drifts.repairs(
                live=sync.found.live.get(d.ref.key),
                after=change.after,
                leaves=d.leaves,
                conflicts=[(c.manager, c.field) for c in change.conflicts],
            )
            change = change.replaced(repairs=repairs)
        if change.replace:
            change = writes.guard_replace(change, origin=sync.origin(d.ref.key), live=sync.found.live.get(d.ref.key))
        proposed.append(change)
    classed = [sync.wait(c) for c in await sync.classify(proposed)]
    force = options.force_conflicts
    return [
        proposals.decide_write(c, d, identities=sync.found.identities, force_conflicts=force)
        for c, d in zip(classed, desired, strict=True)
    ]


async def execute(sync: Run, stage: stages.Stage, decided: list[tuple[Change, plans.Desired]]) -> None:
    """Write what the stage decided ``write`` (kinds in the stage's order), then its health gate."""
    todo = [(c, d) for c, d in decided if c.decision is not None and c.decision.verdict == "write"]
    if not (todo or stage.gate in _ALWAYS_CHECKED):
        return
    ledger = sync.found.ledger
    new = {
        d.ref.key: ledgers.Entry(d.ref.api_version, sync.origin(d.ref.key))
        for _, d in todo
        if d.ref.key not in ledger.entries
    }
    if new:
        ledger.entries.update(new)
        await sync.save_progress()
    sync.meter.start(stage.name, len(todo))
    writer = writes.Writer(
        client=sync.client,
        live=sync.found.live,
        pools=sync.plan.pools,
        concurrency=sync.options.concurrency,
        timeout=sync.options.health_timeout,
        sent=sync.meter.sent,
        unavailable=sync.unavailable,
    )
    applied: dict[str, dict[str, Any]] = {}
    results: list[tuple[Change, Change]] = []
    # Kinds in the stage's order, one wave each: a RoleBinding is created only after its
    # Role exists (for a non-admin applier the API server resolves the Role to check escalation).
    waves = [[(c, d) for c, d in todo if d.ref.kind == kind] for kind in stage.kinds]
    waves.append([(c, d) for c, d in todo if d.ref.kind not in stage.kinds])
    for wave in waves:
        written = await writer.write_all(wave)
        applied |= written.applied
        results += zip((c for c, _ in wave), written.results, strict=True)
    sync.changes.settle(results)  # each written entry, with its result, in its decided one's place
    sync.unavailable = writer.unavailable
    if any(new.failed for _, new in results):
        sync.stopped = True
        return
    run = sync.changes.run_of(stage.name)
    run.gate = str(stage.gate)
    started = time.monotonic()
    try:
        with tracing.tracer().start_as_current_span("wait health", attributes={tracing.STAGE: stage.name}):
            await healths.wait(
                client=sync.client,
                stage=stage,
                written=[d.ref for _, d in todo],
                plan=sync.plan,
                timeout=sync.options.health_timeout,
                applied=applied,
                reader=sync.reader,
                expected=decisions.expected(c.decision for c, _ in todo),
                excused=await maintenancesteps.excused(sync)
                if stage.gate == stages.Gate.CLASSES_PUBLISHED
                else frozenset(),
            )
    except healths.HealthTimeout:
        run.gate_seconds, run.healthy = time.monotonic() - started, False
        sync.stopped = True
        raise
    run.gate_seconds, run.healthy = time.monotonic() - started, True
    if todo:
        ledger.progress.done.append(stage.name)
        await sync.save_progress()


_ALWAYS_CHECKED = (stages.Gate.CLASSES_PUBLISHED, stages.Gate.POOLS_APPLIED)
"""Gates about live state fleet does not write (nodes, slices): checked even when nothing changed."""


__all__ = ["execute", "late_refusals", "propose"]
