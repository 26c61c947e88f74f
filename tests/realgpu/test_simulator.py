"""The sandbox's simulated H100 publishes what the real driver published for the real H100.

Only identifiers may differ (uuid, PCI bus, node, pool and slice names): the attribute names
and their types, the capacity keys, the device names and the slice's name shape are the real
plugin's. The driver release is the host's, not the GPU's (docs/real-gpu.md lists it).
"""

from __future__ import annotations

import re
from typing import Any

from fleet.sandbox import gpus, profiles
from tests.realgpu import capture
from tests.sandbox.test_gpus import shape

IDENTIFIERS = ("uuid", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot")
HOST = ("driverVersion",)
"""The installed driver's release: the capture's host runs 580.159.04, the model table 580.95.05."""


def simulated() -> dict[str, Any]:
    [node] = profiles.parse({"pools": {"h100x1": 1}}).nodes()
    return gpus.slice_manifest(node, node_uid="uid")


def _kinds(text: str) -> str:
    """A name or identifier with its digits and letters abstracted: its shape."""
    return re.sub(r"[0-9a-f]", "h", re.sub(r"[g-z]", "a", text))


def test_same_attribute_names_types_and_capacity_keys() -> None:
    [ours] = simulated()["spec"]["devices"]
    theirs = capture.device()
    assert shape(ours) == shape(theirs)


def test_same_values_but_for_identifiers_and_the_hosts_driver() -> None:
    [ours] = simulated()["spec"]["devices"]
    theirs = capture.device()
    skip = (*IDENTIFIERS, *HOST)
    assert {k: v for k, v in ours["attributes"].items() if k not in skip} == {
        k: v for k, v in theirs["attributes"].items() if k not in skip
    }
    assert ours["capacity"] == theirs["capacity"]
    for name in IDENTIFIERS:
        assert ours["attributes"][name] != theirs["attributes"][name], name
        assert _kinds(ours["attributes"][name]["string"]) == _kinds(theirs["attributes"][name]["string"]), name


def test_same_device_and_slice_name_shape() -> None:
    ours, theirs = simulated(), capture.slices()[0]
    assert [d["name"] for d in ours["spec"]["devices"]] == [d["name"] for d in theirs["spec"]["devices"]] == ["gpu-0"]
    for item in (ours, theirs):
        node = item["spec"]["nodeName"]
        assert item["spec"]["pool"] == {"name": node, "generation": 1, "resourceSliceCount": 1}
        assert item["metadata"]["generateName"] == f"00000-gpu.nvidia.com-{node}-"
        assert re.fullmatch(rf"00000-gpu\.nvidia\.com-{node}-[a-z0-9]{{5}}", item["metadata"]["name"])
        [owner] = item["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Node", node, True)
    assert ours["spec"]["driver"] == theirs["spec"]["driver"]
