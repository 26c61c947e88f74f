"""Draining the nodes a disruptive change touches (``spec.disruption.policy: drain``).

Under ``wait`` a disruptive change waits for the GPU jobs on its nodes to end by themselves.
Under ``drain`` fleet ends them as the GPU Operator's upgrade controller does before a driver
upgrade, but for any disruptive change and driven from git: it cordons a node that holds the
change's allocated claims (``spec.unschedulable``, so nothing new lands there), evicts the pods
holding those claims through the Eviction API (a PodDisruptionBudget that forbids it wins: the
eviction is refused with 429 and fleet says which budget, then tries again on the next run), and
the change goes once no affected claim is left. The node is uncordoned when the run that applied
the change completes, every stage's health gate passed: the change is healthy.

Every change held for its claims under ``drain`` takes the same step (``step``), whichever step of
the run holds it: an object stage's write, the GPU Operator release, the prune's deletion of a
DeviceClass or a ResourceClaimTemplate in use.

At most ``maxUnavailable`` nodes are *being drained* at once (cordoned and still holding affected
pods), across the changes of a run and across runs (``being_drained``): a node fleet cordoned in an
earlier run (the ledger's ``drained``) takes its slot while pods hold claims on it, until the run
looks at the change it was cordoned for and finds none of its pods left there. A node whose pods
are gone frees its slot but stays cordoned until the change is applied, so a change that touches
several nodes (a DeviceClass, the operator) drains them in turn without letting the jobs it
evicted come back under the old configuration. Only cordoning a node takes a free slot (``admit``):
a node already cordoned (by fleet, or by someone else) is drained at once and counts against the
bound while it holds the change's pods. A node someone else cordoned is never uncordoned by fleet.

Cordons, evictions and uncordons are changes like any other: ``Drains.plan`` proposes a held
change's drain step (pure but for reading whether a node is cordoned already), ``entries`` makes
one decided entry per cordon (the Node, verb ``cordon``) and eviction (the Pod, verb ``evict``) in
the held change's stage, and ``uncordons`` one per node given back (verb ``uncordon``, stage
``record``); ``fleetctl diff`` shows them as the apply records them, and only the apply executes
them (``execute``, ``uncordon``), recording each outcome on its entry.

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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from fleet.engine import decisions
from fleet.engine.changesets import Action, Change
from fleet.engine.disruptions import allocation, claim_nodes, holders, listed
from fleet.engine.proposals import decide_entry
from fleet.kube import Client, KubeError, NotFound, Ref

logger = logging.getLogger(__name__)

DRAINED_FOR = "fleet.gpufleet.dev/drained-for"
"""Annotation on a node fleet cordoned for a drain: the ``Ref.key`` of the change it was drained for."""
MANAGER = "fleet-drain"


def node_ref(name: str) -> Ref:
    return Ref(api_version="v1", kind="Node", namespace="", name=name)


def occupied(claims: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes where allocated claims are reserved for pods: where a drain may still have pods to end."""
    return frozenset(n for c in claims if allocation(c) and holders(c) for n in claim_nodes(c))


def being_drained(*, drained: Mapping[str, str], occupied: Set[str], looked: Mapping[str, Set[str]]) -> set[str]:
    """The nodes being drained now, each taking one of ``maxUnavailable`` slots.

    ``looked``: change → the cordoned nodes where its affected pods are, for each change this run
    has looked at; ``drained``: node → change, the nodes fleet cordoned (the ledger, earlier runs
    included). A node drained for a change not looked at yet counts while it is ``occupied``: until
    the run looks at that change, it cannot tell its pods from others, and the bound must hold
    whatever order the run looks at the changes in."""
    out: set[str] = set().union(*looked.values())
    out |= {node for node, key in drained.items() if key not in looked and node in occupied}
    return out


def admit(
    nodes: Sequence[str], *, cordoned: Set[str], busy: Set[str], max_unavailable: int
) -> tuple[list[str], list[str]]:
    """Which of a change's ``nodes`` (each holding its affected pods) are drained now, and which wait
    for a slot. One already ``cordoned`` is drained at once; cordoning another takes a slot, free while
    fewer than ``max_unavailable`` nodes are being drained (``busy``, and those admitted here)."""
    now = [n for n in nodes if n in cordoned]
    queued: list[str] = []
    taken = set(busy) | set(now)
    for node in nodes:
        if node in cordoned:
            continue
        if len(taken) >= max_unavailable:
            queued.append(node)
            continue
        now.append(node)
        taken.add(node)
    return now, queued


def held(changes: Iterable[Change]) -> list[Change]:
    """The changes decided ``hold`` for their claims (``waits``): those a drain step advances."""
    return [
        c for c in changes if c.waiting is not None and c.held is not None and c.held.on == "claims" and c.disruption
    ]


@dataclass(frozen=True)
class Planned:
    """One held change's drain step: the nodes to cordon, the pods to evict by node (in the order they
    go), the nodes waiting for a slot, and what to say when there is nothing to evict."""

    key: str
    stage: str
    cordon: tuple[str, ...] = ()
    evict: tuple[tuple[str, tuple[str, ...]], ...] = ()
    queued: tuple[str, ...] = ()
    max_unavailable: int = 1
    note: str = ""

    def text(self, outcomes: Mapping[str, str] | None = None) -> str:
        """Where the drain stands: per node, each pod's eviction (``outcomes``: what the apply found,
        by pod; else what the step will do), then the nodes waiting for a slot."""
        if self.note:
            return self.note
        notes = []
        for node, pods in self.evict:
            said = [(outcomes or {}).get(pod) or f"pod {pod} to be evicted" for pod in pods]
            notes.append(f"draining node {node}: " + "; ".join(said))
        if self.queued:
            notes.append(
                f"node{'s' if len(self.queued) > 1 else ''} {listed(list(self.queued))} wait for a drain slot "
                f"(maxUnavailable {self.max_unavailable})"
            )
        return "; ".join(notes)


@dataclass
class Drains:
    """One run's drains, across every change that waits under ``drain``."""

    client: Client
    max_unavailable: int
    drained: dict[str, str]
    """Node → the change it was cordoned for: the ledger's ``Progress.drained``, updated in place
    (a planned cordon included: the next change's step counts its slot)."""
    occupied: frozenset[str] = frozenset()
    """Nodes where allocated claims are reserved for pods, as the run read the claims (``occupied``)."""
    looked: dict[str, set[str]] = field(default_factory=dict)
    """``Ref.key`` of each change held this run → the cordoned nodes where its affected pods are."""
    save: Callable[[], Awaitable[None]] | None = None
    """Saves the ledger's progress: called with a node in ``drained`` before it is cordoned, so a run
    killed in between leaves the ledger knowing a node it may have cordoned (giving back one that was
    not cordoned changes nothing)."""
    cordoned: int = 0
    """Nodes this run cordoned."""

    @property
    def kept(self) -> set[str]:
        """``Ref.key`` of the changes still held this run: their nodes stay cordoned."""
        return set(self.looked)

    @property
    def draining(self) -> set[str]:
        """The nodes being drained now (``being_drained``)."""
        return being_drained(drained=self.drained, occupied=self.occupied, looked=self.looked)

    async def plan(self, *, key: str, stage: str, claims: Sequence[Mapping[str, Any]], cordon: bool = True) -> Planned:
        """One step of draining for the change ``key`` whose affected ``claims`` are still allocated:
        which nodes a slot lets it cordon, which pods it evicts; nothing is written. ``cordon`` False:
        the devices are out of scheduling already (a maintenance's ``NoSchedule`` rule), so the nodes
        stay schedulable for their other devices; they still take slots while their pods are evicted."""
        self.looked[key] = set()  # its nodes from earlier runs count again only where its pods are
        by_node: dict[str, set[str]] = {}
        for claim in claims:
            namespace = str((claim.get("metadata") or {}).get("namespace", ""))
            for node in claim_nodes(claim):
                by_node.setdefault(node, set()).update(f"{namespace}/{pod}" for pod in holders(claim))
        nodes = sorted(n for n, pods in by_node.items() if pods)
        if not nodes:
            note = "its claims are allocated but reserved for no pod: nothing to evict; waits for them to be freed"
            return Planned(key=key, stage=stage, note=note)
        cordoned = {n for n in nodes if n in self.drained or await self._unschedulable(n)} if cordon else set()
        now, queued = admit(nodes, cordoned=cordoned, busy=self.draining, max_unavailable=self.max_unavailable)
        for node in now:
            self.looked[key].add(node)
            if node not in cordoned and cordon:
                self.drained[node] = key
        if not cordon:
            cordoned = set(now)  # nothing to cordon: the rule's NoSchedule keeps new claims off the devices
        return Planned(
            key=key,
            stage=stage,
            cordon=tuple(sorted(n for n in now if n not in cordoned)),
            evict=tuple((node, tuple(sorted(by_node[node]))) for node in sorted(now)),
            queued=tuple(queued),
            max_unavailable=self.max_unavailable,
        )

    async def execute(self, planned: Planned, entries: Sequence[Change]) -> Executed:
        """Cordon and evict as ``entries`` (``entries(planned)``, decided ``write``) say: each entry's result,
        and what happened to each pod, by pod."""
        outcomes: dict[str, str] = {}
        results: list[Change] = []
        for entry in entries:
            decided = decisions.require(entry.decision, what=entry.ref)
            if decided.verb == "cordon":
                try:
                    await self._cordon(entry.ref.name, key=planned.key)
                except KubeError as err:
                    entry = entry.replaced(error=str(err))
                results.append(entry)
                continue
            pod = f"{entry.ref.namespace}/{entry.ref.name}"
            # A budget's refusal (429) is the expected answer while the jobs run: said, tried again next run.
            outcomes[pod] = said = await evict(self.client, pod)
            results.append(entry.replaced(reason=said))
        return Executed(results=results, outcomes=outcomes)

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


class Executed(NamedTuple):
    """What a drain step's execution did: each entry's result (in order), each pod's outcome in words."""

    results: list[Change]
    outcomes: dict[str, str]


def entries(planned: Planned) -> list[Change]:
    """The decided entries of a drain step: a cordon per node (``cordon``), an eviction per pod (``evict``),
    in the stage of the change they serve."""
    out: list[Change] = []
    why = f"drained for {planned.key}"
    for node in planned.cordon:
        change = Change(ref=node_ref(node), stage=planned.stage, action=Action.CONFIGURED, reason=why)
        out.append(decide_entry(change, verb="cordon"))
    for _, pods in planned.evict:
        for pod in pods:
            namespace, _, name = pod.partition("/")
            change = Change(ref=pod_ref(namespace, name), stage=planned.stage, action=Action.DELETED, reason=why)
            out.append(decide_entry(change, verb="evict"))
    return out


def pod_ref(namespace: str, name: str) -> Ref:
    return Ref(api_version="v1", kind="Pod", namespace=namespace, name=name)


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


def uncordons(*, drained: Mapping[str, str], keep: Set[str]) -> list[Change]:
    """The decided entries that give back every node fleet drained for a change that no longer waits
    (applied, or gone from git): verb ``uncordon``, stage ``record``."""
    return [
        decide_entry(
            Change(ref=node_ref(node), stage="record", action=Action.CONFIGURED, reason=f"drained for {key}"),
            verb="uncordon",
        )
        for node, key in sorted(drained.items())
        if key not in keep
    ]


async def uncordon(
    client: Client, *, drained: Mapping[str, str], entries: Sequence[Change]
) -> tuple[dict[str, str], list[Change]]:
    """Uncordon the nodes of ``entries`` (``uncordons``, decided ``write``): the nodes still drained, and
    each entry's result."""
    left = dict(drained)
    results: list[Change] = []
    for entry in entries:
        decisions.require(entry.decision, what=entry.ref)
        node = entry.ref.name
        body: dict[str, Any] = {"metadata": {"annotations": {DRAINED_FOR: None}}, "spec": {"unschedulable": None}}
        try:
            await client.patch(node_ref(node), body, field_manager=MANAGER)
        except NotFound:
            entry = entry.replaced(reason="the node is gone: nothing to give back")
        except KubeError as err:
            logger.warning("node %s stays cordoned until the next run: %s", node, err.what)
            results.append(entry.replaced(error=f"stays cordoned until the next run: {err.what}"))
            continue
        left.pop(node, None)
        results.append(entry)
    return left, results


__all__ = [
    "DRAINED_FOR",
    "MANAGER",
    "Drains",
    "Executed",
    "Planned",
    "admit",
    "being_drained",
    "entries",
    "evict",
    "held",
    "occupied",
    "pod_ref",
    "uncordon",
    "uncordons",
]
