"""GPU maintenance's pure parts: the effect walk, the rules, what each step disrupts, the gate."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleet.engine import disruptions, evictions, maintenances, waits
from fleet.engine.plans import ChangeRules, MaintenanceRule, Targets
from fleet.inventory import Inventory
from fleet.inventory.targets import select


def slice_of(node: str, gpus: int, *, taints: dict[int, dict[str, str]] | None = None) -> dict[str, Any]:
    devices = []
    for i in range(gpus):
        device: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {
                "uuid": {"string": f"GPU-{i:08x}-0000-0000-0000-{node[-1] * 12}"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "index": {"int": i},
            },
        }
        if taints and i in taints:
            device["taints"] = [taints[i]]
        devices.append(device)
    return published(node, "gpu.nvidia.com", devices, name=f"{node}-gpu")


def published(node: str, driver: str, devices: list[dict[str, Any]], *, name: str) -> dict[str, Any]:
    """``driver``'s ResourceSlice of ``devices`` on ``node``, its pool named after the node (as NVIDIA's does)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
INVENTORY = Inventory.from_slices([slice_of("node-1", 8, taints={3: XID}), slice_of("node-2", 8)])
POOLS = {"h100": ["node-1", "node-2"]}


def rule(**targets: Any) -> MaintenanceRule:
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in targets.items()}
    return MaintenanceRule(
        name="repair", targets=Targets(**fields), reason="HBM errors", api_version="resource.k8s.io/v1", source="m:1:1"
    )


def chosen(**targets: Any) -> list[str]:
    return [
        f"{INVENTORY.devices[i].node}/{INVENTORY.devices[i].name}"
        for i in select(rule(**targets).targets, INVENTORY, pool_nodes=POOLS)
    ]


def test_each_field_narrows_the_devices_and_every_field_given_must_pass() -> None:
    assert chosen(nodes=["node-2"]) == [f"node-2/gpu-{i}" for i in range(8)]
    assert chosen(pools=["h100"], devices=["gpu-0"]) == ["node-1/gpu-0", "node-2/gpu-0"]
    assert chosen(uuids=["GPU-00000002-0000-0000-0000-222222222222"]) == ["node-2/gpu-2"]
    assert chosen(health_taints=["gpu.nvidia.com/xid"]) == ["node-1/gpu-3"]
    assert chosen(health_taints=["*"], nodes=["node-2"]) == []
    assert chosen(selector="device.attributes['gpu.nvidia.com'].index >= 6", nodes=["node-1"]) == [
        "node-1/gpu-6",
        "node-1/gpu-7",
    ]
    assert chosen(pools=["unknown"]) == []


def test_a_pool_taken_whole_is_one_rule_else_one_rule_per_device() -> None:
    whole = maintenances.targets(INVENTORY, select(rule(nodes=["node-1"]).targets, INVENTORY, pool_nodes=POOLS))
    assert [(t.pool, t.device) for t in whole] == [("node-1", "")]
    some = maintenances.targets(
        INVENTORY, select(rule(nodes=["node-1"], devices=["gpu-1", "gpu-2"]).targets, INVENTORY, pool_nodes=POOLS)
    )
    assert [(t.pool, t.device) for t in some] == [("node-1", "gpu-1"), ("node-1", "gpu-2")]
    assert [maintenances.rule_name("repair", t) for t in some] == ["repair.node-1.gpu-1", "repair.node-1.gpu-2"]
    long = maintenances.rule_name("m" * 200, dataclasses.replace(some[0], pool="p" * 100))
    assert len(long) <= 253


def nic_slice(node: str, nics: int, *, name: str = "") -> dict[str, Any]:
    """A NIC driver's pool on ``node``, named after the node as NVIDIA's GPU pool is."""
    devices = [{"name": f"eth-{i}", "attributes": {"ifName": {"string": f"eth{i}"}}} for i in range(nics)]
    return published(node, "dra.net", devices, name=name or f"{node}-nic")


def test_a_maintenance_takes_the_devices_of_its_drivers_alone() -> None:
    """A node's NICs (another driver's pool of the same name) stay in service unless ``drivers`` names them."""
    inventory = Inventory.from_slices([slice_of("node-1", 8), nic_slice("node-1", 2), slice_of("node-2", 8)])

    def rules_of(**targets: Any) -> list[tuple[str, str, str]]:
        found = maintenances.targets(inventory, select(rule(**targets).targets, inventory, pool_nodes=POOLS))
        return [(t.driver, t.pool, t.device) for t in found]

    assert rules_of(nodes=["node-1"]) == [("gpu.nvidia.com", "node-1", "")]
    assert rules_of(selector="true", nodes=["node-1"]) == [("gpu.nvidia.com", "node-1", "")]
    assert rules_of(nodes=["node-1"], drivers=["gpu.nvidia.com", "dra.net"]) == [
        ("dra.net", "node-1", ""),
        ("gpu.nvidia.com", "node-1", ""),
    ]
    assert rules_of(nodes=["node-1"], devices=["eth-1"], drivers=["dra.net"]) == [("dra.net", "node-1", "eth-1")]
    assert rules_of(nodes=["node-1"], devices=["eth-1"]) == []
    both = select(rule(nodes=["node-1"], drivers=["gpu.nvidia.com", "dra.net"]).targets, inventory, pool_nodes=POOLS)
    names = [maintenances.rule_name("repair", t) for t in maintenances.targets(inventory, both)]
    assert names == ["repair.dra.net.node-1", "repair.node-1"]  # two pools named after the node, two names


def versioned(item: dict[str, Any], version: str, *, generation: int = 1) -> dict[str, Any]:
    out = copy.deepcopy(item)
    out["metadata"]["resourceVersion"] = version
    out["metadata"]["name"] += f"-g{generation}"
    out["spec"]["pool"]["generation"] = generation
    return out


@pytest.mark.parametrize(
    "targets",
    [
        {"nodes": ["node-2"]},
        {"pools": ["h100"], "devices": ["gpu-0"]},
        {"uuids": ["GPU-00000002-0000-0000-0000-222222222222"]},
        {"health_taints": ["gpu.nvidia.com/xid"]},
        {"health_taints": ["*"]},
        {"selector": "device.attributes['gpu.nvidia.com'].index >= 6", "nodes": ["node-1"]},
        {"selector": "device.attributes['gpu.nvidia.com'].index == 2"},
        {"devices": ["gpu-7"]},
        {"pools": ["unknown"]},
        {"nodes": ["node-1"], "drivers": ["dra.net"]},
        {"selector": "true", "drivers": ["dra.net", "gpu.nvidia.com"]},
    ],
)
def test_the_inventory_of_the_candidate_pools_takes_what_the_whole_inventory_takes(targets: dict[str, Any]) -> None:
    """Only the pools where a maintenance may take a device are converted for CEL; a pool's older
    generation (node-2's, whose device 5 had a taint) is read as the scheduler reads it."""
    old = versioned(slice_of("node-2", 8, taints={5: XID}), "7")
    slices = [slice_of("node-1", 8, taints={3: XID}), old, versioned(slice_of("node-2", 8), "8", generation=2)]
    slices += [slice_of("node-3", 4), nic_slice("node-1", 2)]
    whole = Inventory.from_slices(slices)
    some = maintenances.candidates(rule(**targets), slices, pool_nodes=POOLS)
    part = Inventory.from_slices(some)

    def taken(inventory: Inventory) -> list[maintenances.Target]:
        return maintenances.targets(inventory, select(rule(**targets).targets, inventory, pool_nodes=POOLS))

    assert taken(part) == taken(whole)
    if "selector" not in targets or "nodes" in targets:
        assert len(part.devices) < len(whole.devices)


def test_a_kept_inventory_and_what_a_maintenance_took_there_serve_until_a_slice_changes() -> None:
    kept = maintenances.Inventories()
    slices = [versioned(slice_of("node-1", 8), "1"), versioned(slice_of("node-2", 8), "2")]
    xid = rule(health_taints=["gpu.nvidia.com/xid"])
    first, none = kept.select(xid, slices, pool_nodes=POOLS)
    assert none == ()
    assert kept.select(xid, list(reversed(slices)), pool_nodes=POOLS)[0] is first
    pool = rule(pools=["h100"], devices=["gpu-1"])
    assert kept.select(pool, slices, pool_nodes=POOLS)[1] == (1, 9)
    assert kept.select(pool, slices, pool_nodes={"h100": ["node-2"]})[1] == (9,)  # the pool's nodes changed
    tainted = [versioned(slice_of("node-1", 8, taints={3: XID}), "3"), slices[1]]
    again, taken = kept.select(xid, tainted, pool_nodes=POOLS)
    assert again is not first and [again.devices[i].name for i in taken] == ["gpu-3"]
    unversioned = [slice_of("node-1", 8)]
    assert kept.select(xid, unversioned, pool_nodes=POOLS)[0] is not kept.select(xid, unversioned, pool_nodes=POOLS)[0]
    assert len(kept.kept) == 2
    kept.sweep()  # after a run: only what it read stays
    kept.select(xid, tainted, pool_nodes=POOLS)
    kept.sweep()
    assert list(kept.kept) == [maintenances.slices_key(tainted)]
    kept.sweep()  # a run that read none (the maintenance went)
    assert not kept.kept


@pytest.mark.parametrize(
    ("live", "final", "direct", "now"),
    [
        (None, "NoExecute", False, "None"),
        ("None", "NoExecute", False, "NoSchedule"),
        ("NoSchedule", "NoExecute", False, "NoExecute"),
        ("NoExecute", "NoExecute", False, "NoExecute"),
        ("NoSchedule", "NoSchedule", False, "NoSchedule"),
        ("NoExecute", "NoSchedule", False, "NoSchedule"),  # lowered in git: devices return at once
        (None, "None", False, "None"),
        (None, "NoExecute", True, "NoExecute"),
        ("None", "NoSchedule", True, "NoSchedule"),
    ],
)
def test_a_rule_moves_one_effect_per_run_toward_the_maintenance_unless_direct(
    live: str | None, final: str, direct: bool, now: str
) -> None:
    assert maintenances.staged(live, final, direct=direct) == now


def live_rule(effect: str, *, status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    obj = maintenances.body(
        rule(nodes=["node-1"]), maintenances.Target("gpu.nvidia.com", "node-1", "", "node-1", ()), effect=effect
    )
    obj["metadata"]["generation"] = generation
    if status is not None:
        obj["status"] = status
    return obj


def claim(name: str, *, pool: str, device: str, pods: tuple[str, ...] = ("trainer",)) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "status": {
            "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": pool, "device": device}]}},
            "reservedFor": [{"resource": "pods", "name": p} for p in pods],
        },
    }


PREVIEW = {
    "conditions": [
        {
            "type": "EvictionInProgress",
            "status": "False",
            "reason": "NoEffect",
            "observedGeneration": 1,
            "message": "8 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 "
            "namespace if the effect was NoExecute. This information will not be updated again. Recreate the "
            "DeviceTaintRule to trigger an update.",
        }
    ]
}


def test_the_step_to_no_schedule_waits_for_the_api_servers_preview_then_says_it() -> None:
    claims = evictions.device_claims([claim("held", pool="node-1", device="gpu-3")])
    teams = {"ml": "ml-research"}
    early = evictions.disruption(before=live_rule("None"), after=live_rule("NoSchedule"), claims=claims, teams=teams)
    assert early is not None and early.pending and early.claims == ()
    stale = evictions.disruption(
        before=live_rule("None", status=PREVIEW, generation=2),
        after=live_rule("NoSchedule"),
        claims=claims,
        teams=teams,
    )
    assert stale is not None and stale.pending, "a preview of an older spec does not count"
    seen = evictions.disruption(
        before=live_rule("None", status=PREVIEW), after=live_rule("NoSchedule"), claims=claims, teams=teams
    )
    assert seen is not None and not seen.pending
    assert "1 pod would be evicted in 1 namespace if the effect was NoExecute." in seen.reason
    assert "will not be updated again" not in seen.reason
    assert "team ml-research: pod ml/trainer" in seen.reason
    direct = evictions.disruption(before=None, after=live_rule("NoSchedule"), claims=claims, teams=teams, direct=True)
    assert direct is not None and not direct.pending


def test_no_execute_names_the_claims_it_evicts_and_lowering_is_safe() -> None:
    claims = evictions.device_claims(
        [claim("held", pool="node-1", device="gpu-3"), claim("other", pool="node-2", device="gpu-0")]
    )
    found = evictions.disruption(before=live_rule("NoSchedule"), after=live_rule("NoExecute"), claims=claims, teams={})
    assert found is not None and found.claims == ("ml/held",) and found.nodes == frozenset({"node-1"})
    assert "evicts the pods of 1 allocated claim on every device of pool node-1" in found.reason
    assert (
        evictions.disruption(before=live_rule("NoExecute"), after=live_rule("NoSchedule"), claims=claims, teams={})
        is None
    )
    assert evictions.disruption(before=None, after=live_rule("None"), claims=claims, teams={}) is None
    empty = evictions.disruption(before=live_rule("NoSchedule"), after=live_rule("NoExecute"), claims={}, teams={})
    assert empty is not None and empty.claims == () and "no claim is allocated" in empty.reason


def test_the_gate_after_no_execute_names_the_claims_left_on_the_devices() -> None:
    written = [live_rule("NoExecute"), live_rule("NoSchedule")]
    left = evictions.emptied_problems(written, claims=[claim("held", pool="node-1", device="gpu-3")])
    assert left == ["DeviceTaintRule repair.node-1: 1 claim still allocated on every device of pool node-1 (ml/held)"]
    assert evictions.emptied_problems(written, claims=[claim("x", pool="node-2", device="gpu-0")]) == []


def test_waits_hold_for_the_preview_and_a_deadline_ends_the_wait_for_jobs() -> None:
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    pending = disruptions.Disruption(reason="x", pending="the preview")
    held = waits.decide(pending, rules=ChangeRules(), now=now)
    assert held is not None and held.on == "preview" and held.until == now + waits.PREVIEW_LOOK
    jobs = disruptions.Disruption(reason="x", nodes=frozenset({"n"}), claims=("ml/held",))
    rules = ChangeRules(deadline_at=now + timedelta(hours=2))
    before = waits.decide(jobs, rules=rules, now=now)
    assert before is not None and before.on == "claims" and before.until == now + timedelta(hours=2)
    assert "until the deadline 2026-12-07 14:00 UTC" in before.reason
    assert waits.decide(jobs, rules=rules, now=now + timedelta(hours=3)) is None


def test_any_health_taint_is_the_drivers_never_fleets_own() -> None:
    ours = {"key": "fleet.gpufleet.dev/maintenance", "value": "repair", "effect": "NoSchedule"}
    inventory = Inventory.from_slices([slice_of("node-1", 2, taints={0: ours, 1: XID})])
    picked = select(rule(health_taints=["*"]).targets, inventory, pool_nodes={})
    assert [inventory.devices[i].name for i in picked] == ["gpu-1"]
