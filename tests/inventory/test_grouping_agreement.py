"""Grouped evaluation (projections, node types, caches) counts exactly what brute force counts.

Brute force: every selector on every whole device, then per-node counts. The
inventory has nodes of three models and three driver versions with unique
identities; the claims are single requests over a spread of selectors and
counts, plus firstAvailable and constraint claims checked against a direct
per-node search.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from fleet import cel
from fleet.cel.devices import projection
from fleet.inventory import Checker, Inventory
from tests.inventory.conftest import CLASSES, GPU, claim, fixture_slices, renamed, request

CAP = "device.capacity['gpu.nvidia.com']"
DRIVERS = ["580.95.5", "570.172.8", "580.126.9"]
SELECTORS = [
    f"{GPU}.productName.lowerAscii().matches('^.*h100.*$')",
    f"{CAP}.memory.isGreaterThan(quantity('81Gi'))",
    f"{GPU}.driverVersion.compareTo(semver('575.0.0')) >= 0",
    f"{GPU}.architecture == 'Hopper' && {GPU}.driverVersion.isLessThan(semver('580.100.0'))",
    f"has({GPU}.uuid) && {GPU}.uuid.endsWith('3')",
    "device.attributes['resource.kubernetes.io'].numaNode == 1",
    f"{GPU}.productName == 'NVIDIA B200'",
    f"{GPU}.index == 0 || {GPU}.architecture == 'Ampere'",
]


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    models = [fixture_slices(name)[0] for name in ("h100-node", "a100-node", "h200-node")]
    slices = []
    for index in range(30):
        item = renamed(copy.deepcopy(models[index % 3]), f"n{index:02d}")
        for number, device in enumerate(item["spec"]["devices"]):
            device["attributes"]["uuid"] = {"string": f"GPU-{index:04d}-{number}"}
            device["attributes"]["resource.kubernetes.io/numaNode"] = {"int": (number + index) % 2}
            device["attributes"]["driverVersion"] = {"version": DRIVERS[(index // 3) % 3]}
        if index % 7 == 0:
            item["spec"]["devices"] = item["spec"]["devices"][: 3 + index % 5]
        slices.append(item)
    return Inventory.from_slices(slices)


def brute_force(inventory: Inventory, expressions: list[str]) -> dict[str, int]:
    """Matching devices per node; a node where any selector errors on a class device counts -1."""
    everything = cel.References(whole_device=True)
    compiled = [
        cel.compile_selector(e)
        for e in [CLASSES["gpu.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"], *expressions]
    ]
    per_node: dict[str, int] = dict.fromkeys(inventory.nodes, 0)
    for item in inventory.devices:
        key = projection(item.device, everything.merged(compiled[-1].references) if expressions else everything)
        try:
            ok = all(s.evaluate_projection(key) for s in compiled)
        except cel.SelectorRuntimeError:
            per_node[item.node] = -1
            continue
        if ok and per_node[item.node] >= 0:
            per_node[item.node] += 1
    return per_node


@pytest.mark.parametrize(("expression", "count"), list(itertools.product(SELECTORS, [1, 3, 8])))
def test_single_requests(inventory: Inventory, expression: str, count: int) -> None:
    report = Checker(inventory=inventory, classes=CLASSES).check_claim(claim(request("gpu", expression, count=count)))
    fits = {node: n for node, n in brute_force(inventory, [expression]).items() if n >= count}
    assert report.nodes == len(fits)
    assert report.devices == sum(fits.values())
    assert report.capacity == sum(n // count for n in fits.values())


def test_all_mode_and_first_available(inventory: Inventory) -> None:
    checker = Checker(inventory=inventory, classes=CLASSES)
    hopper = f"{GPU}.architecture == 'Hopper'"
    report = checker.check_claim(claim(request("gpus", hopper, allocationMode="All")))
    fits = {node: n for node, n in brute_force(inventory, [hopper]).items() if n >= 1}
    assert (report.nodes, report.devices, report.capacity) == (len(fits), sum(fits.values()), len(fits))
    first: dict[str, Any] = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "h200x8",
                "deviceClassName": "gpu.nvidia.com",
                "count": 8,
                "selectors": [{"cel": {"expression": f"{GPU}.productName == 'NVIDIA H200'"}}],
            },
            {
                "name": "numa1x2",
                "deviceClassName": "gpu.nvidia.com",
                "count": 2,
                "selectors": [{"cel": {"expression": SELECTORS[5]}}],
            },
        ],
    }
    h200 = brute_force(inventory, [f"{GPU}.productName == 'NVIDIA H200'"])
    numa1 = brute_force(inventory, [SELECTORS[5]])
    expected_nodes = sum(1 for node in inventory.nodes if h200[node] >= 8 or numa1[node] >= 2)
    assert checker.check_claim(claim(first)).nodes == expected_nodes


def test_match_attribute_per_node(inventory: Inventory) -> None:
    spec = claim(
        request("gpus", count=3), constraints=[{"requests": [], "matchAttribute": "resource.kubernetes.io/numaNode"}]
    )
    report = Checker(inventory=inventory, classes=CLASSES).check_claim(spec)
    expected_nodes = expected_copies = 0
    for node in inventory.nodes:
        numa = [
            inventory.devices[i].device.get("attributes", "resource.kubernetes.io", "numaNode")
            for i in inventory.by_node[node]
        ]
        copies = sum(numa.count(value) // 3 for value in set(numa))
        expected_nodes += copies > 0
        expected_copies += copies
    assert (report.nodes, report.capacity) == (expected_nodes, expected_copies)
