"""The desired state of one cluster, computed from the repository alone (``fleet.engine.plans.Plan``).

``plan(view, revision=...)`` is a pure function from a resolved ``ClusterView`` to a
``Plan``. It turns the platform's and teams' declarations into Kubernetes objects,
the work the DRA guide otherwise asks an operator to do by hand:

- Team → a Namespace per team namespace; in each, a Role granting only
  create/get/list/watch/update/patch/delete on ``resourceclaims`` and
  ``resourceclaimtemplates`` (nothing on DeviceClasses or ResourceSlices: those are
  cluster-scoped and the platform's), a RoleBinding to the team's owners and to the team's
  ServiceAccount (``impersonations.SERVICE_ACCOUNT`` in the team's first namespace: fleet writes
  the team's objects as it, ``fleet.engine.impersonations``), and a ResourceQuota capping
  devices per class (``<class>.deviceclass.resource.k8s.io/devices``). Where
  the cluster has DRAExtendedResource (``fleet.policy.featuregates``), a pod may also get a class's
  devices by asking ``resources.limits`` for ``deviceclass.resource.kubernetes.io/<class>`` or the
  class's ``extendedResourceName`` (e.g. ``nvidia.com/gpu``): the quota then also holds
  ``requests.deviceclass.resource.kubernetes.io/<class>`` and ``requests.<extendedResourceName>``
  at the same limit. Kubernetes (1.36, ``pkg/quota/v1/evaluator/core``) charges a pod's request to
  the ``requests.`` keys when it is created, so a pod beyond the quota is refused rather than left
  Pending, and charges every claim of a class with an extendedResourceName to all three keys (the
  scheduler's claim for such a pod only where the pod was not charged already): one device counts
  once against each key, whichever way it was asked for. A class without one has its claims charged
  to the devices key only, and pods asking its implicit name to the ``requests.`` key as well.
- DeviceClass, ResourceClaimTemplate, ResourceClaim → as written (a claim without
  a namespace goes to the team's first namespace).
- GPUNodePool → a ``PoolRule``: which Nodes (selector), what labels and taints to
  keep on them, how many nodes and GPUs to expect. Nodes are live objects, so the
  rule is expanded into per-Node metadata applies by ``plans.pool_objects`` once the
  engine has listed them.

An object may already exist when fleet first wants it. ``Desired.adopt`` says the
repository allows fleet to take it over: the manifest carries
``fleet.gpufleet.dev/adopt: "true"`` (stripped before applying), or, for a team's
Namespace, the Team's ``spec.adoptNamespaces``. ``plans.release`` builds the apply that
gives a pool Node back. Team objects never go into a reserved
namespace (``kube-*``, ``default``, fleet's own, the operator's): ``plan`` refuses,
as ``fleetctl validate`` does (rule ``reserved-namespace``).

Every object is stamped with ownership labels and source/revision annotations, and
carries its drift policy: when the cluster changed an object git did not, ``enforce``
re-applies it, ``report`` records it without writing, ``ignore`` leaves it alone
silently. The most specific declaration wins: the team's ``driftPolicyByKind``, the
team's ``driftPolicy``, the Fleet's ``defaults.driftPolicyByKind``, then its
``defaults.driftPolicy`` (``drift_policy``, see ``drift_policy``) — and above all of them the
manifest's own ``fleet.gpufleet.dev/drift`` annotation (an instruction, removed before applying:
``fleet.engine.drifts``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from fleet.engine import impersonations, ownership, stages
from fleet.engine.plans import ChangeRules, Desired, MaintenanceRule, OperatorRelease, Plan, PoolRule, Targets
from fleet.errors import FleetError
from fleet.kube import Ref
from fleet.kube.shapes import Shapes
from fleet.manifests import kinds, maintenances, windows
from fleet.manifests.revisions import Manifest
from fleet.manifests.views import ClusterView
from fleet.policy import extendedresources, featuregates, tenancy

CLAIM_RESOURCES = ("resourceclaims", "resourceclaimtemplates")
CLAIM_VERBS = ("create", "get", "list", "watch", "update", "patch", "delete")
TEAM_ROLE = impersonations.TEAM_ROLE
QUOTA_NAME = "fleet-devices"


def plan(view: ClusterView, *, revision: str) -> Plan:
    """The desired objects of ``view``'s cluster, in stage order."""
    cluster = view.name
    out: list[Desired] = []
    teams: dict[str, tuple[str, ...]] = {}

    fleet = view.fleet.model if view.fleet is not None else None
    defaults = fleet.spec.defaults if isinstance(fleet, kinds.Fleet) else kinds.FleetDefaults()
    team_specs: dict[str, kinds.TeamSpec] = {}

    def add(obj: dict[str, Any], source: str, team: str = "", *, adopt: bool = False) -> None:
        requested = _adoption_requested(obj)
        adopt = adopt or requested
        take = _instruction(obj, ownership.TAKE_OWNERSHIP) if ownership.ownership_requested(obj) else False
        freeze = _freeze(obj)
        stamped = ownership.stamp(obj, cluster=cluster, revision=revision, source=source)
        drift = freeze or drift_policy(obj["kind"], team=team_specs.get(team), defaults=defaults)
        out.append(
            Desired(
                body=stamped,
                stage=stages.stage_of(obj["kind"]),
                source=source,
                drift=drift,
                adopt=adopt,
                force=take,
                freeze=freeze if freeze != "enforce" else "",
            )
        )

    features = featuregates.declared(view.cluster)
    extended = (
        extendedresources.extended_names(view.device_classes)
        if features is not None and features.on("DRAExtendedResource")
        else None
    )
    operator = view.operator.model if view.operator is not None else None
    operator_ns = operator.spec.namespace if isinstance(operator, kinds.GPUOperator) else None
    for team in view.teams:
        model = team.model
        assert isinstance(model, kinds.Team)
        for ns in model.spec.namespaces:
            why = tenancy.reserved(ns, operator_namespace=operator_ns)
            if why:
                raise FleetError(
                    f"team {team.name!r} names namespace {ns!r}, {why}; nothing was planned",
                    where=f"{team.location} (cluster {cluster})",
                    hint="give the team a namespace of its own",
                )
        teams[team.name] = tuple(model.spec.namespaces)
        team_specs[team.name] = model.spec
        adopted = model.spec.adopted_namespaces()
        for obj in team_objects(model, extended=extended):
            namespace = obj["kind"] == "Namespace" and obj["metadata"]["name"] in adopted
            add(obj, str(team.location), team.name, adopt=namespace)

    def add_declared(manifest: Manifest, team: str = "", namespace: str | None = None) -> None:
        declared, adopt, take, ref, source, freeze = _declared(
            manifest, cluster=cluster, team=team, namespace=namespace
        )
        drift = freeze or drift_policy(ref.kind, team=team_specs.get(team), defaults=defaults)
        stage = stages.stage_of(ref.kind)
        desired = Desired(
            body=declared,
            stage=stage,
            source=source,
            drift=drift,
            adopt=adopt,
            force=take,
            revision=revision,
            freeze=freeze if freeze != "enforce" else "",
            team=team,
        )
        # The revision annotation is the only difference from the memoised render, so its Ref (and
        # the Ref's cached key) carry over: a commit of one file does not rebuild 10,000 of them.
        desired.knows(ref=ref)
        out.append(desired)

    default_ns = {name: namespaces[0] for name, namespaces in teams.items()}
    folder_to_team = {t.team: t.name for t in view.teams if t.team}

    def origin(manifest: Manifest) -> str:
        """The Team whose folder declares ``manifest`` ("" for the platform's): whatever its kind, a
        file from a team's folder is written as that team (``fleet.engine.impersonations``)."""
        return folder_to_team.get(manifest.team or "", manifest.team or "")

    for manifest in view.device_classes:
        add_declared(manifest, origin(manifest))
    for manifest in view.claims:
        team_name = origin(manifest)
        add_declared(manifest, team_name, default_ns.get(team_name))
    pools = tuple(
        _pool_rule(p.model, str(p.location), team=origin(p))
        for p in view.pools
        if isinstance(p.model, kinds.GPUNodePool)
    )
    declared = view.operator
    rules = _rules(
        view.cluster.model,
        rollout=fleet.spec.rollout if isinstance(fleet, kinds.Fleet) else None,
        source=str(view.cluster.location),
    )
    api = featuregates.maintenance_api(features)
    return Plan(
        cluster=cluster,
        revision=revision,
        objects=ordered(out),
        pools=pools,
        teams=teams,
        operator=_operator(declared.model, str(declared.location), cluster=view.cluster.model, team=origin(declared))
        if declared
        else None,
        prune=defaults.prune,
        allow_empty=fleet.spec.allow_empty if isinstance(fleet, kinds.Fleet) else False,
        rules=rules,
        maintenances=tuple(
            _maintenance(
                m.model,
                str(m.location),
                rules=rules,
                api_version=api,
                drift=drift_policy(KIND, team=None, defaults=defaults),
            )
            for m in view.maintenances
            if isinstance(m.model, maintenances.GPUMaintenance)
        ),
    )


KIND = "DeviceTaintRule"
"""What a GPUMaintenance is carried out through."""


def _maintenance(
    model: maintenances.GPUMaintenance, source: str, *, rules: ChangeRules, api_version: str, drift: str
) -> MaintenanceRule:
    """A GPUMaintenance as the engine's ``MaintenanceRule``: its own disruption policy and deadline over the
    Cluster's rules (windows and waves stay the Cluster's)."""
    spec = model.spec
    t = spec.devices
    own = spec.disruption
    if own is not None:
        rules = dataclasses.replace(
            rules,
            policy=own.policy,
            deadline=windows.parse_duration(own.deadline).total_seconds(),
            max_unavailable=own.max_unavailable,
        )
    if spec.deadline is not None:
        rules = dataclasses.replace(rules, deadline_at=spec.deadline)
    return MaintenanceRule(
        name=model.metadata.name,
        targets=Targets(
            pools=tuple(t.pools),
            nodes=tuple(t.nodes),
            devices=tuple(t.devices),
            uuids=tuple(t.uuids),
            selector=t.selector or "",
            health_taints=tuple(t.health_taints),
            drivers=tuple(t.drivers),
        ),
        reason=spec.reason,
        effect=spec.effect,
        direct=spec.direct,
        api_version=api_version,
        rules=rules,
        source=source,
        drift=drift,
        adopt=model.metadata.annotations.get(ownership.ADOPT) == ownership.ADOPT_VALUE,
    )


def _rules(cluster: Any, *, rollout: kinds.Rollout | None, source: str) -> ChangeRules:
    """The Cluster's maintenance windows and disruption policy, and its place in the Fleet's rollout
    waves, as the engine's ``ChangeRules``."""
    if not isinstance(cluster, kinds.Cluster):
        return ChangeRules()
    spec = cluster.spec
    disruption = spec.disruption
    name = cluster.metadata.name
    waves = [tuple(w) for w in rollout.waves] if rollout is not None else []
    number = next((i for i, names in enumerate(waves, start=1) if name in names), 0)
    return ChangeRules(
        windows=tuple(w.window() for w in spec.maintenance.windows) if spec.maintenance else (),
        policy=disruption.policy,
        deadline=windows.parse_duration(disruption.deadline).total_seconds(),
        max_unavailable=disruption.max_unavailable,
        wave=number,
        earlier=tuple(waves[: number - 1]) if number else (),
        bake=windows.parse_duration(rollout.bake).total_seconds() if rollout is not None and number > 1 else 0.0,
        source=source,
    )


def drift_policy(kind: str, *, team: kinds.TeamSpec | None, defaults: kinds.FleetDefaults) -> str:
    """The drift policy of an object of ``kind``: the most specific declaration wins."""
    if team is not None:
        if kind in team.drift_policy_by_kind:
            return team.drift_policy_by_kind[kind]
        if team.drift_policy:
            return team.drift_policy
    return defaults.drift_policy_by_kind.get(kind, defaults.drift_policy)


def team_objects(team: kinds.Team, *, extended: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Namespace, Role, RoleBinding and ResourceQuota for every namespace of ``team``, and the team's
    ServiceAccount in its first namespace (a subject of every RoleBinding: exactly the Role's rights).

    ``extended`` (class → extendedResourceName, for a cluster with DRAExtendedResource; None
    without it) adds the extended-resource keys to the quota (see the module docstring)."""
    name = team.metadata.name
    subjects = [_subject(o.kind, o.name, o.namespace) for o in team.spec.owners]
    home = team.spec.namespaces[0] if team.spec.namespaces else ""
    subjects.append(_subject("ServiceAccount", impersonations.SERVICE_ACCOUNT, home))
    objs: list[dict[str, Any]] = []
    # without this label the API server refuses requests with adminAccess: true
    admin = {kinds.ADMIN_ACCESS_LABEL: "true"} if team.spec.admin_access else {}
    for ns in team.spec.namespaces:
        team_label = {ownership.TEAM_LABEL: name}
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": team_label | admin}})
        if ns == home:
            objs.append(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": impersonations.SERVICE_ACCOUNT, "namespace": ns, "labels": dict(team_label)},
                    "automountServiceAccountToken": False,
                }
            )
        objs.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": TEAM_ROLE, "namespace": ns, "labels": dict(team_label)},
                "rules": [
                    {"apiGroups": ["resource.k8s.io"], "resources": list(CLAIM_RESOURCES), "verbs": list(CLAIM_VERBS)}
                ],
            }
        )
        objs.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": TEAM_ROLE, "namespace": ns, "labels": dict(team_label)},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TEAM_ROLE},
                "subjects": subjects,
            }
        )
        if team.spec.quota:
            hard = quota_keys(team.spec.quota, extended=extended)
            objs.append(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": QUOTA_NAME, "namespace": ns, "labels": dict(team_label)},
                    "spec": {"hard": hard},
                }
            )
    return objs


def quota_keys(quota: Mapping[str, int], *, extended: Mapping[str, str] | None) -> dict[str, str]:
    """A team's ResourceQuota ``hard``: per class, its devices, and with ``extended`` the
    extended-resource keys pods asking for the class by name are charged to."""
    hard: dict[str, str] = {}
    for cls, n in sorted(quota.items()):
        hard[f"{cls}.deviceclass.resource.k8s.io/devices"] = str(n)
        if extended is not None:
            hard[f"requests.{extendedresources.IMPLICIT_PREFIX}{cls}"] = str(n)
            if cls in extended:
                hard[f"requests.{extended[cls]}"] = str(n)
    return hard


def _adoption_requested(obj: dict[str, Any]) -> bool:
    """Whether the manifest carries the adopt annotation; it is removed (it is an instruction, not content)."""
    if not ownership.adoption_requested(obj):
        return False
    return _instruction(obj, ownership.ADOPT)


def _freeze(obj: dict[str, Any]) -> str:
    """The drift policy the manifest's ``fleet.gpufleet.dev/drift`` annotation sets ("" without one,
    or with a value validation refuses: ``drift-annotation``); the annotation is removed."""
    value = ownership.drift_requested(obj)
    if not value:
        return ""
    _instruction(obj, ownership.DRIFT)
    return value if value in ("enforce", "report", "ignore") else ""


def _instruction(obj: dict[str, Any], annotation: str) -> bool:
    """Remove ``annotation`` from ``obj`` (an instruction to fleet, not content to apply); True."""
    annotations = obj["metadata"]["annotations"]
    del annotations[annotation]
    if not annotations:
        del obj["metadata"]["annotations"]
    return True


def _pool_rule(model: kinds.GPUNodePool, source: str, *, team: str = "") -> PoolRule:
    spec = model.spec
    return PoolRule(
        name=model.metadata.name,
        selector=dict(spec.node_selector),
        labels=dict(spec.labels),
        taints=tuple(
            {"key": t.key, "value": t.value, "effect": t.effect} if t.value else {"key": t.key, "effect": t.effect}
            for t in spec.taints
        ),
        nodes=spec.nodes,
        gpu_product=spec.gpu.product_name,
        gpus_per_node=spec.gpu.count,
        source=source,
        team=team,
    )


_PATH_VALUES: dict[str, dict[str, Any]] = {
    "gpuCluster": {
        "clusterPolicy": {"deployCR": False},
        "gpuCluster": {"deployCR": True},
        "driver": {"nvidiaDriverCRD": {"enabled": True}},
    },
    "preinstalledDriver": {
        "clusterPolicy": {"deployCR": False},
        "gpuCluster": {"deployCR": True},
        "driver": {"enabled": False},
    },
}
"""The guide's ``--set`` flags per install path (validation refuses values that contradict them)."""


def _operator(model: Any, source: str, *, cluster: Any = None, team: str = "") -> OperatorRelease | None:
    if not isinstance(model, kinds.GPUOperator):
        return None
    spec = model.spec
    values = _merge(_PATH_VALUES[spec.install_path], json.loads(json.dumps(spec.values, default=str)))
    return OperatorRelease(
        release=spec.release,
        namespace=spec.namespace,
        repository=spec.chart.repository,
        chart=spec.chart.name,
        version=spec.chart.version,
        install_path=spec.install_path,
        values=values,
        allow_downgrade=spec.upgrade.allow_downgrade,
        allow_major=spec.upgrade.allow_major,
        driver_state_timeout=spec.upgrade.driver_state_timeout,
        source=source,
        remediation=spec.remediation.strategy,
        retries=spec.remediation.retries,
        kubernetes_version=cluster.spec.kubernetes_version if isinstance(cluster, kinds.Cluster) else "",
        team=team,
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _subject(kind: str, name: str, namespace: str | None) -> dict[str, str]:
    if kind == "ServiceAccount":
        return {"kind": kind, "name": name, "namespace": namespace or ""}
    return {"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": name}


def ordered(objects: list[Desired]) -> tuple[Desired, ...]:
    """A plan's objects in apply order (``Desired.order``): runs already in order (each unit's claims
    carried from the last plan) are merged, not sorted again."""
    return tuple(sorted(objects, key=_order))


def carried(desired: Desired, *, revision: str) -> Desired:
    """A declared object of an earlier plan, for ``revision``: what ``plan`` makes of the same manifest
    (the body is the memoised render; only the revision differs). Its cached Ref carries over, and
    so do its applied leaves when both revisions are set (the annotation is there either way)."""
    return desired.copied(revision=revision)


def source_file(source: str) -> str:
    """The file of a Desired's ``source`` (``file:line:col``, or the file alone)."""
    head, _, col = source.rpartition(":")
    file, _, line = head.rpartition(":")
    return file if file and line.isdigit() and col.isdigit() else source


def _order(d: Desired) -> tuple[int, str, str, str, str]:
    return d.order


def _declared(
    manifest: Manifest, *, cluster: str, team: str, namespace: str | None
) -> tuple[dict[str, Any], bool, bool, Ref, str, str]:
    """A DeviceClass or claim as fleet applies it, stamped and fingerprinted but without the revision.

    Computed once per manifest (``Manifest.memo``; an unchanged file keeps its manifests in
    the controller's ``ParseCache``), so a commit that changes one file of 10,000 re-renders
    one object: the rest differ only by the revision annotation (``ownership.with_revision``).
    Nothing downstream changes a Desired object in place (the engine copies), so sharing it is safe.
    The second and third values: the manifest asks fleet to adopt the object if it exists
    (``adopt``) and to take fields from other managers (``take-ownership``); both annotations are
    instructions, not content, so they are removed before the applied hash is taken, and the
    memoised object is never changed afterwards. The fourth and fifth: the object's Ref and where
    it was declared, the same for every revision; the sixth, the drift policy the manifest's
    ``fleet.gpufleet.dev/drift`` annotation sets (also an instruction, removed). Equal labels and
    specs of different manifests are one object (``_SHAPES``): about a third of a plan's memory, and
    of its pickle (``plancaches``).
    """
    key = sys.intern(f"plan\0{cluster}\0{team}\0{namespace or ''}")  # kept in each manifest's memo: one string
    found: tuple[dict[str, Any], bool, bool, Ref, str, str] | None = manifest.memo.get(key)
    if found is None:
        obj = _clean(manifest.data)
        if not obj["metadata"].get("namespace") and namespace:
            obj["metadata"]["namespace"] = namespace
        if team:
            obj["metadata"].setdefault("labels", {})[ownership.TEAM_LABEL] = team
        adopt = _adoption_requested(obj)
        take = _instruction(obj, ownership.TAKE_OWNERSHIP) if ownership.ownership_requested(obj) else False
        freeze = _freeze(obj)
        source = str(manifest.location)
        stamped = _SHAPES.share(ownership.stamp(obj, cluster=cluster, revision="", source=source))
        kept = [k for k in manifest.memo if k.startswith("plan\0")]
        if len(kept) >= _RENDERS_KEPT:  # bounded: a team whose namespaces keep changing adds a key each time
            del manifest.memo[kept[0]]
        found = manifest.memo[key] = (stamped, adopt, take, Ref.of(stamped), source, freeze)
    return found


_RENDERS_KEPT = 8
"""Renders a manifest keeps (per cluster, team and default namespace): a fleet's clusters, a few times over."""


_SHAPES = Shapes()
"""Labels and specs of the objects rendered so far, for the process (bounded: ``Shapes.limit``)."""


def share(manifests: Iterable[Manifest]) -> None:
    """Let each manifest's ``spec`` and labels be an equal one seen before (``_SHAPES``, the table its
    render shares them through): the controller keeps every parsed manifest, and templates stamped
    from one pattern have equal specs, each of its own as parsed (much of a claim's data).
    Safe as the render's sharing is: nothing changes a manifest's data in place. A salvaged
    manifest's data is left alone (what salvaging left is its own)."""
    for manifest in manifests:
        if not manifest.salvaged:
            _SHAPES.share(manifest.data)


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest as written, with a ``metadata`` of its own (``stamp`` writes labels and annotations
    there) and every other field shared with ``data``: the loader's data is JSON-plain already
    (``fleet.manifests.yamls``), and neither the manifest nor the Desired object is ever changed in
    place. Sharing saves a copy of every spec the controller keeps."""
    obj = dict(data)
    obj["metadata"] = _plain_copy(data.get("metadata") or {})
    return obj


def _plain_copy(value: Any) -> Any:
    """A deep copy of JSON-plain data (maps, lists and immutable scalars, as the loader makes them):
    ``copy.deepcopy``'s answer without its memo and dispatch, once per object of a plan."""
    if isinstance(value, dict):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_copy(v) for v in value]
    return value


__all__ = [
    "CLAIM_RESOURCES",
    "CLAIM_VERBS",
    "QUOTA_NAME",
    "TEAM_ROLE",
    "carried",
    "drift_policy",
    "ordered",
    "plan",
    "quota_keys",
    "share",
    "source_file",
    "team_objects",
]
