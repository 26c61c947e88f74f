"""Health gates: the proof a stage must give before the next one starts.

Each ``stages.Gate`` is one check returning the list of problems (empty = healthy),
each naming the object and the condition that fails, e.g. ``Node gpu-3: no
ResourceSlice from driver gpu.nvidia.com (pool h100 expects 8 GPUs)``. ``wait``
polls until the list is empty or the timeout passes, then raises ``HealthTimeout``
with the last problems: an operator reading it knows which object to look at and why.

Gates only read. Objects that a stage did not write were already live, so the
``exist`` gate checks only what was just written. They read through a ``Reader``:
the client (one list per kind) for the CLI, the watch caches for the controller,
which must not list on every reconcile.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio

from fleet.engine.plans import Plan
from fleet.engine.stages import Gate, Stage
from fleet.errors import FleetError
from fleet.kube import Client, Kind, ListResult, Ref

DRIVER = "gpu.nvidia.com"


class Reader(Protocol):
    """Where gates read live objects: ``kube.Client`` or the controller's watch cache."""

    async def list(self, kind: Kind, *, namespace: str | None = None) -> ListResult: ...


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


async def check(
    *, client: Client, stage: Stage, written: list[Ref], plan: Plan, reader: Reader | None = None
) -> list[str]:
    """The problems keeping ``stage`` from being healthy (empty when healthy)."""
    problems = await _exist(client=client, refs=written, reader=reader or client)
    if stage.gate == Gate.CLASSES_PUBLISHED:
        problems += await _slices(client=client, plan=plan, reader=reader or client)
    elif stage.gate == Gate.POOLS_APPLIED:
        problems += await _pools(client=client, plan=plan, reader=reader or client)
    return problems


async def wait(
    *,
    client: Client,
    stage: Stage,
    written: list[Ref],
    plan: Plan,
    timeout: float,  # noqa: ASYNC109 - a gate's own deadline, reported in HealthTimeout
    interval: float = 0.5,
    reader: Reader | None = None,
) -> None:
    """Poll ``check`` until healthy; ``HealthTimeout`` with the last problems after ``timeout`` seconds."""
    problems: list[str] = []
    with anyio.move_on_after(timeout):
        while True:
            problems = await check(client=client, stage=stage, written=written, plan=plan, reader=reader)
            if not problems:
                return
            await anyio.sleep(interval)
    raise HealthTimeout(stage=stage, timeout=timeout, problems=problems, cluster=plan.cluster)


async def _exist(*, client: Client, refs: list[Ref], reader: Reader) -> list[str]:
    """One list per kind (not a GET per object): every ref present, Namespaces Active."""
    problems: list[str] = []
    by_kind: dict[tuple[str, str], list[Ref]] = {}
    for ref in refs:
        by_kind.setdefault((ref.api_version, ref.kind), []).append(ref)
    for (api_version, kind), wanted in sorted(by_kind.items()):
        k = await client.kind(api_version=api_version, kind=kind)
        namespaces = {r.namespace for r in wanted}
        scope = next(iter(namespaces)) if k.namespaced and len(namespaces) == 1 else None
        live = {Ref.of(o).key: o for o in (await reader.list(k, namespace=scope)).items}
        for ref in wanted:
            obj = live.get(ref.key)
            if obj is None:
                problems.append(f"{ref}: does not exist")
                continue
            phase = (obj.get("status") or {}).get("phase")
            if ref.kind == "Namespace" and phase != "Active":
                problems.append(f"{ref}: phase is {phase or 'unset'}, not Active")
    return problems


async def _nodes(client: Client, reader: Reader) -> list[dict[str, Any]]:
    return (await reader.list(await client.kind(api_version="v1", kind="Node"))).items


async def _slices(*, client: Client, plan: Plan, reader: Reader) -> list[str]:
    if not plan.pools:
        return []
    nodes = await _nodes(client, reader)
    kind = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    devices: dict[str, int] = {}
    products: dict[str, set[str]] = {}
    for s in (await reader.list(kind)).items:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != DRIVER or not node:
            continue
        for device in spec.get("devices") or ():
            attrs = device.get("attributes") or {}
            if (attrs.get("type") or {}).get("string", "gpu") != "gpu":
                continue  # MIG devices and other partitions are not whole GPUs
            devices[node] = devices.get(node, 0) + 1
            product = (attrs.get("productName") or {}).get("string")
            if product:
                products.setdefault(node, set()).add(product)
    problems: list[str] = []
    for pool in plan.pools:
        for node in (n for n in nodes if pool.matches(n)):
            name = node["metadata"]["name"]
            found = devices.get(name, 0)
            if found == 0:
                problems.append(
                    f"Node {name}: no ResourceSlice from driver {DRIVER} "
                    f"(pool {pool.name} expects {pool.gpus_per_node} GPUs)"
                )
            elif found < pool.gpus_per_node:
                problems.append(
                    f"Node {name}: driver {DRIVER} publishes {found} GPUs, "
                    f"pool {pool.name} expects {pool.gpus_per_node}"
                )
            wrong = sorted(products.get(name, set()) - {pool.gpu_product})
            if wrong:
                problems.append(
                    f"Node {name}: GPUs are {', '.join(wrong)}, pool {pool.name} expects {pool.gpu_product}"
                )
    return problems


async def _pools(*, client: Client, plan: Plan, reader: Reader) -> list[str]:
    if not plan.pools:
        return []
    nodes = await _nodes(client, reader)
    problems: list[str] = []
    for pool in plan.pools:
        matching = [n for n in nodes if pool.matches(n)]
        if len(matching) < pool.nodes:
            selector = ",".join(f"{k}={v}" for k, v in sorted(pool.selector.items()))
            problems.append(f"GPUNodePool {pool.name}: {len(matching)} of {pool.nodes} expected nodes match {selector}")
        for node in matching:
            labels = node["metadata"].get("labels") or {}
            missing = sorted(k for k, v in pool.labels.items() if labels.get(k) != v)
            if missing:
                problems.append(
                    f"Node {node['metadata']['name']}: pool {pool.name} labels missing: {', '.join(missing)}"
                )
    return problems


__all__ = ["HealthTimeout", "Reader", "check", "wait"]
