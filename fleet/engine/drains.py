"""Draining the nodes a disruptive change touches (``spec.disruption.policy: drain``).

Under ``wait`` a disruptive change waits for the GPU jobs on its nodes to end by themselves.
Under ``drain`` fleet ends them as the GPU Operator's upgrade controller does before a driver
upgrade, but for any disruptive change and driven from git: it cordons a node that holds the
change's allocated claims (``spec.unschedulable``, so nothing new lands there), evicts the pods
holding those claims through the Eviction API (a PodDisruptionBudget that forbids it wins: the
eviction is refused with 429 and fleet says which budget, then tries again on the next run), and
the change goes once no affected claim is left. The node is uncordoned when the run that applied
the change completes, every stage's health gate passed: the change is healthy.

At most ``maxUnavailable`` nodes are *being drained* at once (cordoned and still holding affected
pods); a node whose pods are gone frees its slot but stays cordoned until the change is applied,
so a change that touches several nodes (a DeviceClass, the operator) drains them in turn without
letting the jobs it evicted come back under the old configuration. A node someone else cordoned
is drained but never uncordoned by fleet.

Each step is one call per run and never blocks: the run that cordons and evicts holds the change
back and says where the drain stands; the controller runs again when a claim is released (or at
its next resync), and ``fleetctl apply`` is run again. The claims and the pods holding them come
from the claims the classification read (``status.reservedFor``, the allocation's node), so a step
reads only the nodes it may cordon. The nodes fleet cordoned are kept in the ledger's progress
(``Progress.drained``: node → the change), which is how the record step finds them to uncordon,
whatever the policy is by then; each also carries the annotation ``fleet.gpufleet.dev/drained-for``
naming the change, for people.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.engine.disruptions import claim_nodes, holders, listed
from fleet.kube import Client, KubeError, NotFound, Ref

logger = logging.getLogger(__name__)

DRAINED_FOR = "fleet.gpufleet.dev/drained-for"
"""Annotation on a node fleet cordoned for a drain: the ``Ref.key`` of the change it was drained for."""
MANAGER = "fleet-drain"


def node_ref(name: str) -> Ref:
    return Ref(api_version="v1", kind="Node", namespace="", name=name)


@dataclass
class Drains:
    """One run's drains, across every change that waits under ``drain``."""

    client: Client
    max_unavailable: int
    drained: dict[str, str]
    """Node → the change it was cordoned for: the ledger's ``Progress.drained``, updated in place."""
    draining: set[str] = field(default_factory=set)
    """Nodes cordoned and still holding affected pods: each takes one of ``max_unavailable`` slots."""
    kept: set[str] = field(default_factory=set)
    """``Ref.key`` of the changes still held this run: their nodes stay cordoned."""
    save: Callable[[], Awaitable[None]] | None = None
    """Saves the ledger's progress: called with a node in ``drained`` before it is cordoned, so a run
    killed in between leaves the ledger knowing a node it may have cordoned (giving back one that was
    not cordoned changes nothing)."""
    cordoned: int = 0
    """Nodes this run cordoned."""

    async def advance(self, *, key: str, claims: Sequence[Mapping[str, Any]]) -> str:
        """One step of draining for the change ``key`` whose affected ``claims`` are still allocated:
        cordon what a slot allows, evict what is cordoned; says where the drain stands."""
        self.kept.add(key)
        by_node: dict[str, list[str]] = {}
        for claim in claims:
            namespace = str((claim.get("metadata") or {}).get("namespace", ""))
            for node in claim_nodes(claim):
                by_node.setdefault(node, []).extend(f"{namespace}/{pod}" for pod in holders(claim))
        if not any(by_node.values()):
            return "its claims are allocated but reserved for no pod: nothing to evict; waits for them to be freed"
        notes: list[str] = []
        queued: list[str] = []
        for node, pods in sorted(by_node.items()):
            if not pods:
                continue
            if node not in self.drained and not await self._unschedulable(node):
                if len(self.draining) >= self.max_unavailable:
                    queued.append(node)
                    continue
                await self._cordon(node, key=key)
            self.draining.add(node)
            outcomes = [await evict(self.client, pod) for pod in sorted(set(pods))]
            notes.append(f"draining node {node}: " + "; ".join(outcomes))
        if queued:
            notes.append(
                f"node{'s' if len(queued) > 1 else ''} {listed(queued)} wait for a drain slot "
                f"(maxUnavailable {self.max_unavailable})"
            )
        return "; ".join(notes)

    async def _unschedulable(self, node: str) -> bool:
        """Whether someone else cordoned ``node`` already (a node that is gone counts: nothing to do there)."""
        try:
            live = await self.client.get(node_ref(node))
        except NotFound:
            return True
        return bool((live.get("spec") or {}).get("unschedulable"))

    async def _cordon(self, node: str, *, key: str) -> None:
        self.drained[node] = key
        if self.save is not None:
            await self.save()
        body = {"metadata": {"annotations": {DRAINED_FOR: key}}, "spec": {"unschedulable": True}}
        await self.client.patch(node_ref(node), body, field_manager=MANAGER)
        self.cordoned += 1


async def evict(client: Client, pod: str) -> str:
    """Ask the Eviction API to evict ``pod`` (``namespace/name``); what happened, in words."""
    namespace, _, name = pod.partition("/")
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    try:
        await client.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            verb="create",
            body=body,
            where=f"evict pod {pod}",
            attempts=1,  # a 429 here is a PodDisruptionBudget's answer, not throttling to retry
        )
    except NotFound:
        return f"pod {pod} is gone"
    except KubeError as err:
        refused = f"{err.what[:300]}; tried again next run" if err.status == 429 else err.what
        return f"pod {pod} not evicted: {refused}"
    return f"pod {pod} evicted, waiting for it to end"


async def uncordon(client: Client, *, drained: Mapping[str, str], keep: set[str]) -> dict[str, str]:
    """Uncordon every node fleet drained for a change that no longer waits (applied, or gone from git);
    the nodes still drained (for changes in ``keep``)."""
    left = {}
    for node, key in drained.items():
        if key in keep:
            left[node] = key
            continue
        body: dict[str, Any] = {"metadata": {"annotations": {DRAINED_FOR: None}}, "spec": {"unschedulable": None}}
        try:
            await client.patch(node_ref(node), body, field_manager=MANAGER)
        except NotFound:
            continue  # the node is gone: nothing to give back
        except KubeError as err:
            logger.warning("node %s stays cordoned until the next run: %s", node, err.what)
            left[node] = key
    return left


__all__ = ["DRAINED_FOR", "MANAGER", "Drains", "evict", "uncordon"]
