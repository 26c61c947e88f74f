"""Desired state of one cluster: what fleet should apply, as data (``Plan``).

A ``Plan`` is made from the repository alone by ``fleet.engine.renders.plan`` (a pure
function of a resolved ``ClusterView``) and read by everything downstream: the engine's
stages, ``fleetctl diff``/``apply``, the controller, and ``fleet.engine.plancaches``,
which keeps plans on disk. This module holds only the data and what is computed from it
and the live cluster, without the repository's models: a process that takes a stored
plan never imports them (the manifests' pydantic models and the policy checks are a large
part of a command's start).

- ``Desired``: one object to apply, its stage, source, field manager and drift policy.
- ``PoolRule``: which Nodes (selector), what labels and taints to keep on them, how many nodes and
  GPUs to expect. Nodes are live objects, so the rule is expanded into per-Node metadata applies by
  ``pool_objects`` once the engine has listed them; ``release`` builds the apply that gives a pool Node back.
- ``OperatorRelease``: the GPU Operator Helm release the operator stage installs.
- ``MaintenanceRule``: a GPUMaintenance (which devices, why, how far); ``fleet.engine.maintenances`` expands it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleet.engine import normalizations, ownership, stages
from fleet.kube import Ref
from fleet.manifests import windows

GPU_DRIVER = "gpu.nvidia.com"  # NVIDIA's GPU driver: whose devices a GPUMaintenance takes unless it names others


@dataclass(frozen=True, slots=True)
class Desired:
    """One object to apply: the body, its stage, where it was declared, and as which manager.

    ``obj`` is what is applied: ``body`` carrying the ``revision`` annotation. A declared object's
    ``body`` is its memoised render, shared by every plan, and the copy with the revision is made
    only when something reads ``obj`` (the objects a commit changed, mostly), not once per object
    on every commit.

    Slotted: the controller keeps a plan of 10,000 of them, and an instance's ``__dict__`` (with the
    values computed once: ``applied``, ``ref``, ``order``, ``leaves``) was five times its slots.
    Those values live in slots of their own, set on first read (``copied`` carries them over).
    """

    body: dict[str, Any]
    stage: stages.Stage
    source: str
    field_manager: str = ownership.MANAGER
    drift: str = "enforce"
    """What to do when the cluster changed the object but git did not: enforce, report, ignore."""
    force: bool = False
    """Always take ownership (pool Nodes: their taints are an atomic list shared with controllers;
    manifests annotated ``fleet.gpufleet.dev/take-ownership: "true"``)."""
    freeze: str = ""
    """The manifest's ``fleet.gpufleet.dev/drift`` annotation (report or ignore; stripped, and ``drift``
    set from it): listed as frozen in status, as a person's freeze on the live object is."""
    adopt: bool = False
    """The repository allows fleet to take this object over if it exists already (it is then released, not deleted)."""
    revision: str = ""
    """The revision annotation ``obj`` adds to ``body`` (empty: ``body`` is ``obj``)."""
    team: str = ""
    """The Team whose directory declares the object ("" for the platform's): fleet writes it as that
    team's ServiceAccount (``fleet.engine.impersonations``)."""
    _applied: str | None = field(default=None, init=False, repr=False, compare=False)
    _ref: Ref | None = field(default=None, init=False, repr=False, compare=False)
    _order: tuple[int, str, str, str, str] | None = field(default=None, init=False, repr=False, compare=False)
    _leaves: frozenset[tuple[str, ...]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def obj(self) -> dict[str, Any]:
        return ownership.with_revision(self.body, self.revision)

    @property
    def applied(self) -> str:
        """The applied-hash annotation (the same with or without the revision, which it leaves out;
        computed once: a commit asks it of every object of the plan)."""
        found = self._applied
        if found is None:
            found = normalizations.annotation(self.body, ownership.APPLIED)
            object.__setattr__(self, "_applied", found)
        return found

    @property
    def ref(self) -> Ref:
        found = self._ref
        if found is None:
            found = Ref.of(self.obj)
            object.__setattr__(self, "_ref", found)
        return found

    @property
    def order(self) -> tuple[int, str, str, str, str]:
        """Apply order: the stage, then the Ref (as ``Ref``'s own ordering, without comparing dataclasses)."""
        found = self._order
        if found is None:
            ref = self.ref
            found = (stages.index(self.stage), ref.api_version, ref.kind, ref.namespace, ref.name)
            object.__setattr__(self, "_order", found)
        return found

    @property
    def leaves(self) -> frozenset[tuple[str, ...]]:
        """The field paths applying ``obj`` sets (``normalizations.desired_leaves``), computed once."""
        found = self._leaves
        if found is None:
            found = frozenset(normalizations.desired_leaves(self.obj))
            object.__setattr__(self, "_leaves", found)
        return found

    def knows(self, *, ref: Ref) -> None:
        """Take ``ref`` as this object's Ref (one computed before, for the same body)."""
        object.__setattr__(self, "_ref", ref)

    def copied(self, *, revision: str | None = None, drift: str | None = None) -> Desired:
        """This object with another ``revision`` or ``drift``, keeping the values computed so far (without
        ``__init__``, which would compute nothing but costs a call per field): the revision annotation is
        left out of ``applied`` and not part of the Ref or the order; the applied leaves carry over only
        when both revisions are set (the annotation is there either way)."""
        copy = _new(Desired)  # one setter per slot, written out: a loop over them costs three times as much
        _set_body(copy, self.body)
        _set_stage(copy, self.stage)
        _set_source(copy, self.source)
        _set_field_manager(copy, self.field_manager)
        _set_drift(copy, self.drift if drift is None else drift)
        _set_force(copy, self.force)
        _set_freeze(copy, self.freeze)
        _set_adopt(copy, self.adopt)
        _set_revision(copy, self.revision if revision is None else revision)
        _set_team(copy, self.team)
        _set_applied(copy, self._applied)
        _set_ref(copy, self._ref)
        _set_order(copy, self._order)
        _set_leaves(copy, self._leaves if revision is None or (revision and self.revision) else None)
        return copy


_new = object.__new__
_setters = {name: getattr(Desired, name).__set__ for name in Desired.__slots__}
"""Each slot's setter (its member descriptor's, which a frozen dataclass's ``__setattr__`` does not guard)."""
_set_body, _set_stage, _set_source = (_setters[n] for n in ("body", "stage", "source"))
_set_field_manager = _setters["field_manager"]
_set_drift, _set_force, _set_freeze, _set_adopt = (_setters[n] for n in ("drift", "force", "freeze", "adopt"))
_set_revision, _set_team, _set_applied, _set_ref = (_setters[n] for n in ("revision", "team", "_applied", "_ref"))
_set_order, _set_leaves = _setters["_order"], _setters["_leaves"]


@dataclass(frozen=True)
class PoolRule:
    """What a GPUNodePool asks of the nodes its selector matches."""

    name: str
    selector: dict[str, str]
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    nodes: int
    gpu_product: str
    gpus_per_node: int
    source: str
    team: str = ""
    """The Team whose folder declares the pool ("" for the platform's): its Node writes are made as
    that team (``fleet.engine.impersonations``), which the API server refuses."""

    def matches(self, node: dict[str, Any]) -> bool:
        labels = (node.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in self.selector.items())


@dataclass(frozen=True)
class OperatorRelease:
    """The GPU Operator Helm release a GPUOperator declares (the operator stage installs it)."""

    release: str
    namespace: str
    repository: str
    chart: str
    version: str
    install_path: str
    values: dict[str, Any]
    """The user's values over the install path's (the guide's ``--set`` flags); validation refuses a contradiction."""
    allow_downgrade: bool
    allow_major: bool
    driver_state_timeout: int
    source: str
    remediation: str = "rollback"
    """``rollback``, ``uninstall`` or ``none``: what follows a failed install or upgrade."""
    retries: int = 0
    """How many more times one run tries after remediating a failure."""
    kubernetes_version: str = ""
    """The Cluster's ``spec.kubernetesVersion`` (``1.36``): what the chart renders against offline."""
    team: str = ""
    """The Team whose folder declares the GPUOperator ("" for the platform's): a team may not install
    the cluster-wide release, so fleet refuses the revision (``fleet.engine.impersonations``)."""


@dataclass(frozen=True)
class ChangeRules:
    """When a disruptive change may be applied (a Cluster's ``spec.maintenance`` and ``spec.disruption``,
    the Fleet's ``spec.rollout``): ``fleet.engine.waits`` reads them."""

    windows: tuple[windows.Window, ...] = ()
    """Maintenance windows; none: a disruptive change is not held for a window."""
    policy: str = "wait"
    """What a disruptive change does about allocated claims on the nodes it touches: wait, drain, force."""
    deadline: float = 86400.0
    """Seconds ``wait`` or ``drain`` may take before the change is reported overdue."""
    max_unavailable: int = 1  # ``drain``: nodes cordoned at once
    wave: int = 0
    """The cluster's rollout wave, counted from 1 (the Fleet's ``spec.rollout.waves``); 0: in no wave."""
    earlier: tuple[tuple[str, ...], ...] = ()
    """The clusters of each wave before this one, in order: their commit statuses gate this cluster."""
    bake: float = 0.0
    """Seconds an earlier wave's success must stand before this wave's disruptive changes go."""
    source: str = ""
    """Where the Cluster declares them (``file:line:col``)."""
    deadline_at: datetime | None = None
    """A GPUMaintenance's ``deadline``: waiting for the jobs ends then."""


@dataclass(frozen=True)
class Targets:
    """Which devices a GPUMaintenance names (its ``spec.devices``), as plain data; ``drivers`` (): any driver's."""

    pools: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()
    selector: str = ""
    health_taints: tuple[str, ...] = ()
    drivers: tuple[str, ...] = (GPU_DRIVER,)


@dataclass(frozen=True)
class MaintenanceRule:
    """A GPUMaintenance of this cluster: which devices, why, how far (``effect``: None, NoSchedule or
    NoExecute; ``direct``: at once, without the None preview), under which change rules."""

    name: str
    targets: Targets
    reason: str
    effect: str = "NoExecute"
    direct: bool = False
    api_version: str = ""
    """The cluster's DeviceTaintRule API (``resource.k8s.io/v1`` on 1.37); "" where it has none."""
    rules: ChangeRules = field(default_factory=ChangeRules)
    """The Cluster's change rules with the maintenance's own ``disruption`` and ``deadline`` over them."""
    source: str = ""
    drift: str = "enforce"  # the Fleet's drift policy for DeviceTaintRules (``driftPolicyByKind``)
    adopt: bool = False  # ``fleet.gpufleet.dev/adopt``: take over a rule of no maintenance (``kept_names``)


@dataclass(frozen=True)
class Plan:
    cluster: str
    revision: str
    objects: tuple[Desired, ...]
    pools: tuple[PoolRule, ...] = ()
    teams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Team name → its namespaces (for the running-pods guard on removal)."""
    operator: OperatorRelease | None = None
    prune: bool = True
    """The Fleet's ``defaults.prune``: whether the controller prunes (``fleetctl apply`` asks ``--prune``)."""
    allow_empty: bool = False
    """The Fleet's ``allowEmpty``: an empty plan may be applied (``fleetctl apply`` also takes ``--allow-empty``)."""
    rules: ChangeRules = field(default_factory=ChangeRules)
    """When disruptive changes may go (``fleet.engine.waits``)."""
    maintenances: tuple[MaintenanceRule, ...] = ()

    @property
    def empty(self) -> bool:
        """Declares nothing for the cluster: applying it with pruning would delete everything fleet applied."""
        return not self.objects and not self.pools and not self.maintenances

    def rules_of(self, maintenance: str) -> ChangeRules:
        """The change rules of the GPUMaintenance ``maintenance`` ("" or unknown: the Cluster's)."""
        return next((m.rules for m in self.maintenances if m.name == maintenance), self.rules)

    def in_stage(self, stage: stages.Stage) -> list[Desired]:
        return list(self._by_stage.get(stage.name, ()))

    @functools.cached_property
    def _by_stage(self) -> dict[str, list[Desired]]:
        out: dict[str, list[Desired]] = {}
        for d in self.objects:
            out.setdefault(d.stage.name, []).append(d)
        return out


def pool_objects(pools: tuple[PoolRule, ...], *, nodes: list[dict[str, Any]]) -> list[Desired]:
    """Per-Node metadata applies (manager ``fleet-pools``) for the live ``nodes`` the pools match.

    Node taints are an atomic list in the API, so applying ours alone would drop
    taints others put there. fleet applies the live taints it does not own plus the
    pool's, and records the keys it owns in an annotation to tell them apart later.
    The node lifecycle controller also writes that list, so these applies always
    force (``Desired.force``): otherwise every pool with taints would conflict.

    The result is only as fresh as ``nodes``: the engine diffs with the Nodes listed at
    the start of a run, but writes with this function applied to a Node it has just
    read, conditional on that read's resourceVersion (``fleet.engine.nodes``).
    """
    stage = stages.by_name("pools")
    out: list[Desired] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        rules = [p for p in pools if p.matches(node)]
        if not rules:
            continue
        meta = node.get("metadata") or {}
        labels: dict[str, str] = {}
        taints: list[dict[str, str]] = []
        # A Node a team's pool selects is written as that team, even beside the platform's pools.
        team = next((rule.team for rule in rules if rule.team), "")
        for rule in rules:
            labels.update(rule.labels)
            labels[ownership.POOL_LABEL] = rule.name
            taints.extend(rule.taints)
        ours = {t["key"] for t in taints}
        previously = set(filter(None, ((meta.get("annotations") or {}).get(ownership.POOL_TAINTS) or "").split(",")))
        others = [t for t in (node.get("spec") or {}).get("taints") or () if t.get("key") not in ours | previously]
        obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": meta["name"],
                "labels": labels,
                "annotations": {ownership.POOL_TAINTS: ",".join(sorted(ours)), ownership.SOURCE: rules[-1].source},
            },
        }
        # Always the whole list: once fleet-pools owns it, an apply without it would delete it.
        obj["spec"] = {"taints": [*others, *taints]}
        ownership.fingerprinted(obj)
        out.append(
            Desired(
                body=obj,
                stage=stage,
                source=rules[-1].source,
                field_manager=ownership.POOL_MANAGER,
                force=True,
                team=team,
            )
        )
    return out


def release(ref: Ref, *, live: dict[str, Any] | None = None) -> dict[str, Any]:
    """The apply that gives back what fleet-pools set on a Node (its "prune").

    Labels and annotations are given back by not applying them. The taints list is
    atomic: giving it back would delete the taints others put there too, so fleet-pools
    keeps the list and applies it without its own taints. (Other adopted objects are
    released with ``ownership.release_patch``, which keeps their values.)
    """
    body: dict[str, Any] = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": {"name": ref.name}}
    meta = (live or {}).get("metadata") or {}
    ours = set(filter(None, ((meta.get("annotations") or {}).get(ownership.POOL_TAINTS) or "").split(",")))
    taints = ((live or {}).get("spec") or {}).get("taints") or []
    if taints:
        body["spec"] = {"taints": [t for t in taints if t.get("key") not in ours]}
    return body


@dataclass(frozen=True)
class Overlap:
    """A live Node that the selectors of more than one pool pick."""

    node: str
    pools: tuple[PoolRule, ...]

    def describe(self) -> str:
        named = " and ".join(f"{p.name!r} ({p.source})" for p in self.pools)
        return (
            f"Node {self.node} is selected by pools {named}: fleet would rewrite its labels and taints "
            "back and forth; fleet applies nothing while this stands"
        )


def overlaps(pools: tuple[PoolRule, ...], *, nodes: list[dict[str, Any]]) -> list[Overlap]:
    """Live ``nodes`` that more than one pool's node selector matches (validation sees only nested selectors)."""
    found: list[Overlap] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        rules = tuple(sorted((p for p in pools if p.matches(node)), key=lambda p: p.name))
        if len(rules) > 1:
            found.append(Overlap(node=node["metadata"]["name"], pools=rules))
    return found


__all__ = [
    "Desired",
    "MaintenanceRule",
    "OperatorRelease",
    "Overlap",
    "Plan",
    "PoolRule",
    "Targets",
    "overlaps",
    "pool_objects",
    "release",
]
