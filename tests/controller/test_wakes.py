"""Which watch events queue a reconcile for a GPUMaintenance, and when the controller listens for them: pure."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from fleet.controller import holds
from fleet.controller.intakes import wakes
from fleet.controller.queues import WorkQueue
from fleet.controller.statuses import Report
from fleet.engine import maintenances
from fleet.engine.changesets import Action, Change, ChangeSet
from fleet.engine.plans import MaintenanceRule, Plan, Targets
from fleet.kube import Ref

PLAN = Plan(cluster="c", revision="r", objects=())
ARGS: dict[str, Any] = {"key": "c", "emergency": "", "asked": ""}


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


@pytest.mark.anyio
async def test_a_rule_just_written_at_none_wakes_the_next_run_on_its_preview_though_nothing_is_held() -> None:
    """The run that writes a maintenance's rule at None holds nothing back: its next step (NoSchedule)
    is not decided until the API server's preview is in the rule. The preview may come after that run
    ended; the watch must wake the controller then, not the look a step later."""
    maintenance = MaintenanceRule(name="repair", targets=Targets(nodes=("node-1",)), reason="fans", source="m:1:1")
    target = maintenances.Target("gpu.nvidia.com", "node-1", "", "node-1", ())
    written = maintenances.body(maintenance, target, effect="None")
    ref = Ref("resource.k8s.io/v1", "DeviceTaintRule", "", written["metadata"]["name"])
    held = holds.Holds(writer=cast(Any, None), report=Report(cluster="c"), queue=WorkQueue(), looks=holds.Looks())
    plan = dataclasses.replace(PLAN, maintenances=(maintenance,))

    await held.held(ChangeSet("c", "r", [Change(ref, "maintenance", Action.CREATED, after=written)]), **ARGS, plan=plan)
    assert held.waits_for == ()
    assert {"preview", "claims"} <= set(held.wakes_on)
    assert wakes("MODIFIED", rule(PREVIEW), rule(), plan=plan, cluster="c", waits=held.wakes_on)

    await held.held(ChangeSet("c", "r", []), **ARGS, plan=plan)  # the walk ended: no rule written below its effect
    assert held.wakes_on == ()
