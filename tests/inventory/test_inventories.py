"""Inventories from ResourceSlices, summaries and snapshots."""

from __future__ import annotations

import pytest

from fleet.inventory import Inventory, InventoryError, snapshots
from tests.inventory.conftest import fixture_slices, renamed


def test_qualified_names_and_pools(static_cluster: Inventory) -> None:
    device = static_cluster.devices[0].device
    assert "productName" in device.attributes["gpu.nvidia.com"]
    assert "pciBusID" in device.attributes["resource.kubernetes.io"]
    assert static_cluster.nodes == ["dgx-a100-01", "dgx-h100-01", "h100-mig-01", "hgx-h200-01"]


def test_only_the_newest_generation_counts_and_incomplete_pools_are_noted() -> None:
    old, new = fixture_slices("h100-node") * 2
    new = renamed(new, "dgx-h100-01")
    new["spec"]["pool"]["generation"] = 2
    new["spec"]["pool"]["resourceSliceCount"] = 2
    new["spec"]["devices"] = new["spec"]["devices"][:3]
    inventory = Inventory.from_slices([old, new])
    assert len(inventory.devices) == 3
    assert inventory.notes == ["pool dgx-h100-01 of driver gpu.nvidia.com is incomplete: 1 of 2 slices"]


def test_summary_counts_models_per_node(static_cluster: Inventory) -> None:
    rows = {(r["node"], r["model"]): r["count"] for r in static_cluster.summary()}
    assert rows[("hgx-h200-01", "NVIDIA H200")] == 8
    assert rows[("h100-mig-01", "NVIDIA H100 80GB HBM3 MIG 1g.10gb")] == 2


def test_snapshot_round_trip(static_cluster: Inventory) -> None:
    text = snapshots.dump(snapshots.snapshot(slices=static_cluster.slices, cluster="gpu-east"))
    loaded, cluster = snapshots.load(text)
    assert cluster == "gpu-east"
    assert sorted(d.id for d in loaded.devices) == sorted(d.id for d in static_cluster.devices)
    assert loaded.summary() == static_cluster.summary()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Fleet\n", "not an InventorySnapshot"),
        ("a: [", "not valid YAML"),
        ("kind: InventorySnapshot\nresourceSlices: {}\n", "must be a list"),
    ],
)
def test_bad_snapshots(text: str, message: str) -> None:
    with pytest.raises(InventoryError, match=message) as raised:
        snapshots.load(text, where="snap.yaml")
    assert raised.value.where == "snap.yaml"


def test_bad_device_values_name_the_slice() -> None:
    slices = fixture_slices("h200-node")
    slices[0]["spec"]["devices"][0]["attributes"]["driverVersion"] = {"version": "580.159.04"}
    with pytest.raises(InventoryError, match="parse semantic version") as raised:
        Inventory.from_slices(slices)
    assert "gpu-0" in raised.value.where
