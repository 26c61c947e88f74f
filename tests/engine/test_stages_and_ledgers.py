"""The stage table and the ledger."""

from __future__ import annotations

import pytest

from fleet.engine import ledgers, stages
from fleet.policy import tenancy


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
        entries={
            "/Namespace//a": ledgers.Entry("v1", ledgers.CREATED),
            "resource.k8s.io/DeviceClass//gpu": ledgers.Entry("resource.k8s.io/v1", ledgers.ADOPTED),
        },
        progress=ledgers.Progress(revision="r", done=["namespaces"], complete=False),
    )
    body = inv.encode()
    labels = {"app.kubernetes.io/managed-by": "fleet", "fleet.gpufleet.dev/cluster": "east"}
    assert body["metadata"] == {"name": "fleet-ledger-east", "namespace": "fleet-system", "labels": labels}
    back = ledgers.decode("east", body)
    assert back.entries == inv.entries and back.progress == inv.progress and back.exists
    assert back.encode() == body, "an unchanged ledger encodes identically (no write)"


def test_ledger_lines_say_created_or_adopted_and_old_lines_read_as_adopted() -> None:
    body = ledgers.Ledger(cluster="east", entries={"/Namespace//a": ledgers.Entry("v1", "created")}).encode()
    assert body["data"]["entries"] == "/Namespace//a v1 created\n"
    body["data"]["entries"] = "/Namespace//a v1\n/Namespace//b v1 adopted\n\n"
    back = ledgers.decode("east", body).entries
    assert back == {"/Namespace//a": ("v1", "adopted"), "/Namespace//b": ("v1", "adopted")}
    assert back["/Namespace//a"].adopted, "fleet can no longer tell: releasing loses nothing"


def test_the_ledger_lives_in_the_namespace_teams_may_not_use() -> None:
    assert tenancy.reserved(ledgers.NAMESPACE) == "which is fleet's own"
