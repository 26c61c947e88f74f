"""Partitionable devices (dynamic MIG): counters are accounted across claims, not only within one.

The slices are what the driver's DynamicMIG publishes (``fleet.inventory.models``): per GPU a
counter set, the whole GPU consuming all of it and every placement of every profile consuming
its engines, memory and memory slices. The expected copies are the scheduler's: it takes the
first device in slice order that still fits the counters, claim after claim.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleet.inventory import Checker, Inventory, holdings, models, pendings
from fleet.inventory.allocations import Usage
from fleet.sandbox import gpus
from tests.inventory.conftest import CLASSES, GPU, claim, fixture_slices, request


def dynamic(model: str = "h100", count: int = 2, name: str = "dyn-01") -> Inventory:
    node = models.NodeSpec(
        name=name, ordinal=1, pool="dyn", model=models.MODELS[model], gpus=count, mig_strategy="dynamic"
    )
    return Inventory.from_slices(gpus.slice_manifests(node, node_uid="uid"))


def mig(profile: str, **fields: Any) -> dict[str, Any]:
    return request("mig", f"{GPU}.profile == '{profile}'", device_class="mig.nvidia.com", **fields)


@pytest.mark.parametrize(
    ("profile", "copies"),
    [
        ("1g.10gb", 14),  # 7 one-slice placements per GPU: the 8th memory slice starts no 1g profile
        ("1g.10gb+me", 2),  # one media-extension instance per GPU (one OFA engine)
        ("1g.20gb", 8),
        ("2g.20gb", 6),
        ("3g.40gb", 4),
        ("4g.40gb", 2),
        ("7g.80gb", 2),
    ],
)
def test_copies_of_a_profile_on_two_dynamic_h100s(profile: str, copies: int) -> None:
    checker = Checker(inventory=dynamic(), classes=CLASSES)
    report = checker.check_claim(claim(mig(profile)))
    assert report.capacity == copies
    assert not report.findings


def test_any_mig_device_takes_the_first_placements() -> None:
    """The scheduler takes 1g.10gb placements first (slice order); they leave no room for others."""
    checker = Checker(inventory=dynamic(), classes=CLASSES)
    assert checker.check_claim(claim(request("mig", device_class="mig.nvidia.com"))).capacity == 14


def test_a100_publishes_no_whole_gpu_under_dynamic_mig() -> None:
    checker = Checker(inventory=dynamic("a100"), classes=CLASSES)
    assert checker.check_claim(claim(request("gpu"))).capacity == 0
    assert checker.check_claim(claim(mig("3g.40gb"))).capacity == 4


def test_placements_that_together_exceed_a_gpu_never_fit_in_one_claim() -> None:
    checker = Checker(inventory=dynamic(count=1), classes=CLASSES)
    same_gpu = [{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}]
    assert checker.check_claim(claim(mig("4g.40gb"), mig("3g.40gb") | {"name": "b"}, constraints=same_gpu)).nodes == 1
    too_much = checker.check_claim(claim(mig("7g.80gb"), mig("1g.10gb") | {"name": "b"}, constraints=same_gpu))
    assert not too_much.satisfiable
    assert not checker.check_claim(claim(mig("4g.40gb", count=2))).satisfiable


def test_a_whole_gpu_and_its_placements_exclude_each_other() -> None:
    inventory = dynamic(count=1)
    one_placement = holdings.usage(
        inventory, [holdings.Holding("ns/a", frozenset({("gpu.nvidia.com", "dyn-01", "gpu-0-mig-1g10gb-19-3")}))]
    )
    assert Checker(inventory=inventory, classes=CLASSES).check_claim(claim(request("gpu"))).capacity == 1
    assert (
        Checker(inventory=inventory, classes=CLASSES, usage=one_placement).check_claim(claim(request("gpu"))).capacity
        == 0
    )
    whole_gpu = holdings.usage(
        inventory, [holdings.Holding("ns/b", frozenset({("gpu.nvidia.com", "dyn-01", "gpu-0")}))]
    )
    assert (
        Checker(inventory=inventory, classes=CLASSES, usage=whole_gpu).check_claim(claim(mig("1g.10gb"))).capacity == 0
    )


def test_what_is_left_after_live_allocations() -> None:
    """Fits now: an allocated 3g.40gb at slices 4-7 leaves slices 0-3 of that GPU."""
    inventory = dynamic(count=2)
    held = [holdings.Holding("ns/a", frozenset({("gpu.nvidia.com", "dyn-01", "gpu-0-mig-3g40gb-9-4")}))]
    now = Checker(inventory=inventory, classes=CLASSES, usage=holdings.usage(inventory, held))
    assert now.check_claim(claim(mig("1g.10gb"))).capacity == 7 + 4
    assert now.check_claim(claim(mig("3g.40gb"))).capacity == 1 + 2
    assert now.check_claim(claim(mig("4g.40gb"))).capacity == 1 + 1
    assert now.check_claim(claim(request("gpu"))).capacity == 1


def test_claims_on_identical_nodes_are_searched_once_per_usage() -> None:
    slices = []
    for index in range(3):
        node = models.NodeSpec(
            name=f"dyn-{index}",
            ordinal=index + 1,
            pool="dyn",
            model=models.MODELS["h100"],
            gpus=2,
            mig_strategy="dynamic",
        )
        slices += gpus.slice_manifests(node, node_uid=f"uid-{index}")
    inventory = Inventory.from_slices(slices)
    usage = holdings.usage(
        inventory, [holdings.Holding("ns/a", frozenset({("gpu.nvidia.com", "dyn-1", "gpu-1-mig-7g80gb-0-0")}))]
    )
    checker = Checker(inventory=inventory, classes=CLASSES, usage=usage)
    assert checker.check_claim(claim(mig("2g.20gb"))).capacity == 6 + 3 + 6
    assert isinstance(checker.usage, Usage)


def test_the_fixture_split_layout_counts_the_published_subset() -> None:
    """The shared fixture (one H100, split slices, a subset of placements): counters across copies."""
    checker = Checker(inventory=Inventory.from_slices(fixture_slices("mig-node-dynamic")), classes=CLASSES)
    # 1g.10gb at slices 0 and 6, 2g.20gb at 0-1, 3g.40gb at 4-7, 4g.40gb at 0-3, 7g.80gb at 0-7
    assert checker.check_claim(claim(request("mig", device_class="mig.nvidia.com"))).capacity == 2
    assert checker.check_claim(claim(mig("1g.10gb"))).capacity == 2
    assert checker.check_claim(claim(mig("3g.40gb"))).capacity == 1


def test_explain_names_the_claim_whose_partition_uses_the_counters() -> None:
    """A free 1g.10gb placement is unusable while a 7g.80gb of the same GPU is allocated."""
    slices = gpus.slice_manifests(
        models.NodeSpec(
            name="dyn-01", ordinal=1, pool="dyn", model=models.MODELS["h100"], gpus=1, mig_strategy="dynamic"
        ),
        node_uid="uid",
    )
    holder = {
        "metadata": {"namespace": "ns", "name": "big"},
        "spec": {"devices": {"requests": [mig("7g.80gb")]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "mig",
                            "driver": "gpu.nvidia.com",
                            "pool": "dyn-01",
                            "device": "gpu-0-mig-7g80gb-0-0",
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "trainer"}],
        },
    }
    waiting = {"metadata": {"namespace": "ns", "name": "small"}, "spec": claim(mig("1g.10gb"))}
    cause = pendings.explain(
        pod=None, claims=[waiting], all_claims=[holder, waiting], classes=CLASSES, slices=slices, nodes=[]
    )
    assert cause.rule == "all-allocated"
    assert "counters are used by allocated partitions" in cause.summary
    assert cause.evidence == (
        "ns/big holds dyn-01/gpu-0-mig-7g80gb-0-0, which consume the same counters (gpu-0-counter-set) (pods trainer)",
    )
