"""Why a pod with ResourceClaims is Pending: the DRA guide's troubleshooting list, walked in order.

The guide's "Troubleshoot a pending GPU pod" asks an operator to describe the pod, read
the claim, check the DeviceClass, read the ResourceSlices, the GPU Operator's pods and
the scheduler's events. ``explain`` does the same over plain data (pods, claims,
classes, slices, nodes, events as the API returns them) and names the first cause that
applies, with its evidence:

0. ``device-unhealthy`` (a pod past scheduling): the kubelet reports a device it holds
   ``Unhealthy``, the driver taints it, or the claim's ``status.devices`` has a condition
   that is not ``True`` (:mod:`fleet.inventory.statuses`); else ``scheduled``;
1. ``deviceclass-missing``: a request names a DeviceClass that does not exist;
2. ``no-matching-device``: no published device passes the class and request selectors
   (per selector clause, how many devices pass, and the closest values published);
   — or ``device-tainted`` when the devices that match carry a NoSchedule/NoExecute taint
   (the driver's health checks: ``gpu.nvidia.com/xid``, ``gpu-lost``) the request does not
   tolerate, naming the taint;
3. ``all-allocated``: matching devices exist but other claims hold every one (named), or
   allocated partitions consume the counters a dynamic-MIG placement needs (named);
4. ``no-resourceslices``: the nodes the pod may run on are GPU nodes without
   ResourceSlices (the kubelet plugin is absent or unhealthy there);
5. ``node-constraints``: nodeSelector, required node affinity or untolerated taints
   exclude every node whose devices would fit (per node, why);
6. ``scheduler``: none of the above: the scheduler's own events say why.

Pure: no I/O; ``fleetctl explain`` reads the objects and prints the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from fleet.inventory import holdings, statuses
from fleet.inventory.claims import Checker
from fleet.inventory.inventories import Inventory
from fleet.inventory.matches import Matcher
from fleet.inventory.requests import read_claim

GPU_NODE_LABELS = ("feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present")

Obj = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Cause:
    rule: str
    summary: str
    evidence: tuple[str, ...] = ()
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"cause": self.rule, "summary": self.summary, "evidence": list(self.evidence), "hint": self.hint}


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def allocated_devices(claims: Sequence[Obj], *, skip: Collection[str] = ()) -> dict[str, str]:
    """Device id (``driver/pool/device``) → ``namespace/claim`` holding it (claims named in ``skip`` excluded)."""
    out: dict[str, str] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if key in skip:
            continue
        alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        for r in alloc.get("results") or ():
            out[f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"] = key
    return out


def holders(claims: Sequence[Obj]) -> dict[str, list[str]]:
    """``namespace/claim`` → the pods it is reserved for."""
    out: dict[str, list[str]] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        pods = [str(r.get("name")) for r in (claim.get("status") or {}).get("reservedFor") or ()]
        out[f"{meta.get('namespace')}/{meta.get('name')}"] = sorted(pods)
    return out


@dataclasses.dataclass(frozen=True)
class Held:
    """One allocated device and who holds it: the claim, the pods it is reserved for, their team."""

    device: str
    """``driver/pool/device``."""
    node: str
    uuid: str
    model: str
    claim: str
    pods: tuple[str, ...]
    team: str

    def text(self) -> str:
        pods = ", ".join(self.pods) or "no pod yet"
        return (
            f"{self.claim} holds {self.device} on {self.node} ({self.model}, uuid {self.uuid or 'not published'}), "
            f"reserved for {pods}, team {self.team or 'unknown'}"
        )


def held_devices(claims: Sequence[Obj], slices: Sequence[Obj], *, teams: Mapping[str, str]) -> list[Held]:
    """Every device the claims hold, named as the slices publish it; ``teams``: namespace → team."""
    published: dict[str, tuple[str, Obj]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name")
        for device in spec.get("devices") or ():
            published[f"{spec.get('driver')}/{pool}/{device.get('name')}"] = (str(spec.get("nodeName") or pool), device)
    users = holders(claims)
    out = []
    for device_id, claim in sorted(allocated_devices(claims).items()):
        node, device = published.get(device_id, ("?", {}))
        attributes = device.get("attributes") or {}
        model = str((attributes.get("productName") or {}).get("string", "(not published)"))
        profile = (attributes.get("profile") or {}).get("string")
        out.append(
            Held(
                device=device_id,
                node=node,
                uuid=str((attributes.get("uuid") or {}).get("string", "")),
                model=f"{model} MIG {profile}" if profile else model,
                claim=claim,
                pods=tuple(users.get(claim, ())),
                team=teams.get(claim.partition("/")[0], ""),
            )
        )
    return out


def _sharing(
    inventory: Inventory, held: Sequence[holdings.Holding], counter_sets: set[tuple[str, str, str]]
) -> dict[str, tuple[set[str], set[str]]]:
    """Claims whose devices consume counters from ``counter_sets``: claim → (devices, counter sets)."""
    if not counter_sets:
        return {}
    by_key = {(d.driver, d.pool, d.name): d for d in inventory.devices}
    out: dict[str, tuple[set[str], set[str]]] = {}
    for holding in held:
        for key in holding.devices:
            item = by_key.get(key)
            if item is None:
                continue
            sets = {name for name, _ in item.consumes if (item.driver, item.pool, name) in counter_sets}
            if sets:
                entry = out.setdefault(holding.claim, (set(), set()))
                entry[0].add(f"{item.pool}/{item.name}")
                entry[1].update(sets)
    return out


def _tolerated(taint: Obj, tolerations: Sequence[Obj]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and str(t.get("value", "")) == str(taint.get("value", "")):
            return True
    return False


def _affinity_terms(pod: Obj) -> list[list[Obj]]:
    node_affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return [list(t.get("matchExpressions") or ()) for t in required.get("nodeSelectorTerms") or ()]


def _expression_holds(expr: Obj, labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), list(expr.get("values") or ())
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return True


def node_excluded(pod: Obj, node: Obj) -> str:
    """Why the pod's own constraints keep it off ``node`` ("" when they do not)."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} (node has {labels.get(key, 'no such label')!s})"
    terms = _affinity_terms(pod)
    if terms and not any(all(_expression_holds(e, labels) for e in term) for term in terms):
        return "required node affinity does not match"
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, spec.get("tolerations") or ()):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key')}{value}:{taint.get('effect')} not tolerated"
    return ""


def scheduled(pod: Obj, *, claims: Sequence[Obj], slices: Sequence[Obj], teams: Mapping[str, str]) -> Cause:
    """A pod past scheduling: ``scheduled``, or ``device-unhealthy`` when a device it holds is reported sick:
    ``Unhealthy`` in the pod's ``allocatedResourcesStatus`` (the kubelet), a NoSchedule/NoExecute taint
    in its driver's domain on it (the driver's health checks: ``gpu.nvidia.com/xid``, ``gpu-lost``), or
    a condition of its claim's ``status.devices`` that is not ``True`` (the driver). Other taints (a
    DeviceTaintRule's, a maintenance's) are evidence of ``scheduled``, not a sickness."""
    held = held_devices(claims, slices, teams=teams)
    reports = statuses.device_statuses(claims)
    health = statuses.pod_health(pod, claims)
    taints = {t.device: t for t in statuses.published_taints(slices)}
    unhealthy = [h.device or h.resource for h in health if h.health == "Unhealthy"]
    tainted = [(h.device, taints[h.device]) for h in held if h.device in taints]
    said = [f"{device} carries taint {', '.join(t.driver)}" for device, t in tainted if t.driver]
    sick = [device for device, t in tainted if t.driver]
    others = [f"{device} carries taint {', '.join(t.others)}" for device, t in tainted if t.others]
    for h in held:
        report = reports.get(h.device)
        if report is not None and report.troubled:
            said.append(f"{h.device} ({report.claim}) reports {', '.join(report.texts())}")
            sick.append(h.device)
    lines = [h.text() for h in health if h.health != statuses.HEALTHY]
    if unhealthy or sick:
        whom = "the kubelet reports" if unhealthy else "its driver reports"
        sick = unhealthy + sick
        return Cause(
            "device-unhealthy",
            f"pod runs on {pod['spec']['nodeName']}, but {whom} a device it holds unhealthy: {sick[0]}",
            (*lines, *said, *(h.text() for h in held), *others),
            "the GPU failed after it was allocated (an XID error, a lost GPU) and the pod keeps it until it ends: "
            "delete the pod to get another device, and take the GPU out of service (fix or replace it); "
            "kubectl get resourceslice -o yaml shows the driver's taints",
        )
    conditions = [f"{r.device} ({r.claim}) reports {', '.join(r.texts())}" for r in reports.values() if r.texts()]
    return Cause(
        "scheduled",
        f"pod is scheduled on {pod['spec']['nodeName']}; it is not waiting for a device",
        (*(h.text() for h in held), *lines, *conditions, *others),
        hint="if the container sees no GPU, read the kubelet plugin's logs and the CDI configuration",
    )


def explain(
    *,
    pod: Obj | None,
    claims: Sequence[Obj],
    all_claims: Sequence[Obj],
    classes: Mapping[str, Obj],
    slices: Sequence[Obj],
    nodes: Sequence[Obj],
    events: Sequence[Obj] = (),
    teams: Mapping[str, str] | None = None,
) -> Cause:
    """The first of the guide's causes that applies to ``pod`` (or a claim alone when ``pod`` is None).

    ``teams`` (namespace → team) names the team holding an allocated device."""
    if pod is not None and (pod.get("spec") or {}).get("nodeName"):
        return scheduled(pod, claims=claims, slices=slices, teams=teams or {})
    pending = [c for c in claims if not ((c.get("status") or {}).get("allocation"))]
    if not pending and claims and pod is None:
        return Cause(
            "allocated",
            "the claim is allocated",
            tuple(h.text() for h in held_devices(claims, slices, teams=teams or {})),
        )
    # 1. The DeviceClass exists
    for claim in pending:
        shape, _ = read_claim(claim.get("spec") or {})
        for alternatives in shape.requests:
            for alt in alternatives:
                if alt.device_class and alt.device_class not in classes:
                    return Cause(
                        "deviceclass-missing",
                        f"claim {_name(claim)} request {alt.name!r} asks for DeviceClass {alt.device_class!r}, "
                        "which does not exist",
                        (f"DeviceClasses in the cluster: {', '.join(sorted(classes)) or 'none'}",),
                        "fix deviceClassName, or install the driver that provides the class (the GPU Operator "
                        "installs gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com)",
                    )
    inventory = Inventory.from_slices(slices)
    # 2. Some published device matches
    for claim in pending:
        report = Checker(inventory=inventory, classes=classes).check_claim(claim.get("spec") or {})
        if not report.satisfiable:
            lines = tuple(f"{f.message}" + (f" ({f.hint})" if f.hint else "") for f in report.findings)
            if any("are tainted" in f.message for f in report.findings):
                return Cause(
                    "device-tainted",
                    f"the devices that would satisfy claim {_name(claim)} are tainted and its requests do not "
                    "tolerate the taint",
                    lines,
                    "a tainted GPU had an XID error or was lost (gpu.nvidia.com/xid, gpu.nvidia.com/gpu-lost); "
                    "fix or replace it, or add a device toleration to the request if the workload may use it",
                )
            passing = [f"request {a.name}: {a.devices} devices match" for req in report.requests for a in req]
            return Cause(
                "no-matching-device",
                f"no published device satisfies claim {_name(claim)}",
                (*lines, *passing, f"{len(inventory.devices)} devices published on {len(inventory.nodes)} nodes"),
                "compare the selectors with what the driver publishes (kubectl get resourceslice -o yaml); "
                "the scheduler never substitutes another model",
            )
    # 3. Not everything matching is taken (devices held whole, counters of partitionable
    # devices consumed, shared capacity used up)
    own = {f"{(c.get('metadata') or {}).get('namespace')}/{_name(c)}" for c in claims}
    taken = allocated_devices(all_claims, skip=own)
    others = [h for h in holdings.holdings(all_claims) if h.claim not in own]
    usage = holdings.usage(inventory, others)
    users = holders(all_claims)
    for claim in pending:
        report = Checker(inventory=inventory, classes=classes, usage=usage).check_claim(claim.get("spec") or {})
        if report.satisfiable:
            continue
        matcher = Matcher(inventory=inventory, classes=classes)
        shape, _ = read_claim(claim.get("spec") or {})
        held: set[str] = set()
        counter_sets: set[tuple[str, str, str]] = set()
        for alternatives in shape.requests:
            for alt in alternatives:
                for i in matcher.match(alt).matching:
                    item = inventory.devices[i]
                    holder = taken.get(item.id)
                    if holder:
                        held.add(holder)
                    counter_sets.update((item.driver, item.pool, name) for name, _ in item.consumes)
        sharing = _sharing(inventory, others, counter_sets)
        evidence = tuple(
            f"{k} holds devices (pods {', '.join(users.get(k, [])) or 'none'})" for k in sorted(held)
        ) + tuple(
            f"{k} holds {', '.join(sorted(devices))}, which consume the same counters ({', '.join(sorted(sets))}) "
            f"(pods {', '.join(users.get(k, [])) or 'none'})"
            for k, (devices, sets) in sorted(sharing.items())
            if k not in held
        )
        return Cause(
            "all-allocated",
            f"every device that could satisfy claim {_name(claim)} is already allocated, or its GPU's counters "
            "are used by allocated partitions"
            if sharing
            else f"every device that could satisfy claim {_name(claim)} is already allocated",
            evidence,
            "wait for those pods to finish, delete idle claims, or add GPU nodes to the pool",
        )
    if pod is None:
        return Cause("schedulable", "a device is free for the claim; it is allocated when a pod using it is scheduled")
    # 4./5. The pod may run on a node with devices
    fits = set()
    for node in nodes:
        name = _name(node)
        node_slices = [s for s in slices if (s.get("spec") or {}).get("nodeName") == name]
        if not node_slices:
            continue
        node_inventory = Inventory.from_slices(node_slices)
        node_usage = holdings.usage(node_inventory, others)
        if all(
            Checker(inventory=node_inventory, classes=classes, usage=node_usage)
            .check_claim(c.get("spec") or {})
            .satisfiable
            for c in pending
        ):
            fits.add(name)
    allowed = [n for n in nodes if not node_excluded(pod, n)]
    if not any(_name(n) in fits for n in allowed):
        published = {(s.get("spec") or {}).get("nodeName") for s in slices}
        bare = sorted(
            _name(n)
            for n in allowed
            if _name(n) not in published
            and any(((n.get("metadata") or {}).get("labels") or {}).get(k) == "true" for k in GPU_NODE_LABELS)
        )
        if bare:
            return Cause(
                "no-resourceslices",
                f"the GPU nodes this pod may run on publish no ResourceSlices: {', '.join(bare[:10])}",
                tuple(f"Node {n}: no ResourceSlice (the DRA kubelet plugin is absent or unhealthy)" for n in bare[:10]),
                "kubectl get pods -n gpu-operator -o wide; kubectl logs -n gpu-operator "
                "daemonset/nvidia-dra-driver-kubelet-plugin --all-containers --tail=200",
            )
        reasons = tuple(f"Node {_name(n)}: {node_excluded(pod, n)}" for n in nodes if _name(n) in fits)
        return Cause(
            "node-constraints",
            "the pod's node selector, affinity or tolerations exclude every node whose devices fit its claims",
            reasons[:20],
            "add the toleration for the GPU nodes' taint (e.g. nvidia.com/gpu: Exists, NoSchedule) or fix the "
            "nodeSelector/affinity",
        )
    # 6. The scheduler's own words
    said = [
        e
        for e in events
        if e.get("reason") in ("FailedScheduling", "FailedResourceClaimCreation")
        or "claim" in str(e.get("message", "")).lower()
    ]
    said = said or list(events)
    return Cause(
        "scheduler",
        "devices are free and nodes fit; the scheduler's events say what else blocks the pod",
        tuple(f"{e.get('reason')}: {e.get('message') or e.get('note')}" for e in said[-5:]) or ("no events yet",),
        "kubectl describe pod; kubectl get events --sort-by=.lastTimestamp",
    )


__all__ = [
    "Cause",
    "Held",
    "allocated_devices",
    "explain",
    "held_devices",
    "holders",
    "node_excluded",
    "scheduled",
]
