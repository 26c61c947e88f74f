"""The stage table and the ledger."""

from __future__ import annotations

import pytest

from fleet.engine import ledgers, stages


def test_one_entry_per_stage_with_kinds_gate_and_reverse_prune_order() -> None:
    names = [s.name for s in stages.STAGES]
    assert len(names) == len(set(names))
    assert [s.name for s in stages.prune_order()] == list(reversed(names))
    assert stages.stage_of("DeviceClass").gate == stages.Gate.CLASSES_PUBLISHED
    assert stages.by_name("operator").kinds == ()
    with pytest.raises(KeyError):
        stages.stage_of("Deployment")


def test_ledger_round_trips_through_its_config_map() -> None:
    inv = ledgers.Ledger(
        cluster="east",
        entries={"/Namespace//a": "v1", "resource.k8s.io/DeviceClass//gpu": "resource.k8s.io/v1"},
        progress=ledgers.Progress(revision="r", done=["namespaces"], complete=False),
    )
    body = inv.encode()
    labels = {"app.kubernetes.io/managed-by": "fleet", "fleet.gpufleet.dev/cluster": "east"}
    assert body["metadata"] == {"name": "fleet-ledger-east", "namespace": "fleet-system", "labels": labels}
    back = ledgers.decode("east", body)
    assert back.entries == inv.entries and back.progress == inv.progress and back.exists
    assert back.encode() == body, "an unchanged ledger encodes identically (no write)"
