"""Pure: a cluster set up by hand (``lives.Live``) → the fleet repository that declares it.

The promise is that the repository diffs to zero against the cluster it came
from, so every object is written as fleet would render it, or left out and
listed (``Unmapped``) with the reason: nothing is dropped silently, and nothing
is written that fleet would apply differently.

- Server-set fields go (``status``, ``managedFields``, ``uid``, ``resourceVersion``,
  ``creationTimestamp``, kubectl's ``last-applied-configuration``, Helm's ownership
  marks) and so do the defaults the API server fills in (a request's
  ``allocationMode: ExactCount`` and its ``count: 1``).
- Pools group GPU nodes by ``node.kubernetes.io/instance-type`` (else GPU feature
  discovery's product label): the labels and taints every node of a group carries
  (Kubernetes' and the discovery tools' own labels aside) are what the pool keeps,
  so adopting a pool changes no node. The GPU model, count and memory come from
  the ResourceSlices the driver publishes.
- A namespace holding ResourceClaimTemplates (or claims made by hand) becomes a
  Team of that name. Its owners are the subjects of the RoleBindings whose Role
  grants no more than fleet's team Role; its quota is the ResourceQuota
  ``fleet-devices`` when it has exactly the keys fleet renders.
- ``handover`` says, per object, what the import's first apply records in the
  ledger: the objects people made with kubectl (templates, claims) become fleet's
  (``created``: pruning deletes them); namespaces, classes, RBAC and quotas are
  ``adopted`` (pruning releases them, never deletes them).
"""

from __future__ import annotations

import copy
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fleet.engine import ledgers, ownership
from fleet.engine.imports.lives import DRA_API, HelmRelease, Live
from fleet.engine.renders import CLAIM_RESOURCES, CLAIM_VERBS, QUOTA_NAME, TEAM_ROLE, quota_keys
from fleet.kube import Ref
from fleet.manifests import kinds
from fleet.policy import featuregates, tenancy

SERVER_METADATA = (
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",
)
SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
OTHER_TOOLS_PREFIXES = ("meta.helm.sh/",)
SYSTEM_LABEL_PREFIXES = (
    "kubernetes.io/",
    "beta.kubernetes.io/",
    "node.kubernetes.io/",
    "topology.kubernetes.io/",
    "node-role.kubernetes.io/",
    "feature.node.kubernetes.io/",
    "nvidia.com/",
    "kwok.x-k8s.io/",
)
"""Labels the kubelet, the cloud and the discovery tools (NFD, GFD) set: not a pool's to keep."""
SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"
"""Taints the node lifecycle controller sets (not-ready, unschedulable...)."""
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_DRIVER = "gpu.nvidia.com"
DEFAULT_CHART_REPOSITORY = str(kinds.Chart.model_fields["repository"].default)
PLACEHOLDER_OWNER = "{team}-owners"


@dataclass(frozen=True)
class Document:
    """One file of the repository: its path, its object and where the object came from."""

    path: str
    body: dict[str, Any]
    comment: str


@dataclass(frozen=True)
class Unmapped:
    """Something in the cluster the repository does not declare, and why."""

    what: str
    reason: str


@dataclass
class Imported:
    documents: list[Document] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    handover: dict[str, ledgers.Origin] = field(default_factory=dict)
    """``Ref.key`` → the origin the import's first apply records for it."""


def imported(
    live: Live, *, cluster: str, fleet: str, context: str, chart_repository: str = DEFAULT_CHART_REPOSITORY
) -> Imported:
    """The repository that declares ``live`` as cluster ``cluster`` of fleet ``fleet``."""
    out = Imported()
    out.documents.append(_fleet(fleet, cluster))
    out.documents.append(_cluster(live, cluster=cluster, context=context, out=out))
    operator_ns = kinds.GPUOperatorSpec.model_fields["namespace"].default
    if live.operator is not None:
        operator_ns = live.operator.namespace
        _operator(live.operator, chart_repository=chart_repository, out=out)
    elif live.helm_problem:
        out.unmapped.append(Unmapped("the GPU Operator release", live.helm_problem))
    classes = {str(c["metadata"]["name"]): c for c in _not_fleets(live.device_classes, out)}
    live.templates = _not_fleets(live.templates, out)
    live.claims = _not_fleets(live.claims, out)
    for name, obj in sorted(classes.items()):
        body = clean(obj)
        _annotate(body, ownership.ADOPT, ownership.ADOPT_VALUE)
        out.documents.append(Document(f"deviceclasses/{name}.yaml", body, _origin("DeviceClass", name, obj, context)))
        out.handover[Ref.of(body).key] = "adopted"
    _pools(live, cluster=cluster, out=out)
    _teams(live, cluster=cluster, context=context, classes=classes, operator_ns=str(operator_ns), out=out)
    return out


def _not_fleets(objs: list[dict[str, Any]], out: Imported) -> list[dict[str, Any]]:
    """``objs`` without those fleet manages already (another cluster's name, or this one's imported before)."""
    kept: list[dict[str, Any]] = []
    for o in objs:
        if not ownership.managed(o):
            kept.append(o)
            continue
        meta = o["metadata"]
        name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])
        cluster = (meta.get("labels") or {}).get(ownership.CLUSTER_LABEL, "?")
        out.unmapped.append(Unmapped(f"{o['kind']} {name}", f"fleet manages it already, as part of cluster {cluster}"))
    return kept


# -- objects as people write them ------------------------------------------------------------


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what the server and other tools set, keys in the order people write them."""
    meta = dict(obj.get("metadata") or {})
    for key in SERVER_METADATA:
        meta.pop(key, None)
    annotations = {
        k: v
        for k, v in (meta.pop("annotations", None) or {}).items()
        if k not in SERVER_ANNOTATIONS and not k.startswith(OTHER_TOOLS_PREFIXES)
    }
    labels = {k: v for k, v in (meta.pop("labels", None) or {}).items() if k != ownership.MANAGED_BY}
    tidy: dict[str, Any] = {"name": meta.pop("name")}
    if meta.get("namespace"):
        tidy["namespace"] = meta.pop("namespace")
    meta.pop("namespace", None)
    if labels:
        tidy["labels"] = labels
    if annotations:
        tidy["annotations"] = annotations
    tidy.update(meta)
    body: dict[str, Any] = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": tidy}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            body[key] = copy.deepcopy(value)
    if obj["kind"] in ("ResourceClaimTemplate", "ResourceClaim"):
        _without_request_defaults(body)
    return body


def _without_request_defaults(body: dict[str, Any]) -> None:
    """A request's server defaults removed: ``allocationMode: ExactCount`` and, with it, ``count: 1``."""
    spec = body.get("spec") or {}
    if spec.get("metadata") == {}:
        spec.pop("metadata")  # a template's claim metadata, defaulted to {}
    devices = (spec.get("spec") if body["kind"] == "ResourceClaimTemplate" else spec) or {}
    for request in (devices.get("devices") or {}).get("requests") or ():
        for exact in [request.get("exactly"), *(request.get("firstAvailable") or ())]:
            if not isinstance(exact, dict) or exact.get("allocationMode", "ExactCount") != "ExactCount":
                continue
            exact.pop("allocationMode", None)
            if exact.get("count") == 1:
                exact.pop("count")


def _annotate(body: dict[str, Any], key: str, value: str) -> None:
    body["metadata"].setdefault("annotations", {})[key] = value


def _origin(kind: str, name: str, obj: dict[str, Any], context: str) -> str:
    where = f"{kind} {name}, read from context {context}"
    by = ownership.owners(obj)
    return f"{where} (managed by {', '.join(by)})" if by else where


def _fleet(name: str, cluster: str) -> Document:
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": "Fleet",
        "metadata": {"name": name},
        "spec": {"clusters": [cluster]},
    }
    return Document("fleet.yaml", body, "written by fleetctl import")


def _cluster(live: Live, *, cluster: str, context: str, out: Imported) -> Document:
    gates = explicit_gates(live.features)
    spec: dict[str, Any] = {"kubernetesVersion": f"1.{live.minor}", "context": context}
    if gates:
        spec["featureGates"] = gates
    apis = sorted(v for v in live.features.apis if v.startswith("resource.k8s.io/") and v != DRA_API)
    if apis:
        spec["apiVersions"] = apis
    if featuregates.effective(live.minor, gates) != live.features.enabled:
        out.unmapped.append(
            Unmapped(
                f"the feature gates of context {context}",
                "the gates seen on the cluster are no combination fleet's table allows at 1."
                f"{live.minor}: spec.featureGates holds the ones that differ from the defaults",
            )
        )
    body = {"apiVersion": kinds.API_VERSION, "kind": "Cluster", "metadata": {"name": cluster}, "spec": spec}
    return Document(f"clusters/{cluster}.yaml", body, f"context {context}: version and DRA feature gates as seen")


def explicit_gates(features: featuregates.ClusterFeatures) -> dict[str, bool]:
    """The DRA gates whose state on the cluster differs from its minor's defaults."""
    defaults = featuregates.effective(features.minor, {})
    out: dict[str, bool] = {}
    for name, gate in sorted(featuregates.GATES.items()):
        spec = gate.spec(features.minor)
        if spec is None or spec.locked:
            continue
        if (name in features.enabled) != (name in defaults):
            out[name] = name in features.enabled
    return out


def _operator(release: HelmRelease, *, chart_repository: str, out: Imported) -> None:
    what = f"Helm release {release.namespace}/{release.name}"
    if release.status != "deployed":
        out.unmapped.append(
            Unmapped(what, f"its status is {release.status}: fleet would upgrade it; fix the release and import again")
        )
        return
    if not re.match(r"^v?[0-9]+\.[0-9]+\.[0-9]+", release.version):
        out.unmapped.append(Unmapped(what, f"chart version {release.version!r} is no semantic version"))
        return
    driver = release.values.get("driver")
    preinstalled = isinstance(driver, dict) and driver.get("enabled") is False
    spec: dict[str, Any] = {
        "chart": {"repository": chart_repository, "name": release.chart, "version": release.version},
        "namespace": release.namespace,
        "installPath": "preinstalledDriver" if preinstalled else "gpuCluster",
    }
    if release.name != kinds.GPUOperatorSpec.model_fields["release"].default:
        spec["release"] = release.name
    if release.values:
        spec["values"] = copy.deepcopy(release.values)
    body = {"apiVersion": kinds.API_VERSION, "kind": "GPUOperator", "metadata": {"name": release.name}, "spec": spec}
    comment = (
        f"{what}: chart {release.chart} {release.version} and the values its user supplied "
        "(helm get values); helm's record keeps no repository, so spec.chart.repository is the one given "
        "to fleetctl import"
    )
    out.documents.append(Document("operator/gpu-operator.yaml", body, comment))


# -- pools -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GPUs:
    product: str
    count: int
    memory: str
    mig: bool


def _gpus(slices: Iterable[dict[str, Any]]) -> dict[str, _GPUs]:
    """Per node: the GPUs the driver publishes there."""
    devices: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == GPU_DRIVER and spec.get("nodeName"):
            devices[str(spec["nodeName"])].extend(spec.get("devices") or ())
    out: dict[str, _GPUs] = {}
    for node, found in devices.items():
        gpus = [d for d in found if _attr(d, "type") == "gpu"]
        mig = any(_attr(d, "type") == "mig" for d in found)
        if not gpus:
            continue
        products = Counter(_attr(d, "productName") for d in gpus)
        memories = Counter(str(((d.get("capacity") or {}).get("memory") or {}).get("value", "")) for d in gpus)
        out[node] = _GPUs(products.most_common(1)[0][0], len(gpus), memories.most_common(1)[0][0], mig)
    return out


def _attr(device: dict[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(value.get("string") or value.get("version") or "")


def _pools(live: Live, *, cluster: str, out: Imported) -> None:
    gpus = _gpus(live.slices)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for node in sorted(live.nodes, key=lambda n: str(n["metadata"]["name"])):
        name = str(node["metadata"]["name"])
        if name not in gpus:
            continue
        labels = node["metadata"].get("labels") or {}
        key = INSTANCE_TYPE if labels.get(INSTANCE_TYPE) else GPU_PRODUCT_LABEL if labels.get(GPU_PRODUCT_LABEL) else ""
        if not key:
            out.unmapped.append(
                Unmapped(
                    f"Node {name}",
                    f"it fits no pool: it publishes GPUs but carries neither {INSTANCE_TYPE} nor {GPU_PRODUCT_LABEL} "
                    "to select it by; label it and import again",
                )
            )
            continue
        groups[(key, str(labels[key]))].append(node)
    names: set[str] = set()
    for (key, value), nodes in sorted(groups.items()):
        pool = _pool_name(value, taken=names)
        names.add(pool)
        out.documents.append(_pool(pool, key=key, value=value, nodes=nodes, gpus=gpus, cluster=cluster, out=out))


def _pool_name(value: str, *, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:50] or "pool"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def _pool(
    pool: str,
    *,
    key: str,
    value: str,
    nodes: list[dict[str, Any]],
    gpus: dict[str, _GPUs],
    cluster: str,
    out: Imported,
) -> Document:
    label_sets = [
        {
            k: v
            for k, v in (n["metadata"].get("labels") or {}).items()
            if k != key and not k.startswith(SYSTEM_LABEL_PREFIXES)
        }
        for n in nodes
    ]
    common = dict(label_sets[0])
    for labels in label_sets[1:]:
        common = {k: v for k, v in common.items() if labels.get(k) == v}
    taint_sets = [
        [
            t
            for t in (n.get("spec") or {}).get("taints") or ()
            if not str(t.get("key", "")).startswith(SYSTEM_TAINT_PREFIX)
        ]
        for n in nodes
    ]
    taints = [t for t in taint_sets[0] if all(_has_taint(ts, t) for ts in taint_sets[1:])]
    seen = Counter(gpus[str(n["metadata"]["name"])] for n in nodes)
    model = seen.most_common(1)[0][0]
    for n in nodes:
        other = gpus[str(n["metadata"]["name"])]
        if other != model:
            out.unmapped.append(
                Unmapped(
                    f"Node {n['metadata']['name']}",
                    f"it is in pool {pool} ({key}={value}) but publishes {other.count}x {other.product} where the pool "
                    f"expects {model.count}x {model.product}: give it its own {key} label to make it a pool of its own",
                )
            )
    if model.mig:
        out.unmapped.append(
            Unmapped(f"pool {pool}", "its GPUs publish MIG devices: the MIG layout (spec.mig) is not imported")
        )
    gpu: dict[str, Any] = {"productName": model.product, "count": model.count}
    if model.memory:
        gpu["memory"] = model.memory
    spec: dict[str, Any] = {"clusters": {"names": [cluster]}, "nodeSelector": {key: value}}
    if common:
        spec["labels"] = dict(sorted(common.items()))
    if taints:
        spec["taints"] = [_taint(t) for t in taints]
    spec["gpu"] = gpu
    spec["nodes"] = len(nodes)
    body = {"apiVersion": kinds.API_VERSION, "kind": "GPUNodePool", "metadata": {"name": pool}, "spec": spec}
    names = ", ".join(str(n["metadata"]["name"]) for n in nodes[:5]) + (", ..." if len(nodes) > 5 else "")
    comment = f"{len(nodes)} Node(s) with {key}={value} ({names}): the labels and taints all of them carry"
    return Document(f"pools/{pool}.yaml", body, comment)


def _has_taint(taints: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    return any(_taint(t) == _taint(taint) for t in taints)


def _taint(t: dict[str, Any]) -> dict[str, str]:
    out = {"key": str(t["key"])}
    if t.get("value"):
        out["value"] = str(t["value"])
    out["effect"] = str(t["effect"])
    return out


# -- teams -------------------------------------------------------------------------------


def _teams(
    live: Live,
    *,
    cluster: str,
    context: str,
    classes: dict[str, dict[str, Any]],
    operator_ns: str,
    out: Imported,
) -> None:
    by_ns: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in live.templates:
        by_ns[str(t["metadata"]["namespace"])].append(t)
    generated = 0
    for c in live.claims:
        if (c.get("metadata") or {}).get("ownerReferences"):
            generated += 1
            continue
        by_ns[str(c["metadata"]["namespace"])].append(c)
    if generated:
        out.unmapped.append(
            Unmapped(
                f"{generated} ResourceClaim(s) made for pods from templates",
                "they belong to their pods (ownerReferences), not to the repository",
            )
        )
    extended = _extended(live, classes)
    for ns, objs in sorted(by_ns.items()):
        why = tenancy.reserved(ns, operator_namespace=operator_ns)
        if why:
            for o in objs:
                out.unmapped.append(
                    Unmapped(
                        f"{o['kind']} {ns}/{o['metadata']['name']}",
                        f"namespace {ns} is {why.removeprefix('which is ')}: fleet gives no team a reserved "
                        "namespace; move it to a namespace of its own",
                    )
                )
            continue
        _team(ns, objs, live=live, cluster=cluster, context=context, extended=extended, out=out)


def _extended(live: Live, classes: dict[str, dict[str, Any]]) -> dict[str, str] | None:
    if not live.features.on("DRAExtendedResource"):
        return None
    return {
        name: str(c["spec"]["extendedResourceName"])
        for name, c in classes.items()
        if (c.get("spec") or {}).get("extendedResourceName")
    }


def _team(
    ns: str,
    objs: list[dict[str, Any]],
    *,
    live: Live,
    cluster: str,
    context: str,
    extended: dict[str, str] | None,
    out: Imported,
) -> None:
    used: set[str] = set()
    for o in sorted(objs, key=lambda o: (str(o["kind"]), str(o["metadata"]["name"]))):
        body = clean(o)
        _annotate(body, ownership.ADOPT, ownership.ADOPT_VALUE)
        used |= _classes_named(body)
        name = str(o["metadata"]["name"])
        suffix = "" if o["kind"] == "ResourceClaimTemplate" else "-claim"
        out.documents.append(
            Document(f"teams/{ns}/{name}{suffix}.yaml", body, _origin(str(o["kind"]), f"{ns}/{name}", o, context))
        )
        out.handover[Ref.of(body).key] = "created"
    owners, role_notes = _owners(ns, live=live, out=out)
    quota = _quota(ns, live=live, extended=extended, out=out)
    used |= set(quota)
    spec: dict[str, Any] = {
        "clusters": {"names": [cluster]},
        "namespaces": [ns],
        "owners": owners or [{"kind": "Group", "name": PLACEHOLDER_OWNER.format(team=ns)}],
        "deviceClasses": sorted(used),
    }
    if quota:
        spec["quota"] = quota
    spec["adoptNamespaces"] = True
    out.handover[Ref("v1", "Namespace", "", ns).key] = "adopted"
    if not owners:
        out.unmapped.append(
            Unmapped(
                f"the owners of namespace {ns}",
                f"no RoleBinding there binds a Role within fleet's team Role ({', '.join(CLAIM_RESOURCES)}: "
                f"{', '.join(CLAIM_VERBS)}); team {ns} names the placeholder Group "
                f"{PLACEHOLDER_OWNER.format(team=ns)}, bound to fleet's team Role: put the real group in "
                f"teams/{ns}/team.yaml and apply",
            )
        )
    body = {"apiVersion": kinds.API_VERSION, "kind": "Team", "metadata": {"name": ns}, "spec": spec}
    comment = f"namespace {ns} of context {context}, which holds ResourceClaimTemplates" + (
        f"; {role_notes}" if role_notes else ""
    )
    out.documents.insert(len(out.documents) - len(objs), Document(f"teams/{ns}/team.yaml", body, comment))


def _classes_named(body: dict[str, Any]) -> set[str]:
    spec = body.get("spec") or {}
    devices = (spec.get("spec") if body["kind"] == "ResourceClaimTemplate" else spec) or {}
    found: set[str] = set()
    for request in (devices.get("devices") or {}).get("requests") or ():
        for exact in [request.get("exactly"), *(request.get("firstAvailable") or ())]:
            if isinstance(exact, dict) and exact.get("deviceClassName"):
                found.add(str(exact["deviceClassName"]))
    return found


def _within_team_role(role: dict[str, Any]) -> bool:
    """Whether every rule of ``role`` grants only what fleet's team Role grants."""
    for rule in role.get("rules") or ():
        if rule.get("resourceNames") or rule.get("nonResourceURLs"):
            return False
        if set(rule.get("apiGroups") or ()) - {"resource.k8s.io"}:
            return False
        if set(rule.get("resources") or ()) - set(CLAIM_RESOURCES):
            return False
        if set(rule.get("verbs") or ()) - set(CLAIM_VERBS):
            return False
    return bool(role.get("rules"))


def _is_team_role(role: dict[str, Any]) -> bool:
    rules = role.get("rules") or []
    if len(rules) != 1:
        return False
    rule = rules[0]
    return (
        list(rule.get("apiGroups") or ()) == ["resource.k8s.io"]
        and list(rule.get("resources") or ()) == list(CLAIM_RESOURCES)
        and list(rule.get("verbs") or ()) == list(CLAIM_VERBS)
        and not rule.get("resourceNames")
    )


def _owners(ns: str, *, live: Live, out: Imported) -> tuple[list[dict[str, str]], str]:
    roles = {str(r["metadata"]["name"]): r for r in live.roles if r["metadata"].get("namespace") == ns}
    owners: list[dict[str, str]] = []
    notes: list[str] = []
    for binding in sorted(
        (b for b in live.role_bindings if b["metadata"].get("namespace") == ns),
        key=lambda b: str(b["metadata"]["name"]),
    ):
        bname = str(binding["metadata"]["name"])
        ref = binding.get("roleRef") or {}
        role = roles.get(str(ref.get("name"))) if ref.get("kind") == "Role" else None
        if role is None or not _within_team_role(role):
            granted = (
                f"ClusterRole {ref.get('name')}" if ref.get("kind") == "ClusterRole" else f"Role {ref.get('name')}"
            )
            out.unmapped.append(
                Unmapped(
                    f"RoleBinding {ns}/{bname}",
                    f"it binds {granted}, which grants more than fleet's team Role ({', '.join(CLAIM_RESOURCES)}: "
                    f"{', '.join(CLAIM_VERBS)}); it stays in the cluster as it is, outside the repository",
                )
            )
            continue
        for subject in binding.get("subjects") or ():
            owner = _owner(subject)
            if owner is not None and owner not in owners:
                owners.append(owner)
        if bname == TEAM_ROLE and ref.get("name") == TEAM_ROLE and _is_team_role(role):
            out.handover[Ref("rbac.authorization.k8s.io/v1", "Role", ns, TEAM_ROLE).key] = "adopted"
            out.handover[Ref("rbac.authorization.k8s.io/v1", "RoleBinding", ns, TEAM_ROLE).key] = "adopted"
        else:
            notes.append(f"owners from RoleBinding {bname}, which stays as it is beside fleet's {TEAM_ROLE}")
    return owners, "; ".join(notes)


def _owner(subject: dict[str, Any]) -> dict[str, str] | None:
    kind = str(subject.get("kind") or "")
    if kind not in ("Group", "User", "ServiceAccount"):
        return None
    owner = {"kind": kind, "name": str(subject.get("name") or "")}
    if kind == "ServiceAccount":
        owner["namespace"] = str(subject.get("namespace") or "")
    return owner


DEVICES_KEY = re.compile(r"^(?P<cls>.+)\.deviceclass\.resource\.k8s\.io/devices$")


def _quota(ns: str, *, live: Live, extended: dict[str, str] | None, out: Imported) -> dict[str, int]:
    found: dict[str, int] = {}
    for q in sorted(
        (q for q in live.quotas if q["metadata"].get("namespace") == ns), key=lambda q: str(q["metadata"]["name"])
    ):
        name = str(q["metadata"]["name"])
        hard = {str(k): str(v) for k, v in ((q.get("spec") or {}).get("hard") or {}).items()}
        quota: dict[str, int] = {}
        for key, value in hard.items():
            m = DEVICES_KEY.match(key)
            if m and value.isdigit():
                quota[m.group("cls")] = int(value)
        fits = (
            bool(quota)
            and quota_keys(quota, extended=extended) == hard
            and not (q.get("spec") or {}).get("scopeSelector")
        )
        if fits and name == QUOTA_NAME:
            found = quota
            out.handover[Ref("v1", "ResourceQuota", ns, name).key] = "adopted"
            continue
        reason = (
            f"fleet names a team's quota {QUOTA_NAME}: rename it, or leave it and add spec.quota to the team"
            if fits
            else "its limits are not fleet's per-device-class shape"
        )
        out.unmapped.append(Unmapped(f"ResourceQuota {ns}/{name}", f"{reason}; it stays in the cluster as it is"))
    return found


__all__ = ["DEFAULT_CHART_REPOSITORY", "Document", "Imported", "Unmapped", "clean", "explicit_gates", "imported"]
