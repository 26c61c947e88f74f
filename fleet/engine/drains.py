"""Draining the nodes a disruptive change touches (``spec.disruption.policy: drain``).

Under ``wait`` a disruptive change waits for the GPU jobs on its nodes to end by themselves.
Under ``drain`` fleet ends them as the GPU Operator's upgrade controller does before a driver
upgrade, but for any disruptive change and driven from git: it cordons a node that holds the
change's allocated claims (``spec.unschedulable``, so nothing new lands there), evicts the pods
holding those claims through the Eviction API (a PodDisruptionBudget that forbids it wins: the
eviction is refused with 429 and fleet says which budget, then tries again on the next run), and
the change goes once no affected claim is left. The node is uncordoned when the run that applied
the change completes, every stage's health gate passed: the change is healthy.

At most ``maxUnavailable`` nodes are *being drained* at once (cordoned by fleet and still holding
affected pods); a node whose pods are gone frees its slot but stays cordoned until the change is
applied, so a change that touches several nodes (a DeviceClass, the operator) drains them in
turn without letting the jobs it evicted come back under the old configuration. A node someone
else cordoned is drained but never uncordoned by fleet.

Each step is one call per run and never blocks: the run that cordons and evicts holds the
change back and says where the drain stands; the controller runs again when a claim is released
(or at its next resync), and ``fleetctl apply`` is run again. Nodes fleet cordoned carry the label
``fleet.gpufleet.dev/drained: "true"`` (found by one list) and the annotation
``fleet.gpufleet.dev/drained-for`` naming the change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.kube import Client, KubeError, NotFound, Ref

DRAINED = "fleet.gpufleet.dev/drained"
"""Label on a node fleet cordoned for a drain (value ``"true"``): the record step finds them by it."""
DRAINED_FOR = "fleet.gpufleet.dev/drained-for"
"""Annotation on such a node: the ``Ref.key`` of the change it was drained for."""
MANAGER = "fleet-drain"
SHOWN = 3


def node_ref(name: str) -> Ref:
    return Ref(api_version="v1", kind="Node", namespace="", name=name)


@dataclass(frozen=True)
class Holder:
    """A pod holding an affected claim, and the node it runs on."""

    claim: str
    namespace: str
    pod: str
    node: str


@dataclass
class Drains:
    """One run's drains: which nodes are being drained, across every change that waits under ``drain``."""

    client: Client
    max_unavailable: int
    draining: set[str] = field(default_factory=set)
    """Nodes cordoned and still holding affected pods: each takes one of ``max_unavailable`` slots."""
    kept: set[str] = field(default_factory=set)
    """``Ref.key`` of the changes still held this run: their nodes stay cordoned."""

    async def advance(self, *, key: str, claims: Sequence[str]) -> str:
        """One step of draining for the change ``key`` whose affected ``claims`` are still allocated:
        cordon what a slot allows, evict what is cordoned; says where the drain stands."""
        self.kept.add(key)
        holders = await holders_of(self.client, claims)
        if not holders:
            return "its claims are allocated but reserved for no pod: nothing to evict; waits for them to be freed"
        by_node: dict[str, list[Holder]] = {}
        for h in holders:
            by_node.setdefault(h.node, []).append(h)
        notes: list[str] = []
        queued: list[str] = []
        for node in sorted(by_node):
            cordoned = await self._cordoned(node)
            if not cordoned:
                if len(self.draining) >= self.max_unavailable:
                    queued.append(node)
                    continue
                await self._cordon(node, key=key)
            self.draining.add(node)
            outcomes = [await evict(self.client, h) for h in by_node[node]]
            notes.append(f"draining node {node}: " + "; ".join(outcomes))
        if queued:
            names = ", ".join(queued[:SHOWN]) + (f" and {len(queued) - SHOWN} more" if len(queued) > SHOWN else "")
            notes.append(
                f"node{'s' if len(queued) > 1 else ''} {names} wait for a drain slot "
                f"(maxUnavailable {self.max_unavailable})"
            )
        return "; ".join(notes)

    async def _cordoned(self, node: str) -> bool:
        """Whether ``node`` is cordoned already (by fleet, for any change, or by someone else)."""
        try:
            live = await self.client.get(node_ref(node))
        except NotFound:
            return True  # gone: nothing to cordon, nothing to take a slot for
        return bool((live.get("spec") or {}).get("unschedulable"))

    async def _cordon(self, node: str, *, key: str) -> None:
        body = {
            "metadata": {"labels": {DRAINED: "true"}, "annotations": {DRAINED_FOR: key}},
            "spec": {"unschedulable": True},
        }
        await self.client.patch(node_ref(node), body, field_manager=MANAGER)


async def holders_of(client: Client, claims: Sequence[str]) -> list[Holder]:
    """The pods reserving each claim (``namespace/name``) and their nodes, from fresh reads."""
    out: list[Holder] = []
    for name in claims:
        namespace, _, claim = name.partition("/")
        try:
            live = await client.get(
                Ref(api_version="resource.k8s.io/v1", kind="ResourceClaim", namespace=namespace, name=claim)
            )
        except NotFound:
            continue
        for consumer in (live.get("status") or {}).get("reservedFor") or ():
            if str(consumer.get("resource") or "pods") != "pods":
                continue
            try:
                pod = await client.get(Ref(api_version="v1", kind="Pod", namespace=namespace, name=consumer["name"]))
            except NotFound:
                continue
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node:
                out.append(Holder(claim=name, namespace=namespace, pod=consumer["name"], node=node))
    return out


async def evict(client: Client, holder: Holder) -> str:
    """Ask the Eviction API to evict ``holder``'s pod; what happened, in words."""
    pod = f"pod {holder.namespace}/{holder.pod}"
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": holder.pod, "namespace": holder.namespace},
    }
    try:
        await client.request(
            "POST",
            f"/api/v1/namespaces/{holder.namespace}/pods/{holder.pod}/eviction",
            verb="create",
            body=body,
            where=f"evict {pod}",
            attempts=1,
        )
    except NotFound:
        return f"{pod} is gone"
    except KubeError as err:
        if err.status == 429:
            return f"{pod} not evicted: {err.what[:300]}; tried again next run"
        return f"{pod} not evicted: {err.what}"
    return f"{pod} evicted, waiting for it to end"


async def uncordon(client: Client, *, keep: set[str]) -> list[str]:
    """Uncordon every node fleet drained for a change that no longer waits (applied, or gone from git);
    the names of the nodes given back."""
    listed = await client.list(await client.kind(api_version="v1", kind="Node"), label_selector=f"{DRAINED}=true")
    done = []
    for node in listed.items:
        meta = node.get("metadata") or {}
        if (meta.get("annotations") or {}).get(DRAINED_FOR) in keep:
            continue
        body: dict[str, Any] = {
            "metadata": {"labels": {DRAINED: None}, "annotations": {DRAINED_FOR: None}},
            "spec": {"unschedulable": None},
        }
        await client.patch(node_ref(str(meta.get("name"))), body, field_manager=MANAGER)
        done.append(str(meta.get("name")))
    return done


__all__ = ["DRAINED", "DRAINED_FOR", "MANAGER", "Drains", "Holder", "evict", "holders_of", "uncordon"]
