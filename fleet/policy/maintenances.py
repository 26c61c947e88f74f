"""Rules for GPUMaintenances: a maintenance that would not do what it says is refused before the merge.

A GPUMaintenance (``fleet.manifests.maintenances``) becomes DeviceTaintRules that take devices out of
scheduling and evict the jobs on them (``fleet.engine.maintenances``). A mistake in one shows only after
the merge, on the cluster: a selector that takes no device leaves a failing GPU in service, one that takes
a whole pool leaves a team's pods Pending, two maintenances on one device each hold it, a direct
``NoExecute`` evicts at once. So ``validate`` judges each maintenance of each cluster:

- with no devices (``check``): the cluster has a DeviceTaintRule API fleet can walk
  (``featuregates.maintenance_api``; ``maintenance-api``), and a ``direct`` ``NoExecute`` has something to
  hold the eviction back, a maintenance window of the Cluster or a ``disruption`` of its own
  (``maintenance-direct``);
- over the repository (``references``): every name in ``devices.pools`` is a GPUNodePool
  (``maintenance-pool``);
- on the devices fleet knows for the cluster (``judge``), selected exactly as the engine selects them
  (``fleet.inventory.targets``): those the cluster publishes (``--context``, ``--inventory``), else those
  its GPUNodePools declare (``fleet.policy.declarations``). A maintenance that takes no device is an
  error on published devices and a warning on declared ones (``maintenance-devices``); its selector reads
  no attribute that no device publishes (``cel-unknown-attribute``); it takes not every device of the
  pools a team's claim can be allocated from, alone or with the cluster's other maintenances that take
  devices out of scheduling, unless ``allowFullPool`` (``maintenance-full-pool``); no two maintenances
  take one device (``maintenance-overlap``).

Declared devices have made-up node names and uuids and no health taints, so a maintenance that names
nodes, uuids or health taints is judged on published devices only; one that names pools is judged where
the nodes of each pool are known (the declared ones, or ``--context``'s nodes by their labels; not a
snapshot's). A maintenance that failed its schema is not judged on devices: what is left of it is not
what was written. The selector's compile errors and removed attributes are the CEL rules'
(``fleet.policy.selectors``); where a maintenance may be written is ``fleet.policy.structures``'.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from fleet import cel
from fleet.manifests import ClusterView, Finding, Location, Manifest, Path, Revision, Severity, kinds
from fleet.manifests import maintenances as models
from fleet.policy import declarations, featuregates
from fleet.policy.selectors import locate

if TYPE_CHECKING:
    # Imported where a maintenance is judged on devices: most revisions have none.
    from fleet.inventory import Inventory
    from fleet.policy.declarations import Declared
    from fleet.policy.satisfiability import Live

DEVICES: Path = ("spec", "devices")
SELECTOR: Path = (*DEVICES, "selector")
SHOWN = 5
"""Devices, claims or names a message lists before it counts the rest."""


# -- without devices ------------------------------------------------------------------------------


def check(manifests: Sequence[Manifest], *, features: featuregates.ClusterFeatures | None) -> Iterator[Finding]:
    """``maintenance-api`` and ``maintenance-direct`` for the maintenances one cluster gets."""
    found = [m for m in manifests if isinstance(m.model, models.GPUMaintenance)]
    if not found or features is None:
        return
    cluster = next((m.model for m in manifests if isinstance(m.model, kinds.Cluster)), None)
    for manifest in found:
        assert isinstance(manifest.model, models.GPUMaintenance)
        if not featuregates.maintenance_api(features):
            yield _no_api(manifest, features=features)
        spec = manifest.model.spec
        windows = cluster.spec.maintenance if isinstance(cluster, kinds.Cluster) else None
        if spec.direct and spec.effect == "NoExecute" and spec.disruption is None and windows is None:
            yield Finding(
                manifest.positions.at(("spec", "direct")),
                "maintenance-direct",
                f"direct: true writes NoExecute without the None preview, and nothing holds the eviction back: "
                f"cluster {features.cluster} has no maintenance window and the maintenance sets no disruption",
                hint=f"set spec.disruption (policy: wait or drain) in {manifest.file}, add spec.maintenance.windows "
                f"to {features.file}, or remove direct to walk None, NoSchedule, NoExecute",
                object=manifest.ref,
            )


def _no_api(manifest: Manifest, *, features: featuregates.ClusterFeatures) -> Finding:
    """Which minor, and what it lacks: the API version and gate a minor before the GA one needs, or the
    effect and preview of the minors before those."""
    ga = _first_default_minor()
    upgrade = f"upgrade {features.cluster} to 1.{ga}, where DeviceTaintRule is served by default"
    where = f"cluster {features.cluster} (Kubernetes {features.version})"
    if features.minor < featuregates.MAINTENANCE_MINOR:
        apis = featuregates.TAINT_RULE_APIS.get(features.minor, ())
        what = f" ({', '.join(apis)})" if apis else ""
        served = ", ".join(f"1.{m}" for m in range(featuregates.MAINTENANCE_MINOR, ga))
        message = f"{where} has no DeviceTaintRule fleet can walk: its DeviceTaintRule{what} has no None effect "
        message += "and no eviction preview"
        hint = f"{upgrade} (or to {served} with its DeviceTaintRule API served and its gate on)"
    else:
        api = featuregates.TAINT_RULE_APIS[features.minor][0]
        gate = featuregates.taint_rule_gate(features.minor)
        seen = "spec.apiVersions" if features.source == "declared" else f"discovery on the {features.source}"
        lacks, steps = [], []
        if api not in features.apis:
            lacks.append(f"{api} is not served ({seen} does not list it)")
            steps.append(f"run kube-apiserver with --runtime-config={api}=true and list {api} in spec.apiVersions")
        if not features.on(gate):
            off = [d for d in featuregates.GATES[gate].depends if d in featuregates.GATES and not features.on(d)]
            lacks.append(f"feature gate {gate} is off" + (f" (it needs {', '.join(off)})" if off else ""))
            gates = [*off, gate]
            steps.append(
                "run kube-apiserver, kube-scheduler and kube-controller-manager with "
                f"--feature-gates={','.join(f'{g}=true' for g in gates)} and declare "
                f"{', '.join(f'{g}: true' for g in gates)} in spec.featureGates"
            )
        message = f"{where} has no DeviceTaintRule API for a maintenance: {' and '.join(lacks)}"
        hint = f"{'; '.join(steps)} of {features.file}; or {upgrade}"
    return Finding(
        manifest.positions.at(("spec", "clusters")),
        "maintenance-api",
        message,
        hint=hint,
        object=manifest.ref,
        cluster=features.cluster,
    )


def _first_default_minor() -> int:
    """The first minor whose defaults carry a maintenance (``maintenance_api`` says which)."""
    first = featuregates.MAINTENANCE_MINOR
    for minor in range(first, first + 10):
        defaults = featuregates.effective(minor, {})
        if featuregates.maintenance_api(featuregates.ClusterFeatures("", "", minor, defaults)):
            return minor
    return first + 1


# -- over the repository --------------------------------------------------------------------------


def references(revision: Revision) -> Iterator[Finding]:
    """``maintenance-pool``: a name in ``devices.pools`` that no GPUNodePool has (overlays cannot rename one)."""
    pools = sorted({m.name for m in revision.of_kind("GPUNodePool")})
    # a pool whose file does not load is already a finding: its name is not a second one
    broken = {PurePosixPath(f.location.file).stem for f in revision.findings if f.severity == "error"}
    for manifest in revision.of_kind("GPUMaintenance"):
        assert isinstance(manifest.model, models.GPUMaintenance)
        for index, name in enumerate(manifest.model.spec.devices.pools):
            if name in pools or name in broken:
                continue
            close = difflib.get_close_matches(name, pools, n=1)
            yield Finding(
                manifest.positions.at((*DEVICES, "pools", index)),
                "maintenance-pool",
                f"no GPUNodePool named {name!r}: the maintenance takes no device there",
                hint=(f"did you mean {close[0]!r}? " if close else "") + f"known pools: {', '.join(pools) or 'none'}",
                object=manifest.ref,
            )


# -- on the devices -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Devices:
    """The devices a cluster's maintenances are judged on."""

    inventory: Inventory
    source: str
    """Whose devices: ``declared pools``, ``snapshot FILE`` or ``live context CTX`` (findings end with it)."""
    pool_nodes: Mapping[str, Sequence[str]] | None
    """GPUNodePool → its nodes; None where they are not known (a maintenance naming pools is not judged)."""
    published: bool = True
    """The cluster's own devices; False: those its GPUNodePools declare."""


def declared_devices(view: ClusterView, declared: Declared) -> Devices | None:
    """The devices ``view``'s GPUNodePools declare (None when they are not known)."""
    if declared.inventory is None:
        return None
    nodes: dict[str, Sequence[str]] = {p.name: [] for p in view.pools}
    nodes.update(declared.nodes)
    return Devices(declared.inventory, declarations.SOURCE, nodes, published=False)


def published_devices(view: ClusterView, inventory: Inventory, *, source: str, live: Live | None) -> Devices:
    """The devices the cluster publishes; each pool's nodes by their labels where ``live`` read the nodes."""
    labels = live.nodes if live is not None else None
    nodes: dict[str, Sequence[str]] | None = None
    if labels is not None:
        nodes = {}
        for pool in view.pools:
            assert isinstance(pool.model, kinds.GPUNodePool)
            wanted = pool.model.spec.node_selector.items()
            nodes[pool.name] = sorted(n for n, have in labels.items() if wanted <= have.items())
    return Devices(inventory, source, nodes)


@dataclasses.dataclass(frozen=True)
class _Filters:
    """Some of a maintenance's ``spec.devices``, to find the one that leaves no device (``targets.Filters``)."""

    pools: Sequence[str] = ()
    nodes: Sequence[str] = ()
    devices: Sequence[str] = ()
    uuids: Sequence[str] = ()
    selector: str | None = None
    health_taints: Sequence[str] = ()
    drivers: Sequence[str] = ()  # any driver's


def judge(view: ClusterView, *, devices: Devices, pools: Collection[str]) -> list[Finding]:
    """``maintenance-devices``, ``cel-unknown-attribute``, ``maintenance-full-pool`` and ``maintenance-overlap``
    for the maintenances of ``view`` on ``devices``. ``pools``: every GPUNodePool of the repository (a
    maintenance naming another is ``maintenance-pool``'s, and is not judged on devices)."""
    wanted = [
        m
        for m in view.maintenances
        if isinstance(m.model, models.GPUMaintenance)
        and _judged(m, devices)
        and all(p in pools for p in m.model.spec.devices.pools)
    ]
    if not wanted:
        return []
    from fleet.inventory import targets

    findings: list[Finding] = []
    taking: list[tuple[Manifest, set[int]]] = []
    claims = _Claims(view, devices.inventory)
    for manifest in wanted:
        assert isinstance(manifest.model, models.GPUMaintenance)
        spec = manifest.model.spec
        try:
            taken = set(targets.select(spec.devices, devices.inventory, pool_nodes=devices.pool_nodes or {}))
        except cel.SelectorCompileError:
            continue  # the cel rule says where
        unknown = _unknown_attributes(manifest, devices=devices, cluster=view.name)
        findings += unknown
        if not taken:
            if not unknown:
                findings.append(_nothing(manifest, devices=devices, cluster=view.name))
            continue
        findings += _missing(manifest, devices=devices, cluster=view.name)
        taking.append((manifest, taken))
    if devices.pool_nodes is not None:
        out = [(m, taken) for m, taken in taking if _out_of_service(m)]
        for manifest, taken in out:
            assert isinstance(manifest.model, models.GPUMaintenance)
            if not manifest.model.spec.allow_full_pool:
                others = [(m, theirs) for m, theirs in out if m is not manifest]
                findings += _full_pools(manifest, taken, others, devices=devices, claims=claims, cluster=view.name)
    findings += _overlaps(taking, devices=devices, cluster=view.name)
    return findings


def _out_of_service(manifest: Manifest) -> bool:
    """The maintenance takes its devices out of scheduling (any effect but ``None``)."""
    assert isinstance(manifest.model, models.GPUMaintenance)
    return manifest.model.spec.effect != "None"


def _judged(manifest: Manifest, devices: Devices) -> bool:
    assert isinstance(manifest.model, models.GPUMaintenance)
    filters = manifest.model.spec.devices
    if manifest.salvaged:
        return False
    if not devices.published and (filters.nodes or filters.uuids or filters.health_taints):
        return False
    return not (filters.pools and devices.pool_nodes is None)


def _finding(
    manifest: Manifest,
    where: Path | Location,
    rule: str,
    message: str,
    *,
    hint: str,
    devices: Devices,
    cluster: str,
    severity: Severity = "error",
) -> Finding:
    """A finding about ``manifest`` at ``where`` (a path in it, or a location), saying whose devices."""
    return Finding(
        where if isinstance(where, Location) else manifest.positions.at(where),
        rule,
        f"{message} (devices: {devices.source})",
        severity=severity,
        hint=hint,
        object=manifest.ref,
        cluster=cluster,
    )


def _unknown_attributes(manifest: Manifest, *, devices: Devices, cluster: str) -> list[Finding]:
    """The selector reads an attribute or capacity that no device publishes: it is false everywhere."""
    from fleet.inventory import explanations

    assert isinstance(manifest.model, models.GPUMaintenance)
    expression = manifest.model.spec.devices.selector
    if not expression:
        return []
    found = []
    for use, hint in explanations.unknown_names(devices.inventory, cel.compile_selector(expression)):
        line, col = cel.position(expression, use.offset)
        what = "attribute" if use.kind == "attributes" else "capacity"
        found.append(
            _finding(
                manifest,
                locate(manifest, SELECTOR, line=line, col=col),
                "cel-unknown-attribute",
                f"no device publishes {what} {use.domain}/{use.name}: the selector is false on every device that "
                "lacks it, and the maintenance takes none of them",
                hint=hint,
                devices=devices,
                cluster=cluster,
            )
        )
    return found


def _nothing(manifest: Manifest, *, devices: Devices, cluster: str) -> Finding:
    """``maintenance-devices`` at the first field that alone leaves no device (else at ``spec.devices``)."""
    from fleet.inventory import explanations, targets

    assert isinstance(manifest.model, models.GPUMaintenance)
    filters = manifest.model.spec.devices
    inventory, pool_nodes = devices.inventory, devices.pool_nodes or {}
    severity: Severity = "error" if devices.published else "warning"
    declared = (
        "" if devices.published else "; if the cluster publishes them, check with fleetctl validate --context CTX"
    )

    def nothing(where: Path | Location, message: str, hint: str) -> Finding:
        return _finding(
            manifest,
            where,
            "maintenance-devices",
            f"the maintenance takes no device: {message}",
            hint=hint + declared,
            devices=devices,
            cluster=cluster,
            severity=severity,
        )

    scope = _Filters(pools=filters.pools, nodes=filters.nodes)
    within = targets.select(scope, inventory, pool_nodes=pool_nodes)
    place = _place(filters.pools, filters.nodes)
    if (filters.pools or filters.nodes) and not within:
        away = [p for p in filters.pools if p not in pool_nodes]
        why = f" (GPUNodePool {', '.join(away)} does not go to cluster {cluster})" if away else ""
        known = [f"pools of cluster {cluster}: {', '.join(sorted(pool_nodes)) or 'none'}"] if filters.pools else []
        if filters.nodes:
            known.append(f"nodes with devices: {_listed(sorted({d.node for d in inventory.devices}))}")
        return nothing(
            (*DEVICES, "pools" if filters.pools else "nodes"), f"no device is published {place}{why}", "; ".join(known)
        )
    scope = dataclasses.replace(scope, drivers=filters.drivers)
    ours = targets.select(scope, inventory, pool_nodes=pool_nodes)
    if not ours:
        published = sorted({inventory.devices[i].driver for i in within})
        return nothing(
            (*DEVICES, "drivers"),
            f"no device {place} is published by driver {', '.join(filters.drivers)}",
            f"drivers there: {', '.join(published)}" if published else "no driver publishes devices there",
        )
    there = [inventory.devices[i] for i in ours]
    if filters.devices and not targets.select(
        dataclasses.replace(scope, devices=filters.devices), inventory, pool_nodes=pool_nodes
    ):
        return nothing(
            (*DEVICES, "devices"),
            f"no device {place} is named {', '.join(filters.devices)}",
            f"device names {place}: {_listed(sorted({d.name for d in there}))}",
        )
    if filters.uuids and not targets.select(
        dataclasses.replace(scope, uuids=filters.uuids), inventory, pool_nodes=pool_nodes
    ):
        return nothing(
            (*DEVICES, "uuids"),
            f"no device {place} has uuid {', '.join(filters.uuids)}",
            "fleetctl inventory -o json lists each device's uuid",
        )
    if filters.health_taints and not targets.select(
        dataclasses.replace(scope, health_taints=filters.health_taints), inventory, pool_nodes=pool_nodes
    ):
        keys = sorted({str(t.get("key", "")) for d in there for t in d.taints})
        return nothing(
            (*DEVICES, "healthTaints"),
            f"no device {place} carries a taint {', '.join(filters.health_taints)}",
            f"taints there: {', '.join(keys)}" if keys else "no device there carries a taint",
        )
    expression = filters.selector
    if expression and not targets.select(
        dataclasses.replace(scope, selector=expression), inventory, pool_nodes=pool_nodes
    ):
        uses = cel.compile_selector(expression).references.names
        values = explanations.closest_values(inventory, uses, within)
        return nothing(
            locate(manifest, SELECTOR, line=1, col=1),
            f"the selector is false on every device {place}",
            f"the devices there have {'; '.join(values)}" if values else "check the selector against the devices",
        )
    return nothing(
        DEVICES,
        "each field of spec.devices alone matches devices, but no device passes them all",
        "a device is taken when it passes every field given: check that they name the same devices",
    )


def _missing(manifest: Manifest, *, devices: Devices, cluster: str) -> Iterator[Finding]:
    """A named node or uuid that no published device has, where the rest of the maintenance takes devices
    (declared devices are not judged by node or uuid)."""
    from fleet.inventory import targets

    assert isinstance(manifest.model, models.GPUMaintenance)
    filters = manifest.model.spec.devices
    ours = [d for d in devices.inventory.devices if d.driver in filters.drivers]
    nodes = {d.node for d in ours}
    uuids = {str(d.device.get("attributes", *targets.UUID_ATTRIBUTE)) for d in ours}
    named = (
        ("nodes", nodes, f"node {{}} publishes no device of driver {', '.join(filters.drivers)}, so the "
         "maintenance takes none there", f"nodes with devices: {_listed(sorted(nodes))}"),
        ("uuids", uuids, "no device has uuid {}, so the maintenance does not take it",
         "fleetctl inventory -o json lists each device's uuid"),
    )  # fmt: skip
    for field, known, message, hint in named:
        for index, value in enumerate(getattr(filters, field)):
            if value not in known:
                yield _finding(
                    manifest,
                    (*DEVICES, field, index),
                    "maintenance-devices",
                    message.format(value),
                    hint=hint,
                    devices=devices,
                    cluster=cluster,
                    severity="warning",
                )


class _Claims:
    """For each claim of a cluster, the devices each of its requests can use (any alternative), computed
    once per cluster and only when a maintenance takes a whole pool."""

    def __init__(self, view: ClusterView, inventory: Inventory) -> None:
        self._view, self._inventory = view, inventory
        self._usable: list[tuple[Manifest, list[frozenset[int]]]] | None = None

    def usable(self) -> list[tuple[Manifest, list[frozenset[int]]]]:
        if self._usable is None:
            from fleet.inventory.matches import Matcher
            from fleet.inventory.requests import read_claim

            classes = {m.name: m.data for m in self._view.device_classes}
            matcher = Matcher(inventory=self._inventory, classes=classes)
            self._usable = []
            for claim in self._view.claims:
                spec = claim.data.get("spec") or {}
                if claim.kind == "ResourceClaimTemplate":
                    spec = spec.get("spec") or {}
                shape, _ = read_claim(spec)
                per_request = [
                    frozenset(i for alternative in alternatives for i in matcher.match(alternative).matching)
                    for alternatives in shape.requests
                ]
                self._usable.append((claim, per_request))
        return self._usable


def _full_pools(
    manifest: Manifest,
    taken: set[int],
    others: Sequence[tuple[Manifest, set[int]]],
    *,
    devices: Devices,
    claims: _Claims,
    cluster: str,
) -> Iterator[Finding]:
    """Every device of the pools some request of a claim can be allocated from: its pods stay Pending.
    ``others``: the cluster's other maintenances out of service, with what they take; a pool the
    maintenance empties together with them counts, and the message names them."""
    assert isinstance(manifest.model, models.GPUMaintenance) and devices.pool_nodes is not None
    inventory, drivers = devices.inventory, set(manifest.model.spec.devices.drivers)
    by_node: dict[str, list[int]] = {}
    for index, device in enumerate(inventory.devices):
        if device.driver in drivers:  # the pool's devices the maintenance may take: its drivers'
            by_node.setdefault(device.node, []).append(index)
    out = taken.union(*(theirs for _, theirs in others))
    whole = {
        pool: members
        for pool, nodes in devices.pool_nodes.items()
        if (members := frozenset(i for n in nodes for i in by_node.get(n, ()))) and members & taken and members <= out
    }
    if not whole:
        return
    covered = frozenset().union(*whole.values())
    stranded: list[tuple[Manifest, list[str]]] = []
    for claim, requests in claims.usable():
        usable = next((u for u in requests if u and u <= covered), None)
        if usable is not None:
            stranded.append((claim, sorted(p for p, members in whole.items() if members & usable)))
    if not stranded:
        return
    pools = sorted({p for _, names in stranded for p in names})
    teams = sorted({c.team for c, _ in stranded if c.team})
    emptied = frozenset().union(*(whole[p] for p in pools))
    partners = [] if emptied <= taken else [f"GPUMaintenance {m.name!r} ({m.file})" for m, t in others if t & emptied]
    together = f" together with {', '.join(partners)}" if partners else ""
    yield _finding(
        manifest,
        (*DEVICES, "pools") if manifest.model.spec.devices.pools else DEVICES,
        "maintenance-full-pool",
        f"the maintenance takes every device of pool {', '.join(pools)}{together}, the only devices "
        f"{_listed([c.ref for c, _ in stranded])} can be allocated from: their pods stay Pending until it ends",
        hint=f"leave some devices of {', '.join(pools)} in service (name nodes, devices or uuids), or set "
        f"allowFullPool: true if team {', '.join(teams) or '(none)'} can wait for the repair",
        devices=devices,
        cluster=cluster,
    )


def _overlaps(taking: Sequence[tuple[Manifest, set[int]]], *, devices: Devices, cluster: str) -> Iterator[Finding]:
    """Two maintenances of one cluster that take a same device: each would hold it, and neither gives it back."""
    for index, (second, theirs) in enumerate(taking):
        for first, ours in taking[:index]:
            both = sorted(theirs & ours)
            if not both:
                continue
            shown = [f"{devices.inventory.devices[i].node}/{devices.inventory.devices[i].name}" for i in both]
            yield _finding(
                second,
                DEVICES,
                "maintenance-overlap",
                f"GPUMaintenance {second.name!r} ({second.file}) and {first.name!r} ({first.file}) both take "
                f"{len(both)} device(s): {_listed(shown)}",
                hint="a device is in one maintenance at a time: leave these devices out of one of them, "
                "or merge the two into one file",
                devices=devices,
                cluster=cluster,
            )


def _place(pools: Sequence[str], nodes: Sequence[str]) -> str:
    parts = [f"pool {', '.join(pools)}" if pools else "", f"node {', '.join(nodes)}" if nodes else ""]
    named = " or ".join(p for p in parts if p)
    return f"on {named}" if named else "on the cluster"


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN]) or "none"
    return f"{shown} and {len(names) - SHOWN} more" if len(names) > SHOWN else shown


__all__ = [
    "Devices",
    "check",
    "declared_devices",
    "judge",
    "published_devices",
    "references",
]
