"""An inventory read per distinct map answers as one read device by device.

Devices with equal slice entries share converted maps, capacities and counter
consumptions (``Inventory.from_slices``); columns and published names are read
once per distinct map and spread to the devices. Each must equal the plain
per-device reading, ids numbered in the same first-seen order.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet import cel
from fleet.inventory import Inventory
from fleet.inventory.capacities import Capacity
from fleet.inventory.inventories import _Amounts
from tests.inventory.conftest import fixture_slices, renamed

FIXTURES = ("h100-node", "a100-node", "h200-node", "mig-node", "mig-node-dynamic")


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    slices = fixture_slices(*FIXTURES)
    # a second node of each: equal entries from other dicts
    return Inventory.from_slices(slices + [renamed(s, f"{s['spec']['nodeName']}-b") for s in slices])


def naive_column(inventory: Inventory, kind: str, domain: str, name: str, *, presence: bool) -> list[int]:
    ids: dict[object, int] = {}
    out = []
    for item in inventory.devices:
        value = item.device.kind(kind).get(domain, {}).get(name)
        if value is None:
            out.append(-1)
        else:
            out.append(0 if presence else ids.setdefault((type(value), value), len(ids)))
    return out


def test_columns_equal_the_per_device_reading(inventory: Inventory) -> None:
    names = [
        (kind, domain, name)
        for kind in ("attributes", "capacity")
        for item in inventory.devices
        for domain, values in item.device.kind(kind).items()
        for name in values
    ]
    for kind, domain, name in [*sorted(set(names)), ("attributes", "gpu.nvidia.com", "nothing")]:
        for presence in (False, True):
            expected = naive_column(inventory, kind, domain, name, presence=presence)
            assert inventory.column(kind, domain, name, presence=presence) == expected, (kind, domain, name)
    drivers: dict[object, int] = {}
    expected = [
        drivers.setdefault((d.device.driver, d.device.allow_multiple_allocations), len(drivers))
        for d in inventory.devices
    ]
    assert inventory.column("driver", "", "", presence=False) == expected


def test_published_names_equal_the_per_device_reading(inventory: Inventory) -> None:
    for kind in ("attributes", "capacity"):
        expected: dict[str, set[str]] = {}
        for item in inventory.devices:
            for domain, values in item.device.kind(kind).items():
                expected.setdefault(domain, set()).update(values)
        assert inventory.published(kind) == expected


def test_maps_are_shared_across_nodes(inventory: Inventory) -> None:
    index, maps = inventory.maps("capacity")
    assert len(maps) < len(inventory.devices) == len(index)
    assert all(maps[i] is item.device.capacity for i, item in zip(index, inventory.devices, strict=True))


def test_shared_capacities_and_consumptions_equal_one_by_one(inventory: Inventory) -> None:
    for item, raw in zip(inventory.devices, _entries(inventory), strict=True):
        alone = _Amounts()
        device = cel.Device.from_slice(driver=item.driver, device=copy.deepcopy(raw))
        assert item.capacities == alone.capacities(raw.get("capacity") or {}, "x", converted=device.capacity)
        assert item.consumes == alone.consumes(raw.get("consumesCounters") or (), "x")


def test_capacities_that_differ_only_in_policy_are_not_shared() -> None:
    slices = fixture_slices("h200-node")
    devices = slices[0]["spec"]["devices"]
    policy = {"default": "10Gi", "validRange": {"min": "1Gi"}}
    devices[1]["capacity"]["memory"] = {**devices[1]["capacity"]["memory"], "requestPolicy": policy}
    inventory = Inventory.from_slices(slices)
    first, second = inventory.devices[0].capacities["memory"], inventory.devices[1].capacities["memory"]
    assert isinstance(first, Capacity) and isinstance(second, Capacity)
    assert first.value == second.value
    assert not first.policy and second.policy


def _entries(inventory: Inventory) -> list[dict[str, Any]]:
    by_id = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): d
        for s in inventory.slices
        for d in s["spec"].get("devices") or []
    }
    return [by_id[(d.driver, d.pool, d.name)] for d in inventory.devices]
