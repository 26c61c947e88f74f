"""The Events the controller records on its FleetSync, as views of the last run's ChangeSet.

``events_for`` announces what a run did: ``Applied``, ``Pruned``, ``Failed``, ``Conflict``,
``HelmReleaseRemediated``, ``DriftRepaired`` (every repair, never de-duplicated: the object, who had
changed it, each field before and after) and ``Drift`` (one Warning per object reported, not one per
reconcile; ignored drift is listed in status and announces nothing).

A stuck node does **not** make the FleetSync not Ready. ``Ready`` answers one question for
``kubectl wait`` and the Argo CD / Flux health checks: is the newest revision of git applied
completely? A node stuck in a driver upgrade is the GPU Operator's rollout waiting on a
drain, a job or a failed driver pod on that node; fleet wrote nothing wrong and re-applying
would change nothing, so flipping Ready (or Stalled, which means "this revision can never be
applied") would page the wrong owner and block pipelines that wait on fleet. The one
exception is already in the engine: right after fleet installs or upgrades the operator, the
readiness gate counts a stuck node as not ready, so *that* revision is not applied until it
passes. Otherwise the stuck node is shown in ``status.operator.driverUpgrade`` (``stuck:
true``, with its Events; ``sections.operator_of``), counted in ``status.operator.stuckCount`` (the
``Stuck`` printer column of ``kubectl get fsync -o wide``) and announced by one Warning Event
``DriverUpgradeStuck`` per node and state (``stuck_events``), not one per reconcile.

A GPUMaintenance announces each step of its phase (``maintenance_events``): one Normal Event per
maintenance and effect a run wrote to its DeviceTaintRules (``MaintenancePreview``,
``MaintenanceNoSchedule``, ``MaintenanceNoExecute``) and ``MaintenanceEnded`` when its rules are
deleted, saying which devices, why and whose pods. A rule's effect is written once per step, so a
reconcile that finds the maintenance where it was announces nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from fleet.controller.sections import drift_of, manager_of, repaired, written_body
from fleet.engine import evictions, maintenances
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.disruptions import listed
from fleet.views import maintenances as views

STEPS = {
    "None": ("MaintenancePreview", "marked for maintenance, still in scheduling", "on them"),
    "NoSchedule": ("MaintenanceNoSchedule", "out of scheduling", "waited on"),
    "NoExecute": ("MaintenanceNoExecute", "out of service, what runs there evicted", "left"),
}
"""Per effect written: the Event's reason, what it does to the devices, and what the pods on them are then."""


def stuck_events(
    change: Change | None, *, already: set[tuple[str, str]]
) -> tuple[list[tuple[str, str, bool]], set[tuple[str, str]]]:
    """Warning Events ``DriverUpgradeStuck`` for nodes newly stuck, and the (node, state) pairs stuck now.

    ``already`` holds the pairs announced before: a node stuck in one state gets one Event,
    however many reconciles see it; it gets another only if it leaves that state and is
    stuck again (in another state, or in the same one later).
    """
    seen = change.operator if change else None
    if seen is None:
        return [], set()
    out: list[tuple[str, str, bool]] = []
    now_stuck: set[tuple[str, str]] = set()
    for d in seen.stuck():
        key = (d.node, d.state)
        now_stuck.add(key)
        if key in already:
            continue
        events = f"; its events: {' | '.join(d.events)}" if d.events else "; no recent events on the node"
        out.append(
            (
                "DriverUpgradeStuck",
                f"Node {d.node} has been in driver-upgrade state {d.state} for {d.minutes(now=seen.checked)} min "
                f"(more than driverStateTimeout {int(seen.limit)}s){events}. "
                f"Look at what the GPU Operator's upgrade waits for: kubectl describe node {d.node} "
                "(drain, PodDisruptionBudgets, jobs still running, the driver pod's logs)",
                True,
            )
        )
    return out, now_stuck


def events_for(
    changes: ChangeSet, *, already: set[tuple[str, str, str, str]] | None = None
) -> list[tuple[str, str, bool]]:
    """(reason, message, warning) Events for a ChangeSet: applied, pruned, failed, drift.

    ``already`` holds (kind, namespace, name, action) of drift and conflicts (action ``conflict``)
    announced before: not again (a conflict is retried with backoff until someone resolves it).
    """
    out: list[tuple[str, str, bool]] = []
    counts = Counter(str(e.action) for e in changes.entries if not e.failed and not e.drift)
    written = counts.get("created", 0) + counts.get("configured", 0)
    if written:
        out.append(
            ("Applied", f"revision {changes.revision[:12]}: {_counts(counts, ('created', 'configured'))}", False)
        )
    if counts.get("deleted"):
        out.append(("Pruned", f"revision {changes.revision[:12]}: {counts['deleted']} deleted", False))
    for entry in changes.entries:
        if entry.failed and entry.conflicts:
            if already and (entry.ref.kind, entry.ref.namespace, entry.ref.name, "conflict") in already:
                continue
            fields = ", ".join(str(c) for c in entry.conflicts)
            out.append(("Conflict", f"{entry.ref}: not overwritten, other field managers own {fields}", True))
        elif entry.failed:
            out.append(("Failed", f"{entry.ref}: {entry.error.splitlines()[0]}", True))
    for entry in changes.entries:
        if entry.operator is not None and entry.operator.remedied:
            out.append(("HelmReleaseRemediated", f"{entry.ref}: {entry.operator.remedied}", True))
        if entry.drift and repaired(entry):
            out.append(("DriftRepaired", repair_message(entry), False))  # every repair: never de-duplicated
    for d in drift_of(changes):
        if d["action"] in ("repaired", "ignored"):  # ignore is silent: status lists it, no Warning
            continue
        if already and (d["kind"], d["namespace"], d["name"], d["action"]) in already:
            continue
        obj = f"{d['kind']} {d['namespace'] + '/' if d['namespace'] else ''}{d['name']}"
        out.append(("Drift", f"{obj}: {d['reason']} ({d['action']})", True))
    return out


def maintenance_events(changes: ChangeSet, found: Sequence[views.Maintenance]) -> list[tuple[str, str, bool]]:
    """(reason, message, warning) Events for the GPUMaintenances whose rules the run moved: one per
    maintenance and effect written, one per maintenance whose rules it deleted. ``found``: the
    maintenances as the run left them (``sections.maintenances_of``)."""
    written: dict[tuple[str, str], list[Change]] = {}
    ended: dict[str, list[Change]] = {}
    for e in changes.entries:
        if e.ref.kind != views.KIND or e.failed:
            continue
        if e.action == Action.DELETED:
            ended.setdefault(maintenances.owner(e.before) or e.ref.name.split(".")[0], []).append(e)
        elif e.action in (Action.CREATED, Action.CONFIGURED) and (body := written_body(e)) is not None:
            effect = maintenances.effect_of(body) or "None"
            if e.before is None or maintenances.effect_of(e.before) != effect:
                written.setdefault((maintenances.owner(body), effect), []).append(e)
    by_name = {m.name: m for m in found}
    out: list[tuple[str, str, bool]] = []
    for (name, effect), steps in sorted(written.items()):
        m = by_name.get(name)
        if m is None or effect not in STEPS:
            continue
        reason, does, pods = STEPS[effect]
        rules = {e.ref.name for e in steps}
        whole = all(not maintenances.target_of(written_body(e) or {}).device for e in steps)
        where = views.where([d for d in m.devices if d.rule in rules], whole=whole)
        count = f"{m.pod_count} pod{'' if m.pod_count == 1 else 's'} {pods}"
        out.append((reason, f"GPUMaintenance {name}: {where} {does} ({m.reason}); {count}", False))
    for name, gone in sorted(ended.items()):
        texts = [evictions.target_text(maintenances.target_of(e.before or {})) for e in gone]
        out.append(("MaintenanceEnded", f"GPUMaintenance {name} ended: {listed(texts)} back in service", False))
    return out


def repair_message(entry: Change) -> str:
    """A ``DriftRepaired`` Event's message: the object, who had changed it, each field before and after."""
    if entry.action == Action.CREATED:
        return f"{entry.ref}: re-created from git ({entry.reason or 'deleted in the cluster'})"
    if not entry.repairs:
        return f"{entry.ref}: put back to git's content ({entry.reason or 'changed in the cluster'})"
    by = manager_of(entry) or "an unknown manager"
    fields = "; ".join(
        f"{r.field}: {r.before} -> {r.after}"
        + (f" (changed by {r.manager or 'an unknown manager'})" if r.manager != by else "")
        for r in entry.repairs
    )
    return f"{entry.ref}: put back to git's values, changed by {by}: {fields}"


def _counts(counts: Counter[str], keys: tuple[str, ...]) -> str:
    return ", ".join(f"{counts[k]} {k}" for k in keys if counts.get(k))


__all__ = ["STEPS", "events_for", "maintenance_events", "repair_message", "stuck_events"]
