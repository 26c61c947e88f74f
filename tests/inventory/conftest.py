"""Inventories from the fixture slices of tests/data and the NVIDIA driver's DeviceClasses."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from fleet.inventory import Checker, Inventory
from tests import paths

FIXTURES = paths.FIXTURES / "resourceslices"
GPU = "device.attributes['gpu.nvidia.com']"
CLASSES = {
    name: {
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": f"device.driver == 'gpu.nvidia.com' && {GPU}.type == '{kind}'"}}]
        },
    }
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
}


def fixture_slices(*names: str) -> list[dict[str, Any]]:
    out = []
    for name in names:
        out += [d for d in yaml.safe_load_all((FIXTURES / f"{name}.yaml").read_text()) if d]
    return out


def renamed(item: dict[str, Any], node: str) -> dict[str, Any]:
    """A copy of a node's slice for another node (pool and nodeName changed)."""
    out = copy.deepcopy(item)
    out["metadata"]["name"] = f"00000-gpu.nvidia.com-{node}-x"
    out["spec"]["nodeName"] = node
    out["spec"]["pool"]["name"] = node
    return out


@pytest.fixture()
def static_cluster() -> Inventory:
    """One H100, one A100, one H200 and one static-MIG node (no partitionable devices)."""
    return Inventory.from_slices(fixture_slices("h100-node", "a100-node", "h200-node", "mig-node"))


@pytest.fixture()
def checker(static_cluster: Inventory) -> Checker:
    return Checker(inventory=static_cluster, classes=CLASSES)


def claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def request(name: str = "gpu", *selectors: str, device_class: str = "gpu.nvidia.com", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class, **fields}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}
