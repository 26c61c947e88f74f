"""What a step found, turned into one decision per change: pure.

A step's proposal is what it read and computed before deciding: the diffed change (the dry-run
answer, its conflicts, replace), its holds (drift policy, freezes), safety refusals (adoption,
blockers, the replace guard), its classing and waits, and the team's identity. ``decide_*`` turn
each into the change's one ``Decision`` (``fleet.engine.decisions``) by the same rules whether the
run is ``fleetctl diff`` or an apply: a diff is "decide, do not execute", so what it shows is what
the executors are then told to do.

- ``verb_of``: what the executor does with a change: apply, replace, node-write (a pool's Node),
  delete, release (an adopted object, a pool Node given back), helm-upgrade, helm-uninstall,
  cordon, evict, uncordon;
- ``conflict_refusal``: a field another manager owns that the write would not take (no force):
  refused in the diff as in the apply, which the API server would refuse;
- ``decide_write``, ``decide_deletion``, ``decide_entry``: the decision of a stage's change, of a
  prune's deletion, and of an entry whose fate the step settled (a refusal, a release, a drain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.engine import decisions, impersonations, plans
from fleet.engine.changesets import Action, Change

HELM_RELEASE = "HelmRelease"
"""The ChangeSet kind of the GPU Operator's Helm release (``operators.release_ref``)."""


def verb_of(change: Change) -> decisions.Verb:
    """What the executor does with ``change`` (for a held one, what it will do when it goes)."""
    action = change.intended or change.action
    if change.ref.kind == HELM_RELEASE:
        return "helm-uninstall" if action == Action.DELETED else "helm-upgrade"
    if action == Action.DELETED:
        return "release" if change.release else "delete"
    if change.ref.kind == "Node" and change.stage == "pools":
        return "node-write"
    return "replace" if change.replace else "apply"


def conflict_refusal(change: Change) -> str:
    """Why a change whose fields other managers own is refused without force ("" when it has none)."""
    if not change.conflicts or change.forced:
        return ""
    owners = ", ".join(str(c) for c in change.conflicts)
    return (
        f"Apply failed with {len(change.conflicts)} conflict(s): {owners}\n  hint: another field manager owns "
        "these fields; change them through that owner, or take ownership with --force-conflicts (one object: "
        "annotate it fleet.gpufleet.dev/take-ownership)"
    )


def decide_write(
    change: Change, d: plans.Desired, *, identities: impersonations.Identities, force_conflicts: bool
) -> Change:
    """The decision of a stage's diffed ``change`` of ``d``: as whom (``impersonations.identity``), with
    force where ``--force-conflicts``, adoption, ``take-ownership`` or drift repair asks; refused where
    the step refused it or a field conflict stands without force."""
    if change.action == Action.UNCHANGED and not (change.error or change.waiting):
        if change.decision is decisions.LEAVE:
            return change  # ``Change.unchanged``: decided so as it was made
        return change.decided(decisions.LEAVE)  # nothing is sent: as whom does not arise (10,000 of them cost)
    who = impersonations.identity(identities, d.team, d.ref.namespace)
    force = force_conflicts or d.force or change.forced
    error = change.error or ("" if force else conflict_refusal(change))
    decided = decisions.decide(
        action=change.action,
        verb=verb_of(change),
        force=force,
        error=error,
        wait=change.waiting,
        disruption=change.disruption,
        user=who.user,
        as_fleet=who.as_fleet,
        obj=d.body,  # the render without the revision annotation: no copy per object
    )
    return change.decided(decided)


def decide_deletion(change: Change, *, live: Mapping[str, Any] | None, identities: impersonations.Identities) -> Change:
    """The decision of a deletion: as the team whose folder declared the object (its live team label
    and source, ``impersonations.origin``) by the same rule as its write; refused where the guard
    refused it, or where ``--team-impersonation=required`` finds the team without an identity."""
    team = impersonations.origin(live or {})
    who = impersonations.identity(identities, team, change.ref.namespace)
    error = change.error
    if not error and who.refusal and change.action == Action.DELETED:
        error = f"{who.refusal}: fleet deletes a team's objects only as the team"
        change = change.replaced(refused=True, error=error, action=Action.SKIPPED, intended=Action.DELETED)
    decided = decisions.decide(
        action=change.action,
        verb=verb_of(change),
        error=error,
        wait=change.waiting,
        disruption=change.disruption,
        user=who.user,
        as_fleet=who.as_fleet,
    )
    return change.decided(decided)


def decide_entry(change: Change, *, verb: decisions.Verb | None = None, user: str = "") -> Change:
    """The decision of an entry whose step settled its fate (a refusal, the release, a drain's cordon,
    eviction or uncordon: ``verb``), by the same rule: refused when it failed, held when it waits,
    else sent or left."""
    decided = decisions.decide(
        action=change.action,
        verb=verb_of(change) if verb is None else verb,
        error=change.error,
        wait=change.waiting,
        disruption=change.disruption,
        user=user,
    )
    return change.decided(decided)


__all__ = ["HELM_RELEASE", "conflict_refusal", "decide_deletion", "decide_entry", "decide_write", "verb_of"]
