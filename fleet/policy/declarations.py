"""A cluster's devices as its GPUNodePools declare them: satisfiability in CI without a cluster.

A pull request is usually checked where no cluster is reachable, yet the
repository already says which GPUs each cluster has: every GPUNodePool names
the model (``gpu.productName``), the GPUs per node, the node count and the MIG
split (static profiles, or ``strategy: dynamic``: every placement published with
its GPU's counters, as the driver's DynamicMIG does), after the cluster's
overlays. This module builds the ResourceSlices the NVIDIA DRA driver would publish for them from the GPU model table
(:mod:`fleet.inventory.models`, the same table the sandbox publishes from), so
``fleetctl validate`` finds — with no ``--inventory`` and no ``--context`` — a
selector reading an attribute no declared device publishes, a runtime type
error on a declared device, and a template no pool of the cluster can satisfy.

A pool whose model is not in the table makes the cluster's devices unknown:
that is a warning naming the known models and how to check against a snapshot
instead, and the cluster's claims are not judged on a partial picture. A
cluster without pools has nothing declared and is not checked either.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from fleet.manifests import ClusterView, Finding, Manifest, kinds

if TYPE_CHECKING:
    from fleet.inventory import Inventory, models

SOURCE = "declared pools"


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a cluster's pools declare: the inventory (None when unknown) and warnings about the pools."""

    inventory: Inventory | None
    findings: list[Finding]
    pools: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    """Each pool's ResourceSlices (one per node), by pool name: what a claim can use pool by pool."""

    @property
    def nodes(self) -> dict[str, list[str]]:
        """Each pool's node names, by pool name."""
        return {pool: sorted({s["spec"]["nodeName"] for s in slices}) for pool, slices in self.pools.items()}


def declared(view: ClusterView) -> Declared:
    pools = sorted((m for m in view.pools if isinstance(m.model, kinds.GPUNodePool)), key=lambda m: m.name)
    if not pools:
        return Declared(None, [])
    from fleet.inventory import Inventory, models  # only with pools: the device tables and CEL

    table = models.by_product_name()
    findings: list[Finding] = []
    slices: list[dict[str, Any]] = []
    names: list[str] = []
    by_pool: dict[str, list[dict[str, Any]]] = {}
    for pool in pools:
        assert isinstance(pool.model, kinds.GPUNodePool)
        spec = pool.model.spec
        model = table.get(spec.gpu.product_name)
        if model is None:
            findings.append(_unknown_model(pool, product=spec.gpu.product_name, known=sorted(table)))
            continue
        if spec.gpu.memory and spec.gpu.memory != model.memory:
            model = dataclasses.replace(model, memory=spec.gpu.memory)
        layout: tuple[tuple[str, int], ...] = ()
        dynamic = spec.mig is not None and spec.mig.strategy == "dynamic"
        if spec.mig is not None and not dynamic:
            layout, left = models.mig_layout(model, dict(spec.mig.profiles))
            if left:
                findings.append(_unplaced(pool, left=left, model=model))
        for index in range(spec.nodes):
            node = models.NodeSpec(
                name=f"{pool.name}-{index + 1:03d}",
                ordinal=len(names) + 1,
                pool=pool.name,
                model=model,
                gpus=spec.gpu.count,
                mig_gpus=spec.gpu.count if spec.mig is not None and not dynamic else 0,
                mig_layout=layout,
                mig_strategy="dynamic" if dynamic else "static",
            )
            names.append(node.name)
            slices += _slices(node)
            by_pool.setdefault(pool.name, []).append(slices[-1])
    if any(f.rule == "pool-unknown-model" for f in findings):
        return Declared(None, findings)
    return Declared(Inventory.from_slices(slices), findings, by_pool)


def _slices(node: models.NodeSpec) -> list[dict[str, Any]]:
    """The node's pool as the driver lays it out (one slice, or counters then one slice per GPU)."""
    from fleet.inventory import models

    specs = models.slice_specs(node)
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{index:02x}-{models.DRIVER}-{node.name}"},
            "spec": {
                "driver": models.DRIVER,
                "nodeName": node.name,
                "pool": {"name": node.name, "generation": 1, "resourceSliceCount": len(specs)},
                **body,
            },
        }
        for index, body in enumerate(specs)
    ]


def _unknown_model(pool: Manifest, *, product: str, known: list[str]) -> Finding:
    return Finding(
        pool.positions.at(("spec", "gpu", "productName")),
        "pool-unknown-model",
        f"GPUNodePool {pool.name!r}: no GPU model table entry for productName {product!r}, so the claims of "
        "its clusters are not checked against declared devices",
        severity="warning",
        hint=f"known models: {', '.join(repr(k) for k in known)}; or check against what the cluster publishes: "
        "fleetctl inventory --context CTX -o yaml > FILE, then fleetctl validate --inventory FILE --cluster C",
        object=pool.ref,
    )


def _unplaced(pool: Manifest, *, left: list[str], model: models.GpuModel) -> Finding:
    return Finding(
        pool.positions.at(("spec", "mig", "profiles")),
        "pool-mig-layout",
        f"GPUNodePool {pool.name!r}: MIG profile(s) {', '.join(sorted(set(left)))} do not fit on one "
        f"{model.product_name} next to the others (8 memory slices)",
        hint=f"profiles of this model: {', '.join(model.mig_profiles) or 'none (no MIG)'}",
        object=pool.ref,
    )


__all__ = ["SOURCE", "Declared", "declared"]
