"""The lists of the FleetSync status, each a view of the last run's ChangeSet entries.

``status.drift`` lists the drift the last reconcile found (reported, ignored) and the repairs of
the last hour (at most ``MAX_REPAIRS``, each with its time, the manager that had changed the object
and every field before and after): the reconcile that a repair's own write triggers finds nothing
to do, and its status must not make the repair vanish. ``status.frozen`` lists the objects fleet
leaves alone (``fleet.engine.drifts``), with who froze them and since when.

``status.disruptive`` lists the last run's changes that disrupt GPU work (``fleet.engine.disruptions``):
each object, why, the nodes it touches and the allocated claims it affects; ``status.waiting`` the
disruptive changes held back and what each waits for (``waiting_summary`` in one line, for Ready's
message and the commit status); ``status.conflicts`` the fields another field manager owns.

``status.maintenances`` is each GPUMaintenance as people follow it (``fleet.views.maintenances``):
its phase, devices, reason, the pods waited on, what it waits for and the API server's preview. It
is read from the live DeviceTaintRules, claims and slices of the watch cache, with the rules the run
wrote or deleted taken from its ChangeSet (``maintenances_of``): a status written right after a step
shows that step, whether or not the cache has seen the write yet.

``status.operator`` is the GPU Operator release as the last run of the operator stage saw it
(``operator_of``): release, chart version deployed, what the run did (created, configured,
unchanged, skipped, refused or failed, with the error) and ``driverUpgrade``, one item per GPU
node carrying ``nvidia.com/gpu-driver-upgrade-state``: its state, since when (the label's
managedFields time), whether it is stuck (longer than the Fleet's ``driverStateTimeout`` in
that state) and, when stuck, its recent Events. It comes from the data the operator stage
carries on the release's Change (``Change.operator``), the same object ``fleetctl diff`` and
``apply`` print, and it keeps the last seen value while a run stops before that stage.

Every list is cut at ``MAX_LISTED`` items; the status carries the full count beside it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.disruptions import CLAIM, SLICE
from fleet.engine.drifts import Freeze
from fleet.inventory.taintrules import RULE_VERSIONS
from fleet.kube import Ref, timestamps
from fleet.views import maintenances, teams

MAX_LISTED = 50
Live = Callable[[tuple[str, str]], Iterable[Mapping[str, Any]]]
"""The live objects of an (apiVersion, kind): the controller's watch cache."""
NAMESPACES = ("v1", "Namespace")


def waiting_of(changes: ChangeSet | None) -> list[dict[str, Any]]:
    """``status.waiting``: the disruptive changes held back, what each would do and what it waits for."""
    rows = []
    for entry in changes.waiting if changes is not None else ():
        wait = entry.held
        assert wait is not None
        rows.append(
            {
                "kind": entry.ref.kind,
                "namespace": entry.ref.namespace,
                "name": entry.ref.name,
                "action": str(entry.intended or ""),
                "disruption": entry.disruption.reason if entry.disruption is not None else "",
                "waitsFor": wait.on,
                "reason": wait.reason,
                "until": wait.until.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if wait.until else "",
                "overdue": wait.overdue,
            }
        )
    return rows


def waiting_summary(changes: ChangeSet | None) -> str:
    """``2 disruptive change(s) wait for the maintenance window (opens …)``; "" when none waits."""
    held = changes.waiting if changes is not None else []
    if not held:
        return ""
    first = held[0].held
    assert first is not None
    overdue = sum(1 for e in held if e.held is not None and e.held.overdue)
    late = f"; {overdue} overdue" if overdue else ""
    return f"{len(held)} disruptive change(s) wait: {held[0].ref} {first}{late}"


def maintenances_of(changes: ChangeSet | None, *, live: Live) -> tuple[maintenances.Maintenance, ...]:
    """``status.maintenances``: the GPUMaintenances the live DeviceTaintRules carry out, the rules the
    run wrote or deleted taken from its entries (a written one keeps its live status: the API
    server's preview)."""
    kept: list[Mapping[str, Any]] = []
    for version in RULE_VERSIONS:  # the version the cluster serves is the one kept
        kept = list(live((version, maintenances.KIND)))
        if kept:
            break
    rules = {str((r.get("metadata") or {}).get("name")): r for r in kept}
    for entry in changes.entries if changes is not None else ():
        if entry.ref.kind != maintenances.KIND or entry.failed:
            continue
        if entry.action == Action.DELETED:
            rules.pop(entry.ref.name, None)
        elif entry.action in (Action.CREATED, Action.CONFIGURED) and (body := written_body(entry)) is not None:
            status = (rules.get(entry.ref.name) or {}).get("status")
            rules[entry.ref.name] = {**body, **({"status": status} if status else {})}
    if not rules:
        return ()
    found = maintenances.read(
        rules=rules.values(),
        claims=live(CLAIM),
        slices=live(SLICE),
        teams=teams.namespace_teams(list(live(NAMESPACES))),
        waiting=waiting_of(changes),
    )
    return tuple(found)


def written_body(entry: Change) -> Mapping[str, Any] | None:
    """What a created or configured entry put in the cluster: its diff's ``after``, else (a creation the
    diff did not keep) the object its ``write`` decision sent."""
    if entry.after is not None:
        return entry.after
    return entry.decision.expected if entry.decision is not None else None


def changes_of(changes: ChangeSet | None) -> list[dict[str, Any]]:
    """``status.changes``: the last run's entries that did or would do something (not ``unchanged``),
    each with its stage, action, the engine's decision (verdict, verb, as whom) and its reason."""
    rows = []
    for entry in changes.entries if changes is not None else ():
        if entry.action == Action.UNCHANGED and entry.verdict in ("", "leave"):
            continue
        row: dict[str, Any] = {
            "kind": entry.ref.kind,
            "namespace": entry.ref.namespace,
            "name": entry.ref.name,
            "stage": entry.stage,
            "action": str(entry.action),
            "reason": (entry.reason or entry.error or "")[:1000],
        }
        if entry.decision is not None:
            row["decision"] = entry.decision.to_json()
        rows.append(row)
    return rows


def repaired(entry: Change) -> bool:
    """Whether ``entry`` is drift fleet put back (written, not failed)."""
    return entry.drift and entry.action in (Action.CREATED, Action.CONFIGURED) and not entry.failed


def drift_of(changes: ChangeSet | None, *, at: str = "") -> list[dict[str, Any]]:
    """The drifted objects of a ChangeSet: what changed in the cluster and what was done about it.

    A repair also names the manager(s) that had changed the object, and per field the value
    before and after (``Change.repairs``); ``at`` stamps repairs with when they were made."""
    out: list[dict[str, Any]] = []
    for entry in changes.entries if changes else ():
        if not entry.drift:
            continue
        fixed = repaired(entry)
        row: dict[str, Any] = {
            "kind": entry.ref.kind,
            "namespace": entry.ref.namespace,
            "name": entry.ref.name,
            "stage": entry.stage,
            "action": "repaired" if fixed else ("reported" if entry.action == Action.SKIPPED else "ignored"),
            "reason": entry.reason or entry.error or "changed in the cluster",
        }
        if fixed:
            row["manager"] = manager_of(entry)
            row["fields"] = [
                {"field": r.field, "manager": r.manager, "before": r.before, "after": r.after} for r in entry.repairs
            ]
            if at:
                row["time"] = at
        out.append(row)
    return out


def manager_of(entry: Change) -> str:
    """Who had changed a repaired object: its repairs' managers, else the conflicts' ("" unknown)."""
    found = {r.manager for r in entry.repairs if r.manager} or {c.manager for c in entry.conflicts if c.manager}
    return ",".join(sorted(found))


MAX_REPAIRS = 20
REPAIR_MEMORY = datetime.timedelta(hours=1)
"""How long status keeps a repair in ``drift[]``: the reconcile that a repair's own write triggers
finds nothing to do, and its status must not make the repair vanish at once."""


def keep_repairs(rows: list[dict[str, Any]], *, now: datetime.datetime) -> list[dict[str, Any]]:
    """The repairs status keeps: newest first, at most ``MAX_REPAIRS``, none older than ``REPAIR_MEMORY``."""
    kept = []
    for row in rows:
        when = timestamps.parse(row.get("time"))
        if when is not None and now - when <= REPAIR_MEMORY:
            kept.append(row)
    return kept[:MAX_REPAIRS]


def frozen_of(found: list[tuple[Ref, Freeze]]) -> list[dict[str, str]]:
    """``status.frozen``: the objects fleet leaves alone, with who froze them and since when."""
    return [
        {
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "mode": f.mode,
            "by": f.by,
            "since": f.since,
            "source": f.source,
        }
        for ref, f in found
    ]


def _stamp(when: datetime.datetime | None) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else ""


def operator_of(change: Change | None) -> dict[str, Any] | None:
    """``status.operator`` for the operator release's entry (None: no release to report)."""
    if change is None:
        return None
    seen = change.operator
    if change.refused:
        action = "refused"
    elif change.failed:
        action = "failed"
    else:
        action = str(change.action)
    nodes: list[dict[str, Any]] = []
    stuck = 0
    for d in seen.drivers if seen is not None else ():
        is_stuck = seen is not None and d.stuck(now=seen.checked, limit=seen.limit)
        stuck += is_stuck
        item: dict[str, Any] = {"node": d.node, "state": d.state, "since": _stamp(d.since), "stuck": is_stuck}
        if is_stuck:
            item["events"] = list(d.events)
        nodes.append(item)
    out: dict[str, Any] = {
        "release": f"{change.ref.namespace}/{change.ref.name}",
        "version": seen.version if seen else "",
        "action": action,
        "error": change.error[:1000],
        "driverStateTimeout": int(seen.limit) if seen else 0,
        "driverUpgrade": nodes[:MAX_LISTED],
        "stuckCount": stuck,
    }
    if seen is not None and seen.remedied:
        out["remediation"] = seen.remedied[:1000]
    return out


def conflicts_of(changes: ChangeSet | None) -> list[dict[str, str]]:
    """Fields fleet did not write because another field manager owns them, one row per field."""
    out: list[dict[str, str]] = []
    for entry in changes.entries if changes else ():
        if not entry.failed:
            continue
        for c in entry.conflicts:
            out.append(
                {
                    "kind": entry.ref.kind,
                    "namespace": entry.ref.namespace,
                    "name": entry.ref.name,
                    "field": c.field,
                    "manager": c.manager,
                }
            )
    return out


def disruptive_of(changes: ChangeSet | None) -> list[dict[str, Any]]:
    """``status.disruptive``: the last run's entries that disrupt GPU work (``Change.disruption``),
    with why, the nodes and the allocated claims (each list cut at ``MAX_LISTED``)."""
    out: list[dict[str, Any]] = []
    for entry in changes.disruptive if changes else ():
        found = entry.disruption
        assert found is not None
        out.append(
            {
                "kind": entry.ref.kind,
                "namespace": entry.ref.namespace,
                "name": entry.ref.name,
                "stage": entry.stage,
                "action": str(entry.action),
                "reason": found.reason[:1000],
                "nodes": sorted(found.nodes)[:MAX_LISTED],
                "nodeCount": len(found.nodes),
                "claims": list(found.claims[:MAX_LISTED]),
                "claimCount": len(found.claims),
            }
        )
    return out


__all__ = [
    "MAX_LISTED",
    "MAX_REPAIRS",
    "NAMESPACES",
    "Live",
    "changes_of",
    "conflicts_of",
    "disruptive_of",
    "drift_of",
    "frozen_of",
    "keep_repairs",
    "maintenances_of",
    "manager_of",
    "operator_of",
    "repaired",
    "waiting_of",
    "waiting_summary",
    "written_body",
]
