"""DeviceClass edits judged against the real allocation: the claim holds the real H100's gpu-0."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.engine import disruptions
from tests.realgpu import capture

GPU = "device.attributes['gpu.nvidia.com']"
PCI = "device.attributes['resource.kubernetes.io']"
CLAIM = "ml-research/gpu-pod-gpu-8czjk"


def excluding(clause: str) -> dict[str, Any]:
    """The stored DeviceClass with one more clause in its selector."""
    after = copy.deepcopy(capture.device_class())
    selector = after["spec"]["selectors"][0]["cel"]
    selector["expression"] = f"{selector['expression']} && {clause}"
    return after


def judge(after: dict[str, Any]) -> disruptions.Disruption | None:
    return disruptions.class_disruption(
        before=capture.device_class(), after=after, claims=[capture.claim()], slices=capture.slices()
    )


@pytest.mark.parametrize("attribute", ["uuid", "pciBusID"])
def test_excluding_the_allocated_device_is_disruptive(attribute: str) -> None:
    real = capture.device()["attributes"]
    clause = {
        "uuid": f"{GPU}.uuid != '{real['uuid']['string']}'",
        "pciBusID": f"{PCI}.pciBusID != '{real['resource.kubernetes.io/pciBusID']['string']}'",
    }[attribute]
    found = judge(excluding(clause))
    assert found is not None
    assert found.claims == (CLAIM,)
    assert found.nodes == frozenset({"gpu-real-01"})
    assert "gpu-real-01/gpu-0" in found.reason


@pytest.mark.parametrize(
    "clause",
    [
        f"{GPU}.uuid != 'GPU-00000000-0000-0000-0000-000000000000'",
        f"{PCI}.pciBusID != '0000:00:07.0'",
    ],
)
def test_excluding_another_device_is_safe(clause: str) -> None:
    assert judge(excluding(clause)) is None
