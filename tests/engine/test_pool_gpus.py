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


def pool_of(node: str, *, gpus: int, product: str = "NVIDIA H100 80GB HBM3") -> tuple[Plan, dict[str, Any]]:
    """A plan with one pool of ``node`` expecting ``gpus`` GPUs of ``product``, and that node."""
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
    return Plan(cluster="c", revision="r", objects=(), pools=(pool,)), nodes


def gate(fixture: str, *, node: str, gpus: int, product: str = "NVIDIA H100 80GB HBM3") -> list[str]:
    plan, nodes = pool_of(node, gpus=gpus, product=product)
    slices = {s["metadata"]["name"]: s for s in fixture_slices(fixture)}
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


def test_a_gpu_under_maintenance_is_no_problem_of_its_pool_whatever_its_health_taint() -> None:
    from tests.engine.test_maintenances import XID, slice_of

    plan, nodes = pool_of("node-1", gpus=8)
    broken = {"s": slice_of("node-1", 8, taints={3: XID})}
    [problem] = healths.slice_problems(plan, nodes=nodes, slices=broken)
    assert (
        "7 healthy GPUs (1 tainted NoSchedule, unavailable to new claims: gpu-3 gpu.nvidia.com/xid=79:NoSchedule)"
        in problem
    )
    assert healths.slice_problems(plan, nodes=nodes, slices=broken, excused={("node-1", "gpu-3")}) == []
    assert healths.slice_problems(plan, nodes=nodes, slices={}, excused={("node-1", "")}) == []
    assert healths.slice_problems(plan, nodes=nodes, slices=broken, excused={("node-1", "gpu-4")}) == [problem]
