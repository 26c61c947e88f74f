"""A cluster's row and its state, from its FleetSync (pure)."""

from __future__ import annotations

import pytest

from fleet.views import fleetsyncs
from tests.console.snapshots import fleetsync


@pytest.mark.parametrize(
    ("status", "reason", "waiting", "state"),
    [
        ("True", "Applied", 0, "Ready"),
        ("True", "Waiting", 1, "Waiting"),
        ("False", "Progressing", 0, "Progressing"),
        ("False", "ReconcileFailed", 0, "Failed"),
        ("False", "ValidationFailed", 0, "Failed"),
        ("False", "SourceUnreachable", 0, "Failed"),
        ("False", "Conflict", 0, "Failed"),
    ],
)
def test_the_ready_condition_folds_into_four_states(status: str, reason: str, waiting: int, state: str) -> None:
    obj = fleetsync("c", conditions=[{"type": "Ready", "status": status, "reason": reason}], waitingCount=waiting)
    assert fleetsyncs.row_of("c", "ctx", obj).state == state


def test_unreadable_and_absent_fleetsyncs_are_failed_or_unknown() -> None:
    assert fleetsyncs.unreachable("c", "ctx", "no answer").state == "Failed"
    assert fleetsyncs.row_of("c", "ctx", None).state == "Failed"
    assert fleetsyncs.row_of("c", "ctx", {"metadata": {}}).state == "Unknown"


def test_the_row_carries_what_the_fleet_page_shows() -> None:
    held = [
        {
            "kind": "DeviceClass",
            "name": "gpu",
            "waitsFor": "window",
            "reason": "the window",
            "until": "2026-12-08T02:00:00Z",
        }
    ]
    row = fleetsyncs.row_of(
        "c",
        "ctx",
        fleetsync("c", waiting=held, waitingCount=1, traceID="ab" * 16, lastReconcileTime="2026-12-07T10:00:00Z"),
    )
    assert row.held == (fleetsyncs.Held("DeviceClass", "", "gpu", "window", "the window", "2026-12-08T02:00:00Z"),)
    assert (row.wanted, row.trace_id, row.applied_at) == ("a" * 40, "ab" * 16, "2026-12-07T10:00:00Z")
    document = row.document()
    assert document["state"] == "Waiting" and document["held"][0]["until"] == "2026-12-08T02:00:00Z"


def test_the_row_carries_the_gpu_maintenances_the_fleetsync_lists() -> None:
    written = {
        "name": "repair",
        "phase": "Out of scheduling",
        "effect": "NoSchedule",
        "where": "every device of node h100x8-02",
        "devices": ["h100x8-02/gpu-0"],
        "deviceCount": 8,
        "podsWaitedOn": [{"namespace": "ml", "name": "trainer", "team": "ml-research"}],
        "podCount": 1,
    }
    row = fleetsyncs.row_of("c", "ctx", fleetsync("c", maintenances=[written], maintenanceCount=1))
    (found,) = row.maintenances
    assert (found.phase, found.where, found.device_count, [str(p) for p in found.pods]) == (
        "Out of scheduling",
        "every device of node h100x8-02",
        8,
        ["ml/trainer"],
    )
    assert row.document()["maintenances"][0]["podsWaitedOn"] == written["podsWaitedOn"]
