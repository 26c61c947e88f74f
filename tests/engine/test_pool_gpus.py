"""The classes gate counts a pool's GPUs as the NVIDIA driver publishes them (pure).

A GPU in MIG mode is not announced as a whole GPU: only its MIG devices are, each naming it
by ``parentUUID`` (static MIG, ``tests/data/resourceslices/mig-node.yaml``). It is still one
of the node's GPUs, so a pool expecting two GPUs on that node is healthy; dynamic MIG
announces the whole GPU and its placements, which count once.
"""

from __future__ import annotations

from typing import Any

from fleet.engine import healths
from fleet.engine.plans import Plan, PoolRule
from tests.inventory.conftest import fixture_slices


def gate(fixture: str, *, node: str, gpus: int, product: str = "NVIDIA H100 80GB HBM3") -> list[str]:
    pool = PoolRule(
        name="p",
        selector={"kubernetes.io/hostname": node},
        labels={},
        taints=(),
        nodes=1,
        gpu_product=product,
        gpus_per_node=gpus,
        source="pools/p.yaml",
    )
    nodes: dict[str, Any] = {node: {"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}}}
    slices = {s["metadata"]["name"]: s for s in fixture_slices(fixture)}
    plan = Plan(cluster="c", revision="r", objects=(), pools=(pool,))
    return healths.slice_problems(plan, nodes=nodes, slices=slices)


def test_a_gpu_in_static_mig_mode_is_one_of_the_node_s_gpus() -> None:
    assert gate("mig-node", node="h100-mig-01", gpus=2) == []
    [problem] = gate("mig-node", node="h100-mig-01", gpus=3)
    assert problem == "Node h100-mig-01: driver gpu.nvidia.com publishes 2 healthy GPUs, pool p expects 3"


def test_a_dynamic_mig_gpu_and_its_placements_count_once() -> None:
    slices = fixture_slices("mig-node-dynamic")
    whole = {
        d["attributes"]["uuid"]["string"]
        for s in slices
        for d in s["spec"].get("devices") or ()
        if d["attributes"]["type"]["string"] == "gpu"
    }
    assert gate("mig-node-dynamic", node="h100-dynmig-01", gpus=len(whole)) == []
    assert gate("mig-node-dynamic", node="h100-dynmig-01", gpus=len(whole) + 1) != []
