"""Pure: GPU nodes grouped into GPUNodePools.

Nodes that publish GPUs are grouped by ``node.kubernetes.io/instance-type`` (else GPU
feature discovery's product label), which becomes the pool's ``nodeSelector``. The labels
and taints every node of a group carries (Kubernetes' and the discovery tools' own labels
aside) are what the pool keeps, so adopting the pool changes no node. The GPU model,
count and memory come from the ResourceSlices the driver publishes, and so does the MIG
layout (``spec.mig``: static with the profiles per GPU, or dynamic), so that the claims
that use MIG devices validate against the pool; a node that differs
from its group, that nothing selects, or that a pool selects but that publishes no GPUs
is listed, not guessed. So is each label and taint only some nodes of a group carry (or
carry with different values): it stays on those nodes, outside the repository.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from fleet.engine.imports.documents import Document, Imported, Unmapped
from fleet.engine.imports.lives import Live
from fleet.manifests import kinds

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


@dataclass(frozen=True)
class _GPUs:
    product: str
    count: int
    """Physical GPUs: whole ones and the parents of MIG devices."""
    memory: str
    mig: str
    """"" (no MIG devices), "static" (made beforehand) or "dynamic" (placements that consume counters)."""
    profiles: tuple[tuple[str, int], ...] = ()
    """Static MIG: MIG devices per GPU by profile, as most of the node's MIG GPUs carry them."""
    mig_gpus: int = 0


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
        migs = [d for d in found if _attr(d, "type") == "mig"]
        if not gpus and not migs:
            continue
        whole = {_attr(d, "uuid") for d in gpus}
        layouts: dict[str, Counter[str]] = defaultdict(Counter)
        for d in migs:
            layouts[_attr(d, "parentUUID")][_attr(d, "profile")] += 1
        dynamic = any(d.get("consumesCounters") for d in migs)
        split = [p for p in layouts if p not in whole]
        products = Counter(_attr(d, "productName") for d in gpus or migs)
        memories = Counter(str(((d.get("capacity") or {}).get("memory") or {}).get("value", "")) for d in gpus)
        profiles: tuple[tuple[str, int], ...] = ()
        if migs and not dynamic:
            shapes = Counter(tuple(sorted(layouts[p].items())) for p in split or layouts)
            profiles = shapes.most_common(1)[0][0]
        out[node] = _GPUs(
            product=products.most_common(1)[0][0],
            count=len(gpus) + len(split),
            memory=memories.most_common(1)[0][0] if memories else "",
            mig="dynamic" if dynamic else "static" if migs else "",
            profiles=profiles,
            mig_gpus=0 if dynamic else len(split),
        )
    return out


def _described(g: _GPUs) -> str:
    mig = {"": "", "dynamic": ", dynamic MIG"}.get(g.mig, f", {g.mig_gpus} in MIG mode")
    return f"{g.count}x {g.product}{mig}"


def _attr(device: dict[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(value.get("string") or value.get("version") or "")


def pools(live: Live, *, cluster: str, out: Imported) -> None:
    gpus = _gpus(live.slices)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    bare: list[dict[str, Any]] = []
    for node in sorted(live.nodes, key=lambda n: str(n["metadata"]["name"])):
        name = str(node["metadata"]["name"])
        if name not in gpus:
            bare.append(node)
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
        for node in bare:
            if (node["metadata"].get("labels") or {}).get(key) == value:
                out.unmapped.append(
                    Unmapped(
                        f"Node {node['metadata']['name']}",
                        f"pool {pool} selects it ({key}={value}) but it publishes no GPUs (no {GPU_DRIVER} "
                        "ResourceSlice): spec.nodes does not count it, and fleet gives it the pool's labels and "
                        "taints; import again once its driver publishes its GPUs",
                    )
                )


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
    everywhere = _common_taints(taint_sets)
    taints = [t for t in taint_sets[0] if _key(t) in everywhere]
    out.unmapped.extend(
        _uneven(pool, nodes=nodes, label_sets=label_sets, taint_sets=taint_sets, common=common, everywhere=everywhere)
    )
    seen = Counter(gpus[str(n["metadata"]["name"])] for n in nodes)
    model = seen.most_common(1)[0][0]
    for n in nodes:
        other = gpus[str(n["metadata"]["name"])]
        if other != model:
            out.unmapped.append(
                Unmapped(
                    f"Node {n['metadata']['name']}",
                    f"it is in pool {pool} ({key}={value}) but publishes {_described(other)} where the pool "
                    f"expects {_described(model)}: give it its own {key} label to make it a pool of its own",
                )
            )
    if model.mig == "static" and model.mig_gpus < model.count:
        shown = ", ".join(f"{n}x {p}" for p, n in model.profiles)
        out.unmapped.append(
            Unmapped(
                f"the MIG mode of pool {pool}",
                f"{model.mig_gpus} of the {model.count} GPUs of each Node are in MIG mode ({shown} each): a pool "
                "declares MIG for all its GPUs (spec.mig), so validate checks its claims as if every GPU were split "
                "so; the GPUs stay as they are",
            )
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
    if model.mig == "dynamic":
        spec["mig"] = {"strategy": "dynamic"}
    elif model.mig == "static":
        spec["mig"] = {"strategy": "static", "profiles": dict(model.profiles)}
    body = {"apiVersion": kinds.API_VERSION, "kind": "GPUNodePool", "metadata": {"name": pool}, "spec": spec}
    names = ", ".join(str(n["metadata"]["name"]) for n in nodes[:5]) + (", ..." if len(nodes) > 5 else "")
    comment = f"{len(nodes)} Node(s) with {key}={value} ({names}): the labels and taints all of them carry"
    return Document(f"pools/{pool}.yaml", body, comment)


def _uneven(
    pool: str,
    *,
    nodes: list[dict[str, Any]],
    label_sets: list[dict[str, str]],
    taint_sets: list[list[dict[str, Any]]],
    common: dict[str, str],
    everywhere: frozenset[tuple[tuple[str, str], ...]],
) -> Iterator[Unmapped]:
    """A row per label and per taint some of the pool's nodes carry but not all alike: the pool declares
    only what every node carries, so these stay on their nodes, outside the repository."""
    names = [str(n["metadata"]["name"]) for n in nodes]
    values: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, labels in zip(names, label_sets, strict=True):
        for k, v in labels.items():
            if k not in common:
                values[k][str(v)].append(name)
    for key, by_value in sorted(values.items()):
        count = sum(len(n) for n in by_value.values())
        seen = "; ".join(f"{key}={v} on {_listed(n)}" for v, n in sorted(by_value.items()))
        yield Unmapped(
            f"label {key} of pool {pool}",
            f"{count} of {len(nodes)} Nodes carry it ({seen}): a pool declares only the labels all its "
            "Nodes carry alike; it stays on those Nodes as it is",
        )
    tainted: dict[str, list[str]] = defaultdict(list)
    for name, taints in zip(names, taint_sets, strict=True):
        for t in taints:
            if _key(t) not in everywhere and name not in tainted[_shown(t)][-1:]:
                tainted[_shown(t)].append(name)
    for shown, carriers in sorted(tainted.items()):
        yield Unmapped(
            f"taint {shown} of pool {pool}",
            f"{len(carriers)} of {len(nodes)} Nodes carry it ({_listed(carriers)}): a pool declares only the "
            "taints all its Nodes carry; it stays on those Nodes as it is",
        )


def _listed(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _key(t: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A taint as ``_taint`` compares it, hashable."""
    return tuple(_taint(t).items())


def _common_taints(taint_sets: list[list[dict[str, Any]]]) -> frozenset[tuple[tuple[str, str], ...]]:
    """The taints (``_key``) every one of ``taint_sets`` carries: one pass over the nodes, not one per taint."""
    common = {_key(t) for t in taint_sets[0]} if taint_sets else set()
    for taints in taint_sets[1:]:
        common &= {_key(t) for t in taints}
    return frozenset(common)


def _shown(t: dict[str, Any]) -> str:
    """A taint as ``kubectl taint`` writes it: ``key[=value]:Effect``."""
    taint = _taint(t)
    return f"{taint['key']}{'=' + taint['value'] if 'value' in taint else ''}:{taint['effect']}"


def _taint(t: dict[str, Any]) -> dict[str, str]:
    out = {"key": str(t["key"])}
    if t.get("value"):
        out["value"] = str(t["value"])
    out["effect"] = str(t["effect"])
    return out


__all__ = ["GPU_DRIVER", "INSTANCE_TYPE", "SYSTEM_LABEL_PREFIXES", "pools"]
