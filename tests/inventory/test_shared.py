"""Shared GPUs (consumable capacity): claims share a device until its capacity is used.

Devices are published as the driver's ConsumableShares does (``allowMultipleAllocations`` and
GPU memory with a ``requestPolicy``); copies are what the scheduler's ``CmpRequestOverCapacity``
lets through, claim after claim.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.inventory import Checker, Inventory, holdings, models
from fleet.inventory import capacities as caps
from fleet.sandbox import gpus
from tests.inventory.conftest import CLASSES, claim, fixture_slices, request


def shared(model: str = "h100", mode: str = "memory", count: int = 1) -> Inventory:
    node = models.NodeSpec(
        name="shared-01", ordinal=1, pool="shared", model=models.MODELS[model], gpus=count, consumable_shares=mode
    )
    return Inventory.from_slices(gpus.slice_manifests(node, node_uid="uid"))


def memory(amount: str, **fields: Any) -> dict[str, Any]:
    return request("gpu", capacity={"requests": {"memory": amount}}, **fields)


@pytest.mark.parametrize(
    ("model", "amount", "copies"),
    [
        ("h100", "10Gi", 7),  # 81559Mi / 10240Mi
        ("h200", "10Gi", 14),  # 143771Mi / 10240Mi
        ("h100", "5Gi", 15),
        ("h100", "40Gi", 1),
        ("h100", "10000Mi", 8),
    ],
)
def test_claims_share_one_gpu_until_its_memory_is_used(model: str, amount: str, copies: int) -> None:
    checker = Checker(inventory=shared(model), classes=CLASSES)
    report = checker.check_claim(claim(memory(amount)))
    assert (report.nodes, report.capacity) == (1, copies)


def test_a_claim_without_a_request_takes_the_default() -> None:
    """``memory`` mode: the default is the whole memory, so one claim; ``unlimited``: default 0."""
    assert Checker(inventory=shared(), classes=CLASSES).check_claim(claim(request("gpu"))).capacity == 1
    unlimited = Checker(inventory=shared(mode="unlimited"), classes=CLASSES).check_claim(claim(request("gpu")))
    assert unlimited.capacity > 100


def test_share_counts_cap_the_claims() -> None:
    checker = Checker(inventory=shared(mode="4"), classes=CLASSES)
    assert checker.check_claim(claim(request("gpu"))).capacity == 4
    assert checker.check_claim(claim(request("gpu", capacity={"requests": {"shares": "2"}}))).capacity == 2


def test_request_policy_rounds_up() -> None:
    slices = fixture_slices("h200-node")
    device = slices[0]["spec"]["devices"][0]
    slices[0]["spec"]["devices"] = [device]
    device["allowMultipleAllocations"] = True
    device["capacity"]["memory"] = {
        "value": "100Gi",
        "requestPolicy": {"default": "20Gi", "validValues": ["20Gi", "30Gi", "50Gi"]},
    }
    checker = Checker(inventory=Inventory.from_slices(slices), classes=CLASSES)
    assert checker.check_claim(claim(memory("21Gi"))).capacity == 3  # rounded to 30Gi
    assert checker.check_claim(claim(memory("1Gi"))).capacity == 5  # rounded to 20Gi
    assert checker.check_claim(claim(memory("51Gi"))).capacity == 0  # above every valid value


def test_range_rounding_follows_the_scheduler() -> None:
    capacity = caps.Capacity(
        value=100 * caps.NANO,
        default=2 * caps.NANO,
        minimum=2 * caps.NANO,
        maximum=50 * caps.NANO,
        step=4 * caps.NANO,
        policy=True,
        ranged=True,
    )
    assert caps.consumed(None, capacity) == 2 * caps.NANO
    assert caps.consumed(1 * caps.NANO, capacity) == 2 * caps.NANO
    assert caps.consumed(3 * caps.NANO, capacity) == 6 * caps.NANO
    assert caps.consumed(6 * caps.NANO, capacity) == 6 * caps.NANO
    assert caps.violates(caps.consumed(51 * caps.NANO, capacity), capacity)
    assert not caps.violates(caps.consumed(49 * caps.NANO, capacity), capacity)  # 50 = 2 + 12 * 4


def test_fits_now_counts_what_live_claims_consumed() -> None:
    inventory = shared()
    held = [
        holdings.Holding(
            "ns/a",
            frozenset({("gpu.nvidia.com", "shared-01", "gpu-0")}),
            ((("gpu.nvidia.com", "shared-01", "gpu-0"), (("memory", "40Gi"),)),),
        )
    ]
    now = Checker(inventory=inventory, classes=CLASSES, usage=holdings.usage(inventory, held))
    assert now.check_claim(claim(memory("10Gi"))).capacity == 3  # (81559 - 40960) / 10240


def test_claims_read_back_from_the_api_give_the_shares() -> None:
    allocated = {
        "metadata": {"namespace": "ns", "name": "a"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "shared-01",
                            "device": "gpu-0",
                            "shareID": "4e1d",
                            "consumedCapacity": {"memory": "20Gi"},
                        }
                    ]
                }
            }
        },
    }
    inventory = shared()
    usage = holdings.usage(inventory, holdings.holdings([allocated, copy.deepcopy(allocated)]))
    assert usage.capacity == {0: {"memory": 40 * 2**30 * caps.NANO}}
    assert not usage.taken
