"""The data of each console page, from one snapshot and what the viewer may see of it (pure).

Every figure comes from ``fleet.views``, the functions ``fleetctl status``, ``inventory`` and
``explain`` print from: a page never counts by itself. What the viewer may not see is left out
(objects) or named as hidden (a device held by a claim in a namespace the viewer cannot read shows
as allocated, without the claim and pods; a pod waited on by a GPU maintenance is counted, and named
only to who may see its namespace's claims).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fleet.console.access import Sight
from fleet.console.sources import (
    CLAIMS,
    CLASSES,
    EVENTS,
    NAMESPACES,
    NODES,
    PODS,
    QUOTAS,
    RULES,
    SLICES,
    TEMPLATES,
    KindKey,
    Snapshot,
)
from fleet.engine.ownership import POOL_LABEL
from fleet.errors import FleetError
from fleet.inventory import leftovers
from fleet.views import devices, fleetsyncs, maintenances, slices, teams

HIDDEN = "(a claim you may not see)"


class NotAllowed(FleetError):
    """The viewer may see nothing of the page: the console answers 403 with what is missing."""


VIEWER_HINT = "ask for the ClusterRole fleet-console-viewer (overlays/console), or for view rights where you work"


def row(snapshot: Snapshot, sight: Sight) -> fleetsyncs.Row:
    """The cluster's row, or one saying the viewer may not read its FleetSync."""
    if sight.fleetsync or not snapshot.row.reachable:
        return snapshot.row
    return fleetsyncs.forbidden(snapshot.cluster, snapshot.context)


def fleet(rows: Sequence[fleetsyncs.Row]) -> Sequence[fleetsyncs.Row]:
    """The fleet page's rows; NotAllowed when the viewer may read no cluster's FleetSync."""
    if rows and all(r.reason == "Forbidden" for r in rows):
        raise NotAllowed("you may not see any cluster of this fleet", hint=VIEWER_HINT)
    return rows


@dataclass(frozen=True)
class Cluster:
    row: fleetsyncs.Row
    status: Mapping[str, Any]
    stages: Sequence[Mapping[str, Any]]
    changes: Sequence[Mapping[str, Any]]
    change_count: int
    disruptive: Sequence[Mapping[str, Any]]
    drift: Sequence[Mapping[str, Any]]
    conflicts: Sequence[Mapping[str, Any]]
    findings: Sequence[Mapping[str, Any]]
    events: Sequence[Mapping[str, Any]]
    missing: Mapping[KindKey, str]
    maintenances: Sequence[maintenances.Maintenance] = ()
    maintenance_note: str = ""
    """Why the maintenances are the controller's last view (``status.maintenances``), not the live rules."""


def cluster(snapshot: Snapshot, sight: Sight) -> Cluster:
    if row(snapshot, sight).reason == "Forbidden":
        raise NotAllowed(f"you may not see cluster {snapshot.cluster}'s FleetSync", hint=VIEWER_HINT)
    status: Mapping[str, Any] = (snapshot.fleetsync or {}).get("status") or {} if sight.fleetsync else {}
    repaired = [d for d in status.get("drift") or () if d.get("action") == "repaired"]
    shown, note = _maintenances(snapshot, sight, status)
    return Cluster(
        row=row(snapshot, sight),
        status=status,
        stages=list(status.get("stages") or ()),
        changes=list(status.get("changes") or ()),
        change_count=int(status.get("changeCount") or 0),
        disruptive=list(status.get("disruptive") or ()),
        drift=repaired,
        conflicts=list(status.get("conflicts") or ()),
        findings=list(status.get("findings") or ()),
        events=[_event(e) for e in sight.seen(EVENTS, snapshot.of(EVENTS))][:50],
        missing=snapshot.missing,
        maintenances=shown,
        maintenance_note=note,
    )


def _maintenances(
    snapshot: Snapshot, sight: Sight, status: Mapping[str, Any]
) -> tuple[list[maintenances.Maintenance], str]:
    """The cluster's GPU maintenances (``fleet.views.maintenances``) from the live rules and claims, or, where the
    viewer may not list the rules or the console could not read the claims, as the FleetSync last said; the
    pods waited on named only in namespaces whose claims the viewer may see (all of them counted)."""
    if sight.sees(RULES) and RULES in snapshot.objects and CLAIMS in snapshot.objects:
        found = maintenances.read(
            rules=snapshot.of(RULES),
            claims=snapshot.of(CLAIMS),
            slices=snapshot.of(SLICES) if sight.sees(SLICES) else (),
            teams=teams.namespace_teams(snapshot.of(NAMESPACES)),
            waiting=status.get("waiting") or (),
        )
        note = ""
    else:
        found = maintenances.from_status(status.get("maintenances") or ())
        why = snapshot.missing.get(RULES) or snapshot.missing.get(CLAIMS) or "you may not list devicetaintrules"
        note = f"as the controller last wrote them ({why})" if found else ""
    shown = [replace(m, pods=tuple(p for p in m.pods if sight.sees(CLAIMS, p.namespace))) for m in found]
    return shown, note


def _event(event: Mapping[str, Any]) -> Mapping[str, Any]:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    where = f"{involved.get('namespace')}/" if involved.get("namespace") else ""
    return {
        "time": str(event.get("lastTimestamp") or event.get("eventTime") or ""),
        "type": str(event.get("type") or ""),
        "reason": str(event.get("reason") or ""),
        "object": f"{involved.get('kind', '')} {where}{involved.get('name', '')}".strip(),
        "message": str(event.get("message") or event.get("note") or ""),
    }


@dataclass(frozen=True)
class Node:
    name: str
    pool: str
    taints: tuple[str, ...]
    """The Node's own taints (``spec.taints``), the DRA driver's health taints among them."""
    devices: tuple[devices.Device, ...]
    counts: Mapping[str, int]
    marks: Mapping[str, tuple[maintenances.Mark, ...]] = field(default_factory=dict)
    """Device name → the GPU maintenances whose DeviceTaintRule taints it (``fleet.views.maintenances.marks``)."""

    @property
    def maintenances(self) -> tuple[str, ...]:
        """The GPU maintenances that take some of its devices, by name."""
        return tuple(sorted({m.maintenance for found in self.marks.values() for m in found}))


@dataclass(frozen=True)
class Pool:
    name: str
    nodes: tuple[Node, ...]
    counts: Mapping[str, int]


@dataclass(frozen=True)
class Gpus:
    pools: tuple[Pool, ...]
    tallies: tuple[devices.Tally, ...]
    tainted: tuple[devices.Device, ...]
    hidden: int
    """Allocated devices whose claim the viewer may not see."""
    missing: Mapping[KindKey, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return sum(t.total for t in self.tallies)


def _counts(items: Sequence[devices.Device]) -> dict[str, int]:
    counts = dict.fromkeys(leftovers.STATES, 0)
    for item in items:
        counts[item.state] = counts.get(item.state, 0) + 1
    return counts


def may_list_gpus(snapshot: Snapshot, sight: Sight) -> None:
    """NotAllowed unless the viewer may list the cluster's ResourceSlices."""
    if not sight.sees(SLICES) or snapshot.missing.get(SLICES, "").startswith("you may not"):
        raise NotAllowed(f"you may not list the GPUs (resourceslices) of cluster {snapshot.cluster}", hint=VIEWER_HINT)


def with_rules(snapshot: Snapshot, sight: Sight) -> bool:
    """Whether the viewer's device picture carries the DeviceTaintRules' taints, as the scheduler sees the
    devices (``fleet.views.slices.scheduled``): where the viewer may list the rules and they were read."""
    return sight.sees(RULES) and RULES in snapshot.objects


def picture_key(snapshot: Snapshot, *, rules: bool = False) -> tuple[str, ...]:
    """What a device picture depends on: the slices, the claims, the namespaces (teams) and, ``rules``,
    the DeviceTaintRules, by version."""
    kinds = (SLICES, CLAIMS, NAMESPACES, *((RULES,) if rules else ()))
    if all(k in snapshot.versions for k in kinds):
        return (snapshot.cluster, str(rules), *(snapshot.versions[k] for k in kinds))
    return (snapshot.cluster, str(rules), snapshot.version)


@dataclass(frozen=True)
class Devices:
    """What the GPUs page keeps of a cluster's device picture: the devices with their holders and
    states, the per-model tally and the inventory's notes (not the inventory: it is most of the
    memory, and a view does not need it)."""

    found: tuple[devices.Device, ...]
    tallies: tuple[devices.Tally, ...]
    notes: tuple[str, ...]


def picture(snapshot: Snapshot, *, rules: bool = False) -> Devices:
    """Every device of the snapshot with its holder and state (``fleet.views.devices.picture``); with
    ``rules``, each device carries the taints the DeviceTaintRules put on it, as ``fleetctl inventory``
    reads them (a device under maintenance is ``tainted``, not free)."""
    team_of = teams.namespace_teams(snapshot.of(NAMESPACES))
    read = slices.scheduled(snapshot.of(SLICES), snapshot.of(RULES)) if rules else list(snapshot.of(SLICES))
    seen = devices.picture(read, list(snapshot.of(CLAIMS)), teams=team_of)
    return Devices(seen.devices, seen.tallies, tuple(seen.inventory.notes))


NO_POOL = "(in no fleet pool)"
"""Where nodes without fleet's pool label are listed."""


def pool_of(item: devices.Device, node_pool: Mapping[str, str]) -> str:
    """The fleet pool (GPUNodePool) a device's node belongs to, by the node's ``fleet.gpufleet.dev/pool``
    label; a device of no node (network-attached) is listed under its driver's pool."""
    if item.node in node_pool:
        return node_pool[item.node] or NO_POOL
    return item.pool if item.node in ("", "?", "*") else NO_POOL


def gpus(snapshot: Snapshot, sight: Sight, seen: Devices | None = None) -> Gpus:
    """Pools → nodes → devices with who holds each; allocation counts; free capacity per model.
    ``seen`` is the snapshot's ``picture`` when the caller keeps one."""
    may_list_gpus(snapshot, sight)
    seen = seen if seen is not None else picture(snapshot, rules=with_rules(snapshot, sight))
    unknown = CLAIMS in snapshot.missing  # states need every claim: counted without them, all would be free
    hidden = 0
    shown: list[devices.Device] = []
    for item in seen.found:
        if unknown:
            item = replace(item, state="unknown")
        elif item.claim and not sight.sees(CLAIMS, item.namespace):
            item = replace(item, claim=HIDDEN, pods=())
            hidden += 1
        shown.append(item)
    node_taints: dict[str, tuple[str, ...]] = {}
    node_pool: dict[str, str] = {}
    if sight.sees(NODES):
        for node in snapshot.of(NODES):
            meta = node.get("metadata") or {}
            name = str(meta.get("name") or "")
            node_taints[name] = tuple(leftovers.taint_text(t) for t in (node.get("spec") or {}).get("taints") or ())
            node_pool[name] = str((meta.get("labels") or {}).get(POOL_LABEL) or "")
    by_pool: dict[str, dict[str, list[devices.Device]]] = {}
    for item in shown:
        by_pool.setdefault(pool_of(item, node_pool), {}).setdefault(item.node, []).append(item)
    marks = maintenances.marks(snapshot.of(RULES), snapshot.of(SLICES)) if with_rules(snapshot, sight) else {}
    pools = []
    for pool_name in sorted(by_pool, key=lambda p: (p == NO_POOL, p)):
        nodes = tuple(
            Node(
                name,
                pool_name,
                node_taints.get(name, ()),
                tuple(items),
                _counts(items),
                {d.name: marks[d.id] for d in items if d.id in marks},
            )
            for name, items in sorted(by_pool[pool_name].items())
        )
        pools.append(Pool(pool_name, nodes, _counts([d for n in nodes for d in n.devices])))
    return Gpus(
        pools=tuple(pools),
        tallies=() if unknown else seen.tallies,
        tainted=tuple(d for d in shown if d.taints),
        hidden=hidden,
        missing={k: v for k, v in snapshot.missing.items() if k in (SLICES, CLAIMS, NODES)},
        notes=seen.notes,
    )


class UnknownNode(FleetError):
    """A node page for a node that publishes no device."""


def node(data: Gpus, name: str) -> Node:
    """One node of the GPUs page, with its devices."""
    for pool in data.pools:
        for found in pool.nodes:
            if found.name == name:
                return found
    raise UnknownNode(f"no node {name!r} publishes devices here", hint="the GPUs page lists the nodes that do")


def team_list(snapshot: Snapshot, sight: Sight) -> list[teams.Team]:
    """The teams whose namespaces the viewer may see something of, with quota, templates and pending pods."""
    found = teams.teams(
        namespaces=snapshot.of(NAMESPACES),
        resource_quotas=sight.seen(QUOTAS, snapshot.of(QUOTAS)),
        templates=sight.seen(TEMPLATES, snapshot.of(TEMPLATES)),
        pods=sight.seen(PODS, snapshot.of(PODS)),
        claims=snapshot.of(CLAIMS),  # every claim: a device another team holds is not free
        classes=snapshot.of(CLASSES),
        slices=snapshot.of(SLICES),
        nodes=snapshot.of(NODES),
        events=sight.seen(EVENTS, snapshot.of(EVENTS)),
    )
    visible = (CLAIMS, TEMPLATES, QUOTAS, PODS)
    return [t for t in found if any(sight.sees(kind, ns) for kind in visible for ns in t.namespaces)]


__all__ = [
    "HIDDEN",
    "VIEWER_HINT",
    "Cluster",
    "Devices",
    "Gpus",
    "Node",
    "NotAllowed",
    "Pool",
    "UnknownNode",
    "cluster",
    "fleet",
    "gpus",
    "may_list_gpus",
    "node",
    "picture",
    "picture_key",
    "row",
    "team_list",
    "with_rules",
]
