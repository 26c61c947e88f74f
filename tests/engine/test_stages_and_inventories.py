"""The stage table and the inventory record."""

from __future__ import annotations

import pytest

from fleet.engine import inventories, stages


def test_one_entry_per_stage_with_kinds_gate_and_reverse_prune_order() -> None:
    names = [s.name for s in stages.STAGES]
    assert len(names) == len(set(names))
    assert [s.name for s in stages.prune_order()] == list(reversed(names))
    assert stages.stage_of("DeviceClass").gate == stages.Gate.CLASSES_PUBLISHED
    assert stages.by_name("operator").kinds == ()
    with pytest.raises(KeyError):
        stages.stage_of("Deployment")


def test_inventory_round_trips_through_its_config_map() -> None:
    inv = inventories.Inventory(
        cluster="east",
        entries={"/Namespace//a": "v1", "resource.k8s.io/DeviceClass//gpu": "resource.k8s.io/v1"},
        progress=inventories.Progress(revision="r", done=["namespaces"], complete=False),
    )
    body = inv.encode()
    labels = {"app.kubernetes.io/managed-by": "fleet", "fleet.gpufleet.dev/cluster": "east"}
    assert body["metadata"] == {"name": "fleet-inventory-east", "namespace": "fleet-system", "labels": labels}
    back = inventories.decode("east", body)
    assert back.entries == inv.entries and back.progress == inv.progress and back.exists
    assert back.encode() == body, "an unchanged inventory encodes identically (no write)"
