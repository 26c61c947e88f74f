"""A cluster's GPU maintenances for people, from the live rules, the claims and the FleetSync (pure).

The rules are the bodies the engine writes (``fleet.engine.maintenances.body``), their status the one
kube-controller-manager's device-taint-eviction controller writes on a ``None`` rule.
"""

from __future__ import annotations

from typing import Any

from fleet.engine import maintenances as engine_maintenances
from fleet.engine.plans import MaintenanceRule, Targets
from fleet.views import maintenances
from tests.console.snapshots import claim
from tests.engine.test_maintenances import slice_of

SLICES = [slice_of("node-1", 8), slice_of("node-2", 8)]
TEAMS = {"ml": "ml-research"}
PREVIEW = (
    "8 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if the "
    "effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger "
    "an update."
)


def rule(node: str, device: str = "", *, effect: str, name: str = "repair", preview: str = "") -> dict[str, Any]:
    """The live rule the engine writes for ``device`` of ``node`` (every device of it when ""), at ``effect``."""
    spec = MaintenanceRule(
        name=name, targets=Targets(), reason="HBM errors, RMA 4711", api_version="resource.k8s.io/v1", source="m:1:1"
    )
    names = (device,) if device else tuple(f"gpu-{i}" for i in range(8))
    target = engine_maintenances.Target("gpu.nvidia.com", node, device, node, names)
    body = engine_maintenances.body(spec, target, effect=effect)
    body["metadata"]["generation"] = 1
    if preview:
        condition = {"type": "EvictionInProgress", "status": "False", "reason": "NoEffect", "observedGeneration": 1}
        body["status"] = {"conditions": [{**condition, "message": preview}]}
    return body


def trainer(device: str = "gpu-3", pool: str = "node-1") -> dict[str, Any]:
    return claim("ml", "trainer-gpu", device=device, pool=pool, pod="trainer")


def held(rule_name: str, on: str, reason: str, until: str = "") -> dict[str, Any]:
    """A FleetSync ``status.waiting`` row of a held rule (``fleet.controller.sections.waiting_of``)."""
    return {"kind": "DeviceTaintRule", "name": rule_name, "waitsFor": on, "reason": reason, "until": until}


def test_a_rule_at_none_is_previewing_with_the_api_servers_preview_and_the_pods_on_its_device() -> None:
    (found,) = maintenances.read(
        rules=[rule("node-1", "gpu-3", effect="None", preview=PREVIEW)],
        claims=[trainer(), claim("ml", "elsewhere", device="gpu-4", pod="other")],
        slices=SLICES,
        teams=TEAMS,
    )
    assert (found.name, found.phase, found.effect, found.reason) == (
        "repair",
        "Previewing",
        "None",
        "HBM errors, RMA 4711",
    )
    assert [str(d) for d in found.devices] == ["node-1/gpu-3"] and found.where == "device gpu-3 of node node-1"
    assert found.pods == (maintenances.Pod("ml", "trainer", "ml-research"),) and found.pod_count == 1
    assert found.preview.startswith("8 published devices selected.") and "Recreate" not in found.preview
    assert found.waiting is None


def test_a_step_held_for_the_window_is_waiting_and_says_until_when() -> None:
    live = rule("node-1", "gpu-3", effect="None", preview=PREVIEW)
    rows = [held(live["metadata"]["name"], "window", "the maintenance window (opens …)", "2026-12-12T02:00:00Z")]
    (found,) = maintenances.read(rules=[live], claims=[trainer()], slices=SLICES, teams=TEAMS, waiting=rows)
    assert found.phase == "Waiting" and found.effect == "None"
    assert found.waiting == maintenances.Waiting("window", "the maintenance window (opens …)", "2026-12-12T02:00:00Z")


def test_no_schedule_is_out_of_scheduling_and_its_wait_for_the_pods_is_shown_not_a_phase() -> None:
    live = rule("node-1", effect="NoSchedule")
    rows = [held(live["metadata"]["name"], "claims", "1 allocated claim on node-1 (ml/trainer-gpu)")]
    (found,) = maintenances.read(rules=[live], claims=[trainer()], slices=SLICES, teams=TEAMS, waiting=rows)
    assert found.phase == "Out of scheduling"
    assert found.where == "every device of node node-1" and found.device_count == 8
    assert found.waiting is not None and found.waiting.on == "claims"
    assert [str(p) for p in found.pods] == ["ml/trainer"]
    assert found.counts() == {"None": 0, "NoSchedule": 8, "NoExecute": 0}


def test_no_execute_is_emptying_while_a_claim_stays_then_emptied() -> None:
    live = rule("node-1", effect="NoExecute")
    (emptying,) = maintenances.read(rules=[live], claims=[trainer()], slices=SLICES, teams=TEAMS)
    (emptied,) = maintenances.read(rules=[live], claims=[trainer(device="")], slices=SLICES, teams=TEAMS)
    assert (emptying.phase, emptied.phase) == ("Emptying", "Emptied")
    assert emptied.pods == () and emptied.pod_count == 0


def test_a_maintenance_is_as_far_as_its_least_advanced_rule_and_rules_are_grouped_by_the_label() -> None:
    rules = [
        rule("node-1", "gpu-0", effect="NoExecute"),
        rule("node-2", "gpu-0", effect="NoSchedule"),
        rule("node-2", "gpu-5", effect="None", name="other"),
        {**rule("node-2", "gpu-6", effect="None"), "metadata": {"name": "by-hand"}},  # no label: not fleet's
    ]
    found = {m.name: m for m in maintenances.read(rules=rules, claims=[], slices=SLICES, teams=TEAMS)}
    assert set(found) == {"repair", "other"}
    assert (found["repair"].effect, found["repair"].phase) == ("NoSchedule", "Out of scheduling")
    assert found["repair"].where == "2 devices of nodes node-1, node-2"
    assert found["repair"].counts() == {"None": 0, "NoSchedule": 1, "NoExecute": 1}


def test_several_rules_previews_name_their_devices_when_they_differ() -> None:
    other = PREVIEW.replace("1 pod would be evicted in 1 namespace", "0 pods would be evicted in 0 namespaces")
    rules = [
        rule("node-1", "gpu-3", effect="None", preview=PREVIEW),
        rule("node-2", "gpu-1", effect="None", preview=other),
    ]
    (found,) = maintenances.read(rules=rules, claims=[], slices=SLICES, teams=TEAMS)
    assert found.preview.startswith("device gpu-3 of node node-1: 8 published devices selected.")
    assert "; device gpu-1 of node node-2: 8 published" in found.preview


def test_the_status_item_is_bounded_and_reads_back_as_it_was_written() -> None:
    live = rule("node-1", effect="NoSchedule")
    rows = [held(live["metadata"]["name"], "claims", "1 allocated claim", "2026-12-12T06:00:00Z")]
    (found,) = maintenances.read(rules=[live], claims=[trainer()], slices=SLICES, teams=TEAMS, waiting=rows)
    document = found.document(listed=3)
    assert document["devices"] == ["node-1/gpu-0", "node-1/gpu-1", "node-1/gpu-2"] and document["deviceCount"] == 8
    assert document["podsWaitedOn"] == [{"namespace": "ml", "name": "trainer", "team": "ml-research"}]
    assert document["waiting"] == {"on": "claims", "reason": "1 allocated claim", "until": "2026-12-12T06:00:00Z",
                                   "overdue": False}  # fmt: skip
    (back,) = maintenances.from_status([found.document(listed=50)])
    assert back == found
    (cut,) = maintenances.from_status([document])
    assert (cut.device_count, len(cut.devices), cut.where) == (8, 3, "every device of node node-1")
    assert maintenances.where(cut.devices) == "3 devices of node node-1 (gpu-0, gpu-1, gpu-2)"


def test_each_device_is_marked_with_the_maintenances_taint_it_carries() -> None:
    rules = [rule("node-1", effect="NoSchedule"), rule("node-2", "gpu-0", effect="None", name="check")]
    marks = maintenances.marks(rules, SLICES)
    assert len(marks) == 9
    assert marks["gpu.nvidia.com/node-1/gpu-7"] == (
        maintenances.Mark("repair", "NoSchedule", "fleet.gpufleet.dev/maintenance=repair:NoSchedule"),
    )
    assert marks["gpu.nvidia.com/node-2/gpu-0"][0].taint == "fleet.gpufleet.dev/maintenance=check:None"
    assert "gpu.nvidia.com/node-2/gpu-1" not in marks


def test_no_rule_is_no_maintenance() -> None:
    assert maintenances.read(rules=[], claims=[trainer()], slices=SLICES, teams=TEAMS) == []
