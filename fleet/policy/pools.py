"""Rules for GPU node pools and clusters: what fleet would enforce on nodes must be coherent.

fleet keeps each pool's labels and taints on the nodes its ``nodeSelector``
picks. Two pools of one cluster whose selectors can pick the same node would
each rewrite that node's labels and taints on every reconcile (flapping), so
when one selector is contained in the other (every node the narrower picks,
the wider picks too) that is an error (``pool-overlap``). Selectors that
merely share keys are not flagged: nothing in the repository says whether
real nodes carry both.

Quantities (``gpu.memory``, a request's ``capacity.requests``) must parse as
Kubernetes quantities (``quantity``), and a cluster must run a Kubernetes
minor that serves ``resource.k8s.io/v1`` (1.34 or later, ``cluster-version``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from fleet import cel
from fleet.manifests import Finding, Manifest, kinds
from fleet.policy import walks

FIRST_DRA_V1_MINOR = 34


def check(manifests: Sequence[Manifest]) -> Iterator[Finding]:
    pools = [m for m in manifests if isinstance(m.model, kinds.GPUNodePool)]
    yield from _overlaps(pools)
    for pool in pools:
        assert isinstance(pool.model, kinds.GPUNodePool)
        memory = pool.model.spec.gpu.memory
        if memory is not None:
            yield from _quantity(pool, ("spec", "gpu", "memory"), memory)
    for manifest in manifests:
        for request in walks.requests(manifest):
            for name, value in (request.body.capacity.requests if request.body.capacity else {}).items():
                yield from _quantity(manifest, (*request.path, "capacity", "requests", name), str(value))
        if isinstance(manifest.model, kinds.Cluster):
            yield from _version(manifest, manifest.model)


def _overlaps(pools: list[Manifest]) -> Iterator[Finding]:
    for i, narrow in enumerate(pools):
        for wide in pools[i + 1 :] + pools[:i]:
            assert isinstance(narrow.model, kinds.GPUNodePool) and isinstance(wide.model, kinds.GPUNodePool)
            narrow_items = narrow.model.spec.node_selector.items()
            wide_items = wide.model.spec.node_selector.items()
            if wide_items <= narrow_items and (wide_items != narrow_items or narrow.name > wide.name):
                yield Finding(
                    narrow.positions.at(("spec", "nodeSelector")),
                    "pool-overlap",
                    f"every node pool {narrow.name!r} selects is also selected by pool {wide.name!r} "
                    f"({wide.location}): fleet would rewrite their labels and taints back and forth",
                    hint="make the node selectors disjoint (e.g. a label only one pool's nodes carry)",
                    object=narrow.ref,
                )


def _quantity(manifest: Manifest, path: tuple[str | int, ...], value: str) -> Iterator[Finding]:
    try:
        cel.parse_quantity(value)
    except cel.QuantityError as err:
        yield Finding(
            manifest.positions.at(path),
            "quantity",
            f"{value!r} is not a Kubernetes quantity: {err}",
            hint='write e.g. "80Gi", "81559Mi" or "40G"',
            object=manifest.ref,
        )


def _version(manifest: Manifest, cluster: kinds.Cluster) -> Iterator[Finding]:
    minor = int(cluster.spec.kubernetes_version.split(".")[1])
    if minor < FIRST_DRA_V1_MINOR:
        yield Finding(
            manifest.positions.at(("spec", "kubernetesVersion")),
            "cluster-version",
            f"Kubernetes {cluster.spec.kubernetes_version} does not serve resource.k8s.io/v1 "
            f"(GA in 1.{FIRST_DRA_V1_MINOR})",
            hint=f"upgrade the cluster to 1.{FIRST_DRA_V1_MINOR} or later (the DRA guide's prerequisite)",
            object=manifest.ref,
        )


__all__ = ["FIRST_DRA_V1_MINOR", "check"]
