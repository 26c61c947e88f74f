"""Health gates: the proof a stage must give before the next one starts.

Each ``stages.Gate`` is a pure function of live state returning the list of problems
(empty = healthy), each naming the object and the condition that fails, e.g. ``Node
gpu-3: no ResourceSlice from driver gpu.nvidia.com (pool h100 expects 8 GPUs)``.
``wait`` keeps that live state current by *watching* (``fleet.kube.watch``: one list,
then a stream of changes) rather than re-listing Nodes and ResourceSlices on a
timer: the gate is re-judged when something changed, passes the moment it can, and
costs the API server one list per kind however long it waits. After the timeout it
raises ``HealthTimeout`` with the last problems: an operator reading it knows which
object to look at and why.

Gates only read. Objects that a stage did not write were already live, so the
``exist`` gate checks only what was just written, and it starts from the objects the
API server returned to those writes (``applied``): when those already prove the
gate, nothing is listed or watched at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet.engine import evictions, maintenances
from fleet.engine.listings import Reader
from fleet.engine.plans import Plan
from fleet.engine.stages import Gate, Stage
from fleet.errors import FleetError
from fleet.kube import Client, Kind, Ref, watch

DRIVER = "gpu.nvidia.com"
NODE = ("v1", "Node")
SLICE = ("resource.k8s.io/v1", "ResourceSlice")
CLAIM = ("resource.k8s.io/v1", "ResourceClaim")

Live = Mapping[str, Mapping[str, Any]]
"""Live objects by ``Ref.key``."""


class HealthTimeout(FleetError):
    """A stage did not become healthy in time; ``problems`` says what and why."""

    def __init__(self, *, stage: Stage, timeout: float, problems: list[str], cluster: str) -> None:
        more = f"\n    ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        shown = "\n    ".join(problems[:20]) + more
        super().__init__(
            f"stage {stage.name} not healthy after {timeout:g}s (gate: {stage.gate}):\n    {shown}",
            where=f"cluster {cluster}",
            hint="fix the objects named above (kubectl describe them), or raise --health-timeout",
        )
        self.stage = stage
        self.problems = problems


# -- pure: the gates over live state -----------------------------------------------------------


def problems(
    *,
    stage: Stage,
    written: list[Ref],
    plan: Plan,
    live: Mapping[tuple[str, str], Live],
    expected: Live | None = None,
    excused: Set[tuple[str, str]] = frozenset(),
) -> list[str]:
    """The problems keeping ``stage`` from being healthy, judged on ``live`` ((apiVersion, kind) → objects).

    ``expected``: the objects this run wrote, by key (``fleet.engine.decisions``): a gate verifies
    those, never the declared state of an object the run held back or left alone."""
    found = exist_problems(written, live=live)
    if stage.gate == Gate.CLASSES_PUBLISHED and plan.pools:
        found += slice_problems(plan, nodes=live.get(NODE, {}), slices=live.get(SLICE, {}), excused=excused)
    elif stage.gate == Gate.POOLS_APPLIED and plan.pools:
        found += pool_problems(plan, nodes=live.get(NODE, {}), expected=expected)
    elif stage.gate == Gate.DEVICES_EMPTIED and _evicting(expected):
        found += evictions.emptied_problems((expected or {}).values(), claims=live.get(CLAIM, {}).values())
    return found


def _evicting(expected: Live | None) -> bool:
    """The run wrote a DeviceTaintRule with ``NoExecute``: the devices-emptied gate reads the claims."""
    return any(
        maintenances.effect_of(o) == "NoExecute"
        for o in (expected or {}).values()
        if o.get("kind") == "DeviceTaintRule"
    )


def gate_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the gates read of an object fleet wrote: its identity, labels and status.

    A stage keeps the API server's answer to each of its writes until its gate passes
    (``wait(applied=)``). Whole answers (managedFields and spec included) made the controller's
    peak memory during an initial apply; this view is a small part of each. The gates read
    ``spec`` only of ResourceSlices, which fleet never writes.
    """
    meta = obj.get("metadata") or {}
    view: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta},
    }
    if "status" in obj:
        view["status"] = obj["status"]
    return view


def exist_problems(refs: list[Ref], *, live: Mapping[tuple[str, str], Live]) -> list[str]:
    """Every ref present; Namespaces Active."""
    out: list[str] = []
    for ref in refs:
        obj = live.get((ref.api_version, ref.kind), {}).get(ref.key)
        if obj is None:
            out.append(f"{ref}: does not exist")
            continue
        phase = (obj.get("status") or {}).get("phase")
        if ref.kind == "Namespace" and phase != "Active":
            out.append(f"{ref}: phase is {phase or 'unset'}, not Active")
    return out


def slice_problems(plan: Plan, *, nodes: Live, slices: Live, excused: Set[tuple[str, str]] = frozenset()) -> list[str]:
    """Every node of a pool publishes the GPUs the pool expects, healthy, of the expected model.

    A GPU is its whole-GPU device, or — when only its MIG devices are published (static MIG,
    and dynamic MIG on Ampere, whose MIG mode is on before the driver starts) — the
    ``parentUUID`` its MIG devices share: a GPU in MIG mode is still one of the pool's GPUs. A GPU whose device
    carries a NoSchedule/NoExecute taint (the driver's health checks: ``gpu.nvidia.com/xid``,
    ``gpu.nvidia.com/gpu-lost``) cannot take new claims, so it is not counted as healthy and the
    problem names the taint.

    ``excused``: (pool, device) under a GPUMaintenance (device "": the whole pool, a node's GPUs): a
    device taken out for repair is no problem of its pool, whatever it carries or whether its node
    still publishes it; otherwise a broken GPU would stop every revision at this gate, the one that
    takes it out included.
    """
    gpus: dict[str, dict[str, list[str]]] = {}  # node -> GPU -> blocking taints of its devices
    partitions: dict[str, dict[str, list[list[str]]]] = {}  # node -> parent -> taints per MIG device
    names: dict[tuple[str, str], str] = {}
    products: dict[str, set[str]] = {}
    for s in slices.values():
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != DRIVER or not node:
            continue
        for device in spec.get("devices") or ():
            attrs = device.get("attributes") or {}
            kind = (attrs.get("type") or {}).get("string", "gpu")
            pool_name = str((spec.get("pool") or {}).get("name") or "")
            if (pool_name, "") in excused or (pool_name, str(device.get("name"))) in excused:
                blocking = []
            else:
                blocking = [
                    _taint(t) for t in device.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")
                ]
            if kind == "gpu":
                uuid = (attrs.get("uuid") or {}).get("string") or str(device.get("name"))
                gpus.setdefault(node, {})[uuid] = blocking
                names[(node, uuid)] = str(device.get("name"))
            elif kind == "mig" and (attrs.get("parentUUID") or {}).get("string"):
                parent = attrs["parentUUID"]["string"]
                partitions.setdefault(node, {}).setdefault(parent, []).append(blocking)
                names.setdefault((node, parent), f"GPU {parent}")
            else:
                continue
            product = (attrs.get("productName") or {}).get("string")
            if product:
                products.setdefault(node, set()).add(product)
    for node, parents in partitions.items():
        for parent, taints in parents.items():
            if parent not in gpus.get(node, {}):
                # only partitions published: the GPU is out only when every partition is
                gpus.setdefault(node, {})[parent] = taints[0] if all(taints) else []
    out: list[str] = []
    for pool in plan.pools:
        for node in sorted((n for n in nodes.values() if pool.matches(dict(n))), key=_name):
            name = _name(node)
            if (name, "") in excused:
                continue  # NVIDIA's driver names a node's pool after the node: all of it is under maintenance
            found = gpus.get(name, {})
            tainted = {uuid: taints for uuid, taints in found.items() if taints}
            healthy = len(found) - len(tainted)
            if not found:
                out.append(
                    f"Node {name}: no ResourceSlice from driver {DRIVER} "
                    f"(pool {pool.name} expects {pool.gpus_per_node} GPUs)"
                )
            elif healthy < pool.gpus_per_node:
                detail = ""
                if tainted:
                    shown = ", ".join(f"{names[(name, u)]} {', '.join(t)}" for u, t in sorted(tainted.items())[:8])
                    detail = f" ({len(tainted)} tainted NoSchedule, unavailable to new claims: {shown})"
                out.append(
                    f"Node {name}: driver {DRIVER} publishes {healthy} healthy GPUs{detail}, "
                    f"pool {pool.name} expects {pool.gpus_per_node}"
                )
            wrong = sorted(products.get(name, set()) - {pool.gpu_product})
            if wrong:
                out.append(f"Node {name}: GPUs are {', '.join(wrong)}, pool {pool.name} expects {pool.gpu_product}")
    return out


def _taint(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def pool_problems(plan: Plan, *, nodes: Live, expected: Live | None = None) -> list[str]:
    """Every pool matches the nodes it expects, and each Node shows the labels fleet gave it.

    ``expected`` (the Node writes of this run, by key): only those Nodes' labels are checked, each
    against what was written; a Node whose write is held (a label running pods select) or left
    (drift reported) keeps its labels. None: every matching Node against its pool's labels."""
    out: list[str] = []
    for pool in plan.pools:
        matching = sorted((n for n in nodes.values() if pool.matches(dict(n))), key=_name)
        if len(matching) < pool.nodes:
            selector = ",".join(f"{k}={v}" for k, v in sorted(pool.selector.items()))
            out.append(f"GPUNodePool {pool.name}: {len(matching)} of {pool.nodes} expected nodes match {selector}")
        for node in matching:
            labels = (node.get("metadata") or {}).get("labels") or {}
            want: Mapping[str, str] = pool.labels
            if expected is not None:
                written = expected.get(Ref.of(dict(node)).key)
                if written is None:
                    continue
                declared = (written.get("metadata") or {}).get("labels") or {}
                want = {k: v for k, v in declared.items() if k in pool.labels}
            missing = sorted(k for k, v in want.items() if labels.get(k) != v)
            if missing:
                out.append(f"Node {_name(node)}: pool {pool.name} labels missing: {', '.join(missing)}")
    return out


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


# -- waiting by watching -----------------------------------------------------------------------


@dataclass
class _Views:
    """Live objects per watched kind, and a signal that fires when any of them changes."""

    live: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    synced: set[tuple[str, str]] = field(default_factory=set)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def touch(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


async def wait(
    *,
    client: Client,
    stage: Stage,
    written: list[Ref],
    plan: Plan,
    timeout: float,  # noqa: ASYNC109 - a gate's own deadline, reported in HealthTimeout
    applied: Mapping[str, Mapping[str, Any]] | None = None,
    reader: Reader | None = None,
    interval: float = 0.1,
    expected: Live | None = None,
    excused: Set[tuple[str, str]] = frozenset(),
) -> None:
    """Until ``stage`` is healthy, watch what its gate reads; ``HealthTimeout`` after ``timeout`` seconds.

    ``applied`` are the objects the API server returned to this stage's writes (by key);
    ``expected`` what the run wrote (``problems``).
    With a ``reader`` (a watch cache that is already current) the gate reads it every
    ``interval`` seconds instead of opening watches of its own.
    """
    seeded: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for ref in written:
        if applied and ref.key in applied:
            seeded.setdefault((ref.api_version, ref.kind), {})[ref.key] = applied[ref.key]
    unsettled = exist_problems(written, live=seeded)
    kinds: dict[tuple[str, str], str | None] = {}
    for ref in written:
        if any(p.startswith(f"{ref}:") for p in unsettled):
            scope = kinds.get((ref.api_version, ref.kind), ref.namespace)
            kinds[(ref.api_version, ref.kind)] = scope if scope == ref.namespace else None
    if plan.pools and stage.gate in (Gate.CLASSES_PUBLISHED, Gate.POOLS_APPLIED):
        kinds[NODE] = None
        if stage.gate == Gate.CLASSES_PUBLISHED:
            kinds[SLICE] = None
    if stage.gate == Gate.DEVICES_EMPTIED and _evicting(expected):
        kinds[CLAIM] = None
    views = _Views(live={k: dict(v) for k, v in seeded.items()})

    def judge() -> list[str]:
        return problems(stage=stage, written=written, plan=plan, live=views.live, expected=expected, excused=excused)

    if not kinds:
        return  # the API server's answers to the writes prove the gate
    if reader is not None:
        await _read_until_healthy(
            client=client,
            reader=reader,
            kinds=kinds,
            seeded=seeded,
            judge=lambda live: problems(
                stage=stage, written=written, plan=plan, live=live, expected=expected, excused=excused
            ),
            timeout=timeout,
            interval=interval,
            stage=stage,
            cluster=plan.cluster,
        )
        return
    last = ["waiting for the first list of " + ", ".join(k for _, k in sorted(kinds))]
    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as tg:
            for (api_version, kind), namespace in sorted(kinds.items(), key=lambda kv: kv[0]):
                k = await client.kind(api_version=api_version, kind=kind)
                tg.start_soon(_follow, client, k, namespace, views, (api_version, kind))
            while True:
                await views.changed.wait()
                if views.synced >= kinds.keys():
                    last = judge()
                    if not last:
                        tg.cancel_scope.cancel()
                        return
    raise HealthTimeout(stage=stage, timeout=timeout, problems=last, cluster=plan.cluster)


async def _read_until_healthy(
    *,
    client: Client,
    reader: Reader,
    kinds: Mapping[tuple[str, str], str | None],
    seeded: Mapping[tuple[str, str], Mapping[str, Mapping[str, Any]]],
    judge: Callable[[Mapping[tuple[str, str], Live]], list[str]],
    timeout: float,  # noqa: ASYNC109 - the gate's own deadline
    interval: float,
    stage: Stage,
    cluster: str,
) -> None:
    last: list[str] = []
    with anyio.move_on_after(timeout):
        while True:
            live: dict[tuple[str, str], Live] = dict(seeded)
            for (api_version, kind), namespace in kinds.items():
                k = await client.kind(api_version=api_version, kind=kind)
                items = (await reader.list(k, namespace=namespace)).items
                live[(api_version, kind)] = {Ref.of(o).key: o for o in items}
            last = judge(live)
            if not last:
                return
            await anyio.sleep(interval)
    raise HealthTimeout(stage=stage, timeout=timeout, problems=last, cluster=cluster)


async def _follow(client: Client, kind: Kind, namespace: str | None, views: _Views, key: tuple[str, str]) -> None:
    """Keep ``views.live[key]`` equal to the cluster's objects of one kind."""
    fresh: dict[str, Mapping[str, Any]] = {}
    async with contextlib.aclosing(watch(client=client, kind=kind, namespace=namespace)) as events:
        async for event in events:
            if event.type == "LISTED":
                fresh[Ref.of(event.object).key] = event.object
                continue
            if event.type == "SYNCED":
                views.live[key] = fresh
                fresh = {}
                views.synced.add(key)
            elif event.type == "DELETED":
                views.live.setdefault(key, {}).pop(Ref.of(event.object).key, None)
            else:
                views.live.setdefault(key, {})[Ref.of(event.object).key] = event.object
            views.touch()


__all__ = [
    "HealthTimeout",
    "Reader",
    "exist_problems",
    "gate_view",
    "pool_problems",
    "problems",
    "slice_problems",
    "wait",
]
