"""Devices that share converted maps read exactly as devices converted one by one.

``Device.from_slice`` with one cache for many devices keys whole attribute and
capacity maps by their JSON (``shared_key``): a shared map must equal the map the
device would get alone, and devices whose entries differ in any way JSON can tell
must never share one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.cel import Device
from fleet.cel.devices import shared_key
from tests.cel.conftest import slices

FIXTURES = ("h100-node", "a100-node", "h200-node", "mig-node", "mig-node-dynamic")
DRIVER = "gpu.nvidia.com"


def entries(name: str) -> list[tuple[str, dict[str, Any]]]:
    return [(s["spec"]["driver"], d) for s in slices(name) for d in s["spec"].get("devices", [])]


@pytest.mark.parametrize("name", FIXTURES)
def test_shared_conversion_equals_one_by_one(name: str) -> None:
    cache: dict[object, Any] = {}
    for driver, raw in entries(name) * 2:  # the second round is served from the cache
        shared = Device.from_slice(driver=driver, device=raw, cache=cache)
        alone = Device.from_slice(driver=driver, device=copy.deepcopy(raw))
        assert (shared.driver, shared.attributes, shared.capacity, shared.allow_multiple_allocations) == (
            alone.driver,
            alone.attributes,
            alone.capacity,
            alone.allow_multiple_allocations,
        )


def test_equal_entries_share_one_map_and_different_ones_do_not() -> None:
    devices = entries("mig-node-dynamic")
    cache: dict[object, Any] = {}
    built = [Device.from_slice(driver=driver, device=raw, cache=cache) for driver, raw in devices]
    again = [Device.from_slice(driver=driver, device=copy.deepcopy(raw), cache=cache) for driver, raw in devices]
    assert all(a.attributes is b.attributes and a.capacity is b.capacity for a, b in zip(built, again, strict=True))
    distinct_attributes = {shared_key(raw.get("attributes")) for _, raw in devices}
    assert len({id(d.attributes) for d in built}) == len(distinct_attributes) > 1
    distinct_capacities = {shared_key(raw.get("capacity")) for _, raw in devices}
    assert len({id(d.capacity) for d in built}) == len(distinct_capacities) < len(devices)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ({"string": 1}, {"string": True}, ("1", "True")),
        ({"string": True}, {"string": 1}, ("True", "1")),
        ({"string": 1}, {"string": 1.0}, ("1", "1.0")),
    ],
)
def test_values_python_calls_equal_but_json_does_not_stay_apart(
    first: dict[str, Any], second: dict[str, Any], expected: tuple[str, str]
) -> None:
    cache: dict[object, Any] = {}
    one = Device.from_slice(driver=DRIVER, device={"name": "a", "attributes": {"model": first}}, cache=cache)
    two = Device.from_slice(driver=DRIVER, device={"name": "b", "attributes": {"model": second}}, cache=cache)
    assert (one.attributes[DRIVER]["model"], two.attributes[DRIVER]["model"]) == expected


@pytest.mark.parametrize(
    "content",
    [{"int": float("nan")}, {"int": float("inf")}, {"int": 2**70}, {1: "x"}, {"string": None}],
)
def test_content_json_cannot_hold_exactly_is_not_shared(content: dict[Any, Any]) -> None:
    assert shared_key(content) is None


def test_content_json_holds_gets_a_key() -> None:
    assert shared_key({"a": {"int": 1}}) != shared_key({"a": {"int": True}}) != shared_key({"a": {"int": 1.0}})
    assert shared_key({"a": {"int": 1}}) == shared_key({"a": {"int": 1}})
