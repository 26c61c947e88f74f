"""Which watch events queue a reconcile for a GPUMaintenance: pure."""

from __future__ import annotations

from typing import Any

from fleet.controller.intakes import wakes
from fleet.engine.plans import Plan

PLAN = Plan(cluster="c", revision="r", objects=())


def rule(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "fleet", "fleet.gpufleet.dev/cluster": "c"}
    obj: dict[str, Any] = {"kind": "DeviceTaintRule", "metadata": {"name": "repair.node-1", "labels": labels}}
    if conditions is not None:
        obj["status"] = {"conditions": conditions}
    return obj


PREVIEW = [{"type": "EvictionInProgress", "observedGeneration": 1, "message": "1 pod would be evicted"}]


def test_the_api_servers_preview_wakes_a_step_that_waits_for_it() -> None:
    assert wakes("MODIFIED", rule(PREVIEW), rule(), plan=PLAN, cluster="c", waits=("preview",))
    assert not wakes("MODIFIED", rule(PREVIEW), rule(), plan=PLAN, cluster="c", waits=("window",))
    assert not wakes("MODIFIED", rule(PREVIEW), rule(PREVIEW), plan=PLAN, cluster="c", waits=("preview",))


def claim(*, allocated: bool) -> dict[str, Any]:
    status = {"allocation": {"devices": {"results": [{"device": "gpu-0"}]}}} if allocated else {}
    return {"kind": "ResourceClaim", "metadata": {"name": "held", "namespace": "ml"}, "status": status}


def test_a_released_claim_wakes_a_change_waiting_for_jobs() -> None:
    released = ("MODIFIED", claim(allocated=False), claim(allocated=True))
    assert wakes(*released, plan=PLAN, cluster="c", waits=("claims",))
    assert not wakes(*released, plan=PLAN, cluster="c", waits=())
