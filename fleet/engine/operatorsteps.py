"""The operator step of a run: the GPU Operator's Helm release, decided as every change is.

The stage (``fleet.engine.operators``) proposes: the release's entry (unchanged, refused by a
preflight check or a guard, or the install/upgrade helm would make, classed disruptive when it
restarts the driver), or, with no GPUOperator declared, the uninstall of each release fleet
installed (disruptive while claims hold the driver's devices). The run then decides each entry
with the same code as an object's: a team's GPUOperator is refused before anything is written
(``Sync.start``); a disruptive release or uninstall waits for the rollout wave, the maintenance
window and the jobs, and is drained under ``drain``; what goes is executed by helm, only on a
``write`` decision. ``fleetctl diff`` is the same step without the execution.

A refused release stops an apply after its entry is recorded, decided ``refuse``: the run ends
with ``OperatorRefused`` naming it (``diff`` goes on, as it does for every refusal).
"""

from __future__ import annotations

from fleet import helm
from fleet.engine import changesets, decisions, disruptions, healths, operators, proposals
from fleet.engine.changesets import Action, Change
from fleet.engine.operators import removals
from fleet.engine.syncstate import Run
from fleet.telemetry import tracing


def new_stage(sync: Run, settings: helm.Settings) -> operators.Stage:
    return operators.Stage(
        client=sync.client,
        h=helm.Helm(settings),
        plan=sync.plan,
        detail=sync.options.dry_run,
        timeout=sync.options.health_timeout,
        remembered=sync.memory.operator_noops if sync.memory is not None else None,
    )


def team_operator(sync: Run) -> list[Change]:
    """A GPUOperator in a team's folder: refused, as the team could not install a cluster-wide release."""
    op = sync.plan.operator
    if op is None or not op.team:
        return []
    return [
        Change.refusal(
            operators.release_ref(release=op.release, namespace=op.namespace),
            stage="operator",
            error=(
                f"declared at {op.source}, in team {op.team!r}'s folder: fleet writes a team's files only "
                "as the team, and a team may not install the cluster-wide GPU Operator release. fleet "
                "applies nothing of this revision while this stands.\n  hint: move the GPUOperator to "
                "operator/ (the platform team's)"
            ),
        )
    ]


async def step(sync: Run) -> None:
    """The operator step: propose, decide, execute what is decided ``write``, then the readiness gate."""
    op = sync.plan.operator
    if op is not None:
        refused = sync.found.refused.get(operators.release_ref(release=op.release, namespace=op.namespace).key)
        if refused is not None:  # decided in start: the same entry for diff and apply
            sync.changes.entries.append(refused)
            return
    settings = sync.options.helm
    if settings is None:
        if op is not None:
            skipped = Change(
                ref=operators.release_ref(release=op.release, namespace=op.namespace),
                stage="operator",
                action=Action.SKIPPED,
                reason="no helm binary configured (fleetctl --helm, $FLEET_HELM)",
            )
            sync.changes.entries.append(proposals.decide_entry(skipped))
        return
    run = sync.operator or new_stage(sync, settings)
    if op is None:
        await _removal(sync, run)
        return
    proposed = await run.propose()
    found: list[Change] = []
    going: decisions.Decision | None = None
    for change in proposed:
        if change.ref.kind == proposals.HELM_RELEASE:
            change = proposals.decide_entry(sync.wait(change))
            going = change.decision
        else:  # the chart's objects (diff's detail), proposed after their release: they go as it goes
            assert going is not None, "propose lists the release before the chart's objects"
            change = change.decided(going)
        found.append(change)
    release = [c for c in found if c.ref.kind == proposals.HELM_RELEASE]
    sync.changes.entries.extend(found)
    await sync.drain(release)
    refused = next((c for c in release if c.verdict == "refuse" and c.refused), None)
    stop = run.refused(refused)
    if stop is not None and not sync.options.dry_run:
        sync.stopped = True
        raise stop
    if sync.options.dry_run:
        return
    if release and _writes(release[0]):
        executed = await run.execute(release[0])
        sync.changes.settle([(release[0], executed)])
        release = [executed]
    if any(c.failed for c in release):
        sync.stopped = True
        return
    if run.changed:
        with tracing.tracer().start_as_current_span("wait health", attributes={tracing.STAGE: "operator"}):
            try:
                await operators.wait_ready(client=sync.client, plan=sync.plan, timeout=sync.options.health_timeout)
            except healths.HealthTimeout:
                sync.stopped = True
                raise


async def _removal(sync: Run, run: operators.Stage) -> None:
    """No GPUOperator declared: each release fleet installed is uninstalled under ``--prune``, classed
    disruptive while claims hold the driver's devices, held and drained as any disruptive change."""
    found: list[Change] = []
    reads = sync.classing_reads()
    for change in await removals.found(h=run.h, prune=sync.options.prune):
        if change.action == Action.DELETED:
            classed = removals.disruption(
                slices=await reads.objects(disruptions.SLICE), claims=await reads.objects(disruptions.CLAIM)
            )
            change = sync.wait(change.replaced(disruption=classed))
        found.append(proposals.decide_entry(change))
    sync.changes.entries.extend(found)
    await sync.drain(found)
    if sync.options.dry_run:
        return
    results = [(c, await removals.uninstall(h=run.h, change=c)) for c in found if _writes(c)]
    sync.changes.settle(results)
    if any(new.failed for _, new in results):
        sync.stopped = True


def _writes(change: changesets.Change) -> bool:
    return change.decision is not None and change.decision.verdict == "write"


__all__ = ["new_stage", "step", "team_operator"]
