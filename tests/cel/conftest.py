"""Fixture devices for the CEL tests: the ResourceSlice fixtures of tests/data and the H200 NVML reading."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from fleet.cel import Device
from tests import paths

FIXTURES = paths.FIXTURES


def slices(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((FIXTURES / "resourceslices" / f"{name}.yaml").read_text()) if d]


def devices(name: str) -> list[Device]:
    return [
        Device.from_slice(driver=s["spec"]["driver"], device=d)
        for s in slices(name)
        for d in s["spec"].get("devices", [])
    ]


@pytest.fixture(scope="session")
def nvml_h200() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "nvml" / "h200.json").read_text())
    return data


@pytest.fixture(scope="session")
def fixture_devices() -> dict[str, list[Device]]:
    return {name: devices(name) for name in ("h100-node", "a100-node", "h200-node", "mig-node", "mig-node-dynamic")}
