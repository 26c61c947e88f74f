"""Which changes of a revision disrupt GPU work, and why: the classification change management reads.

Every entry of a ChangeSet is either safe (``Change.disruption is None``) or disruptive, with a
``Disruption``: a reason a person can act on, the nodes it touches and the allocated claims it
affects. A gate (maintenance windows, waiting for jobs to end) holds back the disruptive part of a
revision; everything else is applied at once. Disruptive are:

- a GPUNodePool's Node write that adds a ``NoExecute`` taint the pods holding allocated claims on
  that node do not tolerate (they are evicted), or removes or changes a label their nodeSelector or
  required node affinity reads (their claims stay allocated on a node the pods no longer match: a
  recreated pod cannot run where its devices are);
- a DeviceClass whose new selectors the devices of its allocated claims no longer satisfy
  (evaluated with fleet's CEL against the devices of the live ResourceSlices, as the scheduler
  would), or whose ``config`` changes while claims allocated from it exist (their devices were
  prepared with the old config);
- the removal of a DeviceClass that allocated claims come from, or of a ResourceClaimTemplate that
  pods still running name (their claims were generated from it);
- the GPU Operator release, when its new render restarts the driver, the device plugin or the DRA
  kubelet plugin (``fleet.engine.operators.restarts``).

Everything else (team templates created or changed, quotas, RBAC, namespaces) is safe.

The judging functions are pure: plain dicts in, a ``Disruption`` or None out, so they are tested
without a cluster. Each kind first asks a pure pre-check of the change alone (a taint added, a label
changed, selectors or config changed); only a change that passes it reads the cluster, through
``Reads``: ResourceClaims and ResourceSlices from the controller's watch cache (``reader``) or the
run's listing where there is one, else listed once; Pods only on the nodes or in the namespaces in
question. A revision of team templates costs no read at all.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fleet.kube import Client, Kind, Ref
from fleet.kube.kinds import builtin

if TYPE_CHECKING:
    from fleet.cel import References
    from fleet.engine.listings import LiveIndex, Reader

Obj = Mapping[str, Any]
DeviceKey = tuple[str, str, str]
SHOWN = 3
"""How many claims, pods or fields a reason names before it says how many more."""


@dataclass(frozen=True)
class Disruption:
    """Why a change disrupts GPU work: ``reason`` follows the object's name in a sentence; ``nodes``
    the nodes it touches (empty: none in particular, or unknown); ``claims`` the allocated claims
    (``namespace/name``) it affects."""

    reason: str
    nodes: frozenset[str] = frozenset()
    claims: tuple[str, ...] = ()
    pending: str = ""
    """What the change must see first, whatever the window and the jobs (a maintenance's step to
    ``NoSchedule``: the API server's eviction preview in the rule's status)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason, "nodes": sorted(self.nodes), "claims": list(self.claims)}
        if self.pending:
            out["pending"] = self.pending
        return out


def listed(names: Sequence[str], *, shown: int = SHOWN) -> str:
    """``a, b, c and 4 more``."""
    head = ", ".join(names[:shown])
    return f"{head} and {len(names) - shown} more" if len(names) > shown else head


# -- claims, as the API returns them -----------------------------------------------------------


def claim_name(claim: Obj) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def allocation(claim: Obj) -> Obj:
    return (claim.get("status") or {}).get("allocation") or {}


def claim_nodes(claim: Obj) -> frozenset[str]:
    """The node an allocated claim is bound to: its allocation's ``metadata.name`` field selector
    (how the scheduler pins node-local devices), empty for devices of no one node."""
    terms = (allocation(claim).get("nodeSelector") or {}).get("nodeSelectorTerms") or ()
    return frozenset(
        str(v)
        for term in terms
        for f in term.get("matchFields") or ()
        if f.get("key") == "metadata.name" and f.get("operator") == "In"
        for v in f.get("values") or ()
    )


def request_classes(claim: Obj) -> dict[str, str]:
    """Request name (``req``, and ``req/sub`` for each ``firstAvailable`` entry) → its DeviceClass."""
    out: dict[str, str] = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        name = str(request.get("name", ""))
        exactly = request.get("exactly") or {}
        if exactly.get("deviceClassName"):
            out[name] = str(exactly["deviceClassName"])
        for sub in request.get("firstAvailable") or ():
            out[f"{name}/{sub.get('name', '')}"] = str(sub.get("deviceClassName", ""))
    return out


def held_from(claim: Obj, device_class: str) -> list[DeviceKey]:
    """The devices an allocated claim holds through requests of ``device_class``."""
    classes = request_classes(claim)
    return [
        (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
        for r in (allocation(claim).get("devices") or {}).get("results") or ()
        if classes.get(str(r.get("request", ""))) == device_class
    ]


def holders(claim: Obj) -> list[str]:
    """The pods a claim is reserved for (``status.reservedFor``)."""
    reserved = (claim.get("status") or {}).get("reservedFor") or ()
    return [str(r.get("name", "")) for r in reserved if r.get("resource") == "pods"]


def _from_class(claims: Iterable[Obj], device_class: str) -> list[tuple[Obj, list[DeviceKey]]]:
    out = []
    for claim in claims:
        if allocation(claim):
            held = held_from(claim, device_class)
            if held:
                out.append((claim, held))
    return sorted(out, key=lambda pair: claim_name(pair[0]))


# -- DeviceClasses -------------------------------------------------------------------------------


def _spec(obj: Obj | None) -> Obj:
    return (obj or {}).get("spec") or {}


def class_changes(before: Obj | None, after: Obj | None) -> tuple[bool, bool]:
    """(selectors changed, config changed) between two DeviceClasses: the pure pre-check."""
    old, new = _spec(before), _spec(after)
    return (old.get("selectors") or []) != (new.get("selectors") or []), (old.get("config") or []) != (
        new.get("config") or []
    )


def class_disruption(
    *, before: Obj | None, after: Obj, claims: Iterable[Obj], slices: Iterable[Obj]
) -> Disruption | None:
    """A DeviceClass change against the live allocations: disruptive when a claim allocated from the
    class holds a device the new selectors do not select, or when the config of a class with
    allocated claims changes."""
    selectors, config = class_changes(before, after)
    if not (selectors or config):
        return None
    name = str((after.get("metadata") or {}).get("name", ""))
    allocated = _from_class(claims, name)
    if not allocated:
        return None
    if config:
        names = [claim_name(c) for c, _ in allocated]
        return Disruption(
            reason=f"changes the config of a class {len(names)} allocated claim(s) use ({listed(names)}): "
            "their devices were prepared with the old config",
            nodes=frozenset().union(*(claim_nodes(c) for c, _ in allocated)),
            claims=tuple(names),
        )
    outside = unselected(after, devices={key for _, held in allocated for key in held}, slices=slices)
    lost = [(c, [k for k in held if k in outside]) for c, held in allocated]
    lost = [(c, keys) for c, keys in lost if keys]
    if not lost:
        return None
    names = [claim_name(c) for c, _ in lost]
    shown = [f"{claim_name(c)} ({', '.join(f'{pool}/{device}' for _, pool, device in keys[:2])})" for c, keys in lost]
    return Disruption(
        reason=f"tightens the selectors: {len(names)} allocated claim(s) hold devices the class no longer "
        f"selects: {listed(shown)}",
        nodes=frozenset().union(*(claim_nodes(c) for c, _ in lost)),
        claims=tuple(names),
    )


def unselected(device_class: Obj, *, devices: set[DeviceKey], slices: Iterable[Obj]) -> set[DeviceKey]:
    """Which of ``devices`` the class's selectors reject (or fail on, as the scheduler would), judged on
    the published devices; a device no slice publishes any more is not judged.

    A selector sees only what its references read (``fleet.cel.references``), so the held devices
    are reduced to those parts first and the selectors run once per distinct shape: 4,000 GPUs of
    three models are three evaluations, not 4,000 conversions of every attribute."""
    from fleet import cel  # the CEL machinery, loaded by the first class change only
    from fleet.inventory import Inventory
    from fleet.inventory.matches import Matcher
    from fleet.inventory.requests import Alternative

    pools = {(driver, pool) for driver, pool, _ in devices}
    raw: dict[DeviceKey, Obj] = {}
    for item in slices:
        spec = _spec(item)
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        if (driver, pool) in pools:
            for device in spec.get("devices") or ():
                key = (driver, pool, str(device.get("name", "")))
                if key in devices:
                    raw[key] = device
    name = str((device_class.get("metadata") or {}).get("name", ""))
    try:
        references = cel.References()
        for selector in _spec(device_class).get("selectors") or ():
            expression = str(((selector or {}).get("cel") or {}).get("expression", ""))
            references = references.merged(cel.compile_selector(expression).references)
    except cel.SelectorCompileError:
        return set(raw)  # a class whose selectors do not compile selects nothing
    names = sorted({(u.kind, u.domain, u.name) for u in references.names})
    shape_of = {key: _shape(key[0], device, references, names) for key, device in raw.items()}
    shapes: dict[tuple[object, ...], tuple[str, Obj]] = {}
    for key, shape in shape_of.items():
        shapes.setdefault(shape, (key[0], raw[key]))
    drivers = sorted({driver for driver, _ in shapes.values()})
    synthetic = [
        {
            "spec": {
                "driver": driver,
                "nodeName": "shapes",
                "pool": {"name": "shapes", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {**{k: v for k, v in device.items() if k != "consumesCounters"}, "name": f"s{i}"}
                    for i, (d, device) in enumerate(shapes.values())
                    if d == driver
                ],
            }
        }
        for driver in drivers
    ]
    inventory = Inventory.from_slices(synthetic)
    match = Matcher(inventory=inventory, classes={name: device_class}).match(
        Alternative(
            request="check",
            name="check",
            request_index=0,
            subrequest_index=None,
            device_class=name,
            selectors=(),
            all_devices=False,
            count=1,
        )
    )
    if match.grouping is None:
        return set(raw)
    selected_names = {
        inventory.devices[i].name
        for g in match.matching_groups | match.tainted_groups
        for i in match.grouping.indices[g]
    }
    selected = {shape for i, shape in enumerate(shapes) if f"s{i}" in selected_names}
    return {key for key, shape in shape_of.items() if shape not in selected}


def _shape(
    driver: str, device: Obj, references: References, names: Sequence[tuple[str, str, str]]
) -> tuple[object, ...]:
    """What of ``device`` the selectors can observe, hashable (the whole device when they may read it
    all); ``names`` are the references' (kind, domain, name), sorted."""
    if references.whole_device or references.whole_kinds or references.whole_domains:
        return (driver, json.dumps({k: v for k, v in device.items() if k != "name"}, sort_keys=True, default=str))
    parts: list[object] = [driver, device.get("allowMultipleAllocations")]
    for kind, domain, attribute in names:
        values = device.get(kind) or {}
        local = values.get(attribute) if domain == driver else None
        parts.append((_frozen(local), _frozen(values.get(f"{domain}/{attribute}"))))
    return tuple(parts)


def _frozen(value: object) -> object:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def class_removal(name: str, *, claims: Iterable[Obj]) -> Disruption | None:
    allocated = _from_class(claims, name)
    if not allocated:
        return None
    names = [claim_name(c) for c, _ in allocated]
    return Disruption(
        reason=f"removes a class {len(names)} allocated claim(s) come from ({listed(names)})",
        nodes=frozenset().union(*(claim_nodes(c) for c, _ in allocated)),
        claims=tuple(names),
    )


# -- ResourceClaimTemplates ----------------------------------------------------------------------


def running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


def template_removal(namespace: str, name: str, *, pods: Iterable[Obj]) -> Disruption | None:
    """Removing a template that pods not yet ended name in ``spec.resourceClaims``: their claims were
    generated from it, and a pod recreated in their place finds no template."""
    users = [
        p
        for p in pods
        if running(p)
        and (p.get("metadata") or {}).get("namespace") == namespace
        and any(r.get("resourceClaimTemplateName") == name for r in _spec(p).get("resourceClaims") or ())
    ]
    if not users:
        return None
    users.sort(key=lambda p: str(p["metadata"].get("name", "")))
    pod_names = [f"{namespace}/{p['metadata'].get('name', '')}" for p in users]
    claims = []
    for p in users:
        entries = _spec(p).get("resourceClaims") or ()
        refs = {r.get("name") for r in entries if r.get("resourceClaimTemplateName") == name}
        claims += [
            f"{namespace}/{s['resourceClaimName']}"
            for s in (p.get("status") or {}).get("resourceClaimStatuses") or ()
            if s.get("name") in refs and s.get("resourceClaimName")
        ]
    nodes = frozenset(str(_spec(p)["nodeName"]) for p in users if _spec(p).get("nodeName"))
    return Disruption(
        reason=f"removes a template {len(users)} running pod(s) use ({listed(pod_names)}): "
        "a pod recreated in their place cannot get its claim",
        nodes=nodes,
        claims=tuple(sorted(claims)),
    )


# -- pool Nodes: taints and labels ---------------------------------------------------------------


def _labels(node: Obj | None) -> dict[str, str]:
    return dict(((node or {}).get("metadata") or {}).get("labels") or {})


def _taint_key(taint: Obj) -> tuple[str, str, str]:
    return (str(taint.get("key", "")), str(taint.get("value", "")), str(taint.get("effect", "")))


@dataclass(frozen=True)
class NodeEffects:
    """What a Node write could disrupt: ``NoExecute`` taints it adds, labels it removes or changes."""

    evicting: tuple[Mapping[str, Any], ...] = ()
    labels: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.evicting or self.labels)


def node_effects(before: Obj | None, after: Obj | None) -> NodeEffects:
    """The pure pre-check of a Node write (``before``/``after`` as the diff has them)."""
    if before is None or after is None:
        return NodeEffects()
    old = {_taint_key(t) for t in _spec(before).get("taints") or ()}
    added = tuple(
        t for t in _spec(after).get("taints") or () if t.get("effect") == "NoExecute" and _taint_key(t) not in old
    )
    was, now = _labels(before), _labels(after)
    changed = tuple(sorted(k for k, v in was.items() if now.get(k) != v))
    return NodeEffects(evicting=added, labels=changed)


def node_disruption(*, before: Obj, after: Obj, pods: Iterable[Obj], claims: Iterable[Obj]) -> Disruption | None:
    """A pool's write of one Node against the pods on it that hold allocated claims."""
    from fleet.inventory import pendings

    effects = node_effects(before, after)
    if not effects:
        return None
    node = str((after.get("metadata") or {}).get("name", ""))
    held: dict[tuple[str, str], list[str]] = {}
    for claim in claims:
        if allocation(claim) and (not claim_nodes(claim) or node in claim_nodes(claim)):
            namespace = str((claim.get("metadata") or {}).get("namespace", ""))
            for holder in holders(claim):
                held.setdefault((namespace, holder), []).append(claim_name(claim))
    evicted: list[tuple[str, list[str], str]] = []
    stranded: list[tuple[str, list[str], str]] = []
    tainted = {"metadata": {"labels": _labels(after)}, "spec": {"taints": list(effects.evicting)}}
    old_labels = {"metadata": {"labels": _labels(before)}}
    new_labels = {"metadata": {"labels": _labels(after)}}
    for pod in sorted(pods, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"].get("name", ""))):
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if key not in held or not running(pod) or _spec(pod).get("nodeName") not in (node, None):
            continue
        name = "/".join(key)
        why = pendings.node_excluded(pod, tainted) if effects.evicting else ""
        if why:
            evicted.append((name, held[key], why))
        elif effects.labels and not pendings.node_excluded(pod, old_labels):
            why = pendings.node_excluded(pod, new_labels)
            if why:
                stranded.append((name, held[key], why))
    if not (evicted or stranded):
        return None
    parts = []
    if evicted:
        taints = ", ".join(_taint_text(t) for t in effects.evicting)
        parts.append(
            f"adds taint {taints}, which evicts {len(evicted)} pod(s) holding allocated claims "
            f"({listed([f'{p}: {why}' for p, _, why in evicted])})"
        )
    if stranded:
        pods_text = listed([f"{p}: {why}" for p, _, why in stranded])
        parts.append(
            f"changes label(s) {', '.join(effects.labels)}, which strands the allocated claims of "
            f"{len(stranded)} pod(s) that no longer match the node ({pods_text})"
        )
    claims_hit = sorted({c for _, names, _ in evicted + stranded for c in names})
    return Disruption(reason="; ".join(parts), nodes=frozenset({node}), claims=tuple(claims_hit))


def _taint_text(taint: Obj) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


# -- reading the cluster, lazily -----------------------------------------------------------------

CLAIM = ("resource.k8s.io/v1", "ResourceClaim")
SLICE = ("resource.k8s.io/v1", "ResourceSlice")
POD = ("v1", "Pod")
MANY_NODES = 16
"""Above this many nodes to look at, Pods are listed once for the cluster rather than once per node."""


@dataclass
class Reads:
    """The live objects classification may need, each read at most once, and only when asked.

    ResourceClaims and ResourceSlices come from ``reader`` (the controller's watch cache) when there
    is one, else from ``live`` when the run's listing holds every object of the kind (``complete``),
    else from one list. Pods are listed by node or namespace, never kept between runs."""

    client: Client | None = None
    reader: Reader | None = None
    live: LiveIndex | None = None
    complete: frozenset[tuple[str, str]] = frozenset()
    preloaded: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    """Objects already at hand, by (apiVersion, kind): what a benchmark or a test passes in."""

    async def objects(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        found = self.preloaded.get(key)
        if found is None:
            found = self.preloaded[key] = await self._read(key)
        return found

    async def _read(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        kind = _kind(key)
        if self.reader is not None:
            return list((await self.reader.list(kind)).items)
        if self.live is not None and key in self.complete:
            prefix = f"{kind.group}/{kind.kind}/"
            return [o for k, o in self.live.items() if k.startswith(prefix)]
        if self.client is None:
            return []
        return list((await self.client.list(kind)).items)

    async def pods(self, *, nodes: Iterable[str] = (), namespaces: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Pods on ``nodes`` or in ``namespaces`` (preloaded ones filtered the same way)."""
        wanted_nodes, wanted_ns = set(nodes), set(namespaces)
        if POD in self.preloaded or self.client is None:
            return [
                p
                for p in self.preloaded.get(POD, [])
                if _spec(p).get("nodeName") in wanted_nodes or (p.get("metadata") or {}).get("namespace") in wanted_ns
            ]
        kind = _kind(POD)
        out: list[dict[str, Any]] = []
        if len(wanted_nodes) > MANY_NODES:
            everything = (await self.client.list(kind)).items
            out += [p for p in everything if _spec(p).get("nodeName") in wanted_nodes]
        else:
            for node in sorted(wanted_nodes):
                out += (await self.client.list(kind, field_selector=f"spec.nodeName={node}")).items
        for namespace in sorted(wanted_ns):
            out += (await self.client.list(kind, namespace=namespace)).items
        return out


def _kind(key: tuple[str, str]) -> Kind:
    return builtin()[key]


class Entry(Protocol):
    """What ``classify`` reads of a ChangeSet entry (``fleet.engine.changesets.Change``, a dataclass whose
    ``disruption`` it sets on a copy)."""

    @property
    def disruption(self) -> Disruption | None: ...

    @property
    def ref(self) -> Ref: ...
    @property
    def action(self) -> str: ...
    @property
    def before(self) -> dict[str, Any] | None: ...
    @property
    def after(self) -> dict[str, Any] | None: ...
    @property
    def release(self) -> bool: ...
    @property
    def failed(self) -> bool: ...


E = TypeVar("E", bound=Entry)


async def classify(changes: Iterable[E], *, reads: Reads) -> list[E]:
    """``changes``, each that disrupts GPU work with its ``disruption`` (a new entry; the others as given).

    Entries that are not written (unchanged, skipped, failed) are not classed. The operator
    release's entry is classed by the operator stage itself (``fleet.engine.operators.restarts``)."""
    out = list(changes)
    found: dict[int, Disruption | None] = {}
    nodes: list[int] = []
    for i, change in enumerate(out):
        if change.failed or change.action not in ("created", "configured", "deleted"):
            continue
        kind, deleted = change.ref.kind, change.action == "deleted"
        if kind == "Node" and not deleted and node_effects(change.before, change.after):
            nodes.append(i)
        elif kind == "DeviceClass" and deleted and not change.release:
            found[i] = class_removal(change.ref.name, claims=await reads.objects(CLAIM))
        elif kind == "DeviceClass" and change.action == "configured" and change.after is not None:
            if any(class_changes(change.before, change.after)):
                found[i] = class_disruption(
                    before=change.before,
                    after=change.after,
                    claims=await reads.objects(CLAIM),
                    slices=await reads.objects(SLICE),
                )
        elif kind == "ResourceClaimTemplate" and deleted and not change.release:
            pods = await reads.pods(namespaces=[change.ref.namespace])
            found[i] = template_removal(change.ref.namespace, change.ref.name, pods=pods)
    if nodes:
        claims = await reads.objects(CLAIM)
        bound = {n for c in claims if allocation(c) for n in claim_nodes(c)}
        nodes = [i for i in nodes if out[i].ref.name in bound]
        pods = await reads.pods(nodes=[out[i].ref.name for i in nodes]) if nodes else []
        for i in nodes:
            change = out[i]
            assert change.before is not None and change.after is not None
            here = [p for p in pods if _spec(p).get("nodeName") == change.ref.name]
            found[i] = node_disruption(before=change.before, after=change.after, pods=here, claims=claims)
    for i, disruption in found.items():
        if disruption is not None:
            out[i] = dataclasses.replace(out[i], disruption=disruption)  # type: ignore[type-var]
    return out


__all__ = [
    "CLAIM",
    "Disruption",
    "Entry",
    "NodeEffects",
    "Reads",
    "allocation",
    "claim_name",
    "claim_nodes",
    "class_changes",
    "class_disruption",
    "class_removal",
    "classify",
    "held_from",
    "holders",
    "listed",
    "node_disruption",
    "node_effects",
    "request_classes",
    "template_removal",
    "unselected",
]
