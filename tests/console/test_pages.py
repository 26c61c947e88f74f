"""What each console page holds, from a snapshot and what the viewer may see (pure)."""

from __future__ import annotations

import pytest

from fleet.console import pages, sources, svgs
from fleet.console.access import EVERYTHING, Sight
from fleet.engine.ownership import POOL_LABEL
from fleet.views import devices
from tests.console.snapshots import REAL_CLAIMS, REAL_SLICES, snapshot
from tests.views.test_maintenances import rule as maintenance_rule

INFERENCE_ONLY = Sight(
    everywhere=frozenset({sources.SLICES, sources.NODES, sources.NAMESPACES, sources.CLASSES}),
    namespaces={k: frozenset({"inference"}) for k in (sources.CLAIMS, sources.PODS, sources.QUOTAS, sources.EVENTS)},
    fleetsync=True,
)


def by_name(gpus: pages.Gpus) -> dict[str, devices.Device]:
    return {d.name: d for p in gpus.pools for n in p.nodes for d in n.devices}


def test_the_gpus_page_names_each_holder_for_a_viewer_who_sees_everything() -> None:
    gpus = pages.gpus(snapshot(), EVERYTHING)
    shown = by_name(gpus)
    assert (shown["gpu-0"].state, shown["gpu-0"].claim, shown["gpu-0"].pods) == (
        "allocated",
        "inference/server-gpu",
        ("server",),
    )
    assert (shown["gpu-1"].claim, shown["gpu-1"].team) == ("ml-research/trainer-gpu", "ml-research")
    assert shown["gpu-2"].state == "free" and not shown["gpu-2"].claim
    (tally,) = gpus.tallies
    assert (tally.model, tally.total, tally.allocated, tally.free) == ("NVIDIA H100 80GB HBM3", 8, 2, 6)
    assert gpus.hidden == 0 and gpus.pools[0].counts["allocated"] == 2


def test_another_teams_holder_is_hidden_but_its_device_still_counts_as_allocated() -> None:
    gpus = pages.gpus(snapshot(), INFERENCE_ONLY)
    shown = by_name(gpus)
    assert shown["gpu-0"].claim == "inference/server-gpu"
    assert (shown["gpu-1"].state, shown["gpu-1"].claim, shown["gpu-1"].pods) == ("allocated", pages.HIDDEN, ())
    assert gpus.hidden == 1
    assert gpus.tallies[0].free == 6, "the free count is the cluster's, not the viewer's"


def test_without_the_claims_allocation_is_unknown_not_free() -> None:
    why = "you may not list resourceclaims in this cluster"
    gpus = pages.gpus(snapshot(missing={sources.CLAIMS: why}), EVERYTHING)
    assert {d.state for d in by_name(gpus).values()} == {"unknown"}
    assert gpus.tallies == () and gpus.missing[sources.CLAIMS] == why


def test_the_real_h100_run_shows_the_pod_and_uuid_the_scheduler_gave_it() -> None:
    real = snapshot(objects={sources.SLICES: REAL_SLICES, sources.CLAIMS: REAL_CLAIMS})
    (device,) = [d for d in by_name(pages.gpus(real, EVERYTHING)).values() if d.claim]
    assert (device.name, device.claim) == ("gpu-0", "ml-research/gpu-pod-gpu-8czjk")
    assert device.uuid == REAL_SLICES[0]["spec"]["devices"][0]["attributes"]["uuid"]["string"]
    assert device.pods == ("gpu-pod",)


def test_a_viewer_sees_only_the_teams_they_can_read_with_quota_from_the_api_server() -> None:
    everyone = {t.name: t for t in pages.team_list(snapshot(), EVERYTHING)}
    assert set(everyone) == {"inference", "ml-research"}
    (quota,) = everyone["ml-research"].quotas
    assert (quota.device_class, quota.used, quota.hard) == ("gpu.nvidia.com", 1, 16)
    assert everyone["inference"].devices == 1
    assert [t.name for t in pages.team_list(snapshot(), INFERENCE_ONLY)] == ["inference"]


def test_a_pending_pod_carries_explains_cause() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big", "namespace": "inference"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "big-gpu"}]},
        "status": {"phase": "Pending"},
    }
    big = {
        "metadata": {"name": "big-gpu", "namespace": "inference"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 9}}]}
        },
    }
    snap = snapshot(objects={sources.PODS: [pod], sources.CLAIMS: [big]})
    (team,) = [t for t in pages.team_list(snap, EVERYTHING) if t.name == "inference"]
    (pending,) = team.pending
    assert (pending.namespace, pending.name) == ("inference", "big")
    assert pending.cause.rule and pending.cause.summary, pending.cause


def test_the_cluster_page_needs_the_right_to_read_the_fleetsync() -> None:
    changes = [{"kind": "DeviceClass", "name": "gpu", "stage": "classes", "action": "configured",
                "decision": {"verdict": "write", "verb": "apply", "as": "fleet"}}]  # fmt: skip
    page = pages.cluster(snapshot(status={"changes": changes, "changeCount": 1}), EVERYTHING)
    assert page.changes == changes and page.row.state == "Ready"
    with pytest.raises(pages.NotAllowed, match="you may not see cluster gpu-east's FleetSync"):
        pages.cluster(snapshot(status={"changes": changes}), Sight())
    assert pages.row(snapshot(), Sight()).state == "Unknown"
    with pytest.raises(pages.NotAllowed, match="any cluster"):
        pages.fleet([pages.row(snapshot(), Sight())])


def test_the_gpus_page_needs_the_right_to_list_slices() -> None:
    with pytest.raises(pages.NotAllowed, match="resourceslices"):
        pages.gpus(snapshot(), Sight(fleetsync=True))
    refused = {sources.SLICES: "you may not list resourceslices in this cluster"}
    with pytest.raises(pages.NotAllowed):
        pages.gpus(snapshot(missing=refused), EVERYTHING)


def test_bars_say_their_numbers_in_words() -> None:
    drawn = str(svgs.bar("pool a", {"allocated": 2, "free": 6}))
    assert 'aria-label="pool a: 8 devices, 2 allocated, 6 free"' in drawn
    assert drawn.count("<rect") == 2 and "style=" not in drawn
    assert 'class="s-none"' in str(svgs.bar("empty", {}))
    cells = str(svgs.cells("node <n>", [("gpu-0", "allocated"), ("gpu-1", "free")]))
    assert "node &lt;n&gt;" in cells and cells.count("<rect") == 2


def test_nodes_are_grouped_by_the_fleet_pool_their_label_names() -> None:
    node = {"metadata": {"name": "dgx-h100-01", "labels": {POOL_LABEL: "h100"}}, "spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}  # fmt: skip
    gpus = pages.gpus(snapshot(objects={sources.NODES: [node]}), EVERYTHING)
    (pool,) = gpus.pools
    assert (pool.name, [n.name for n in pool.nodes]) == ("h100", ["dgx-h100-01"])
    assert pool.nodes[0].taints == ("nvidia.com/gpu=present:NoSchedule",)
    assert pages.node(gpus, "dgx-h100-01").counts["allocated"] == 2
    with pytest.raises(pages.UnknownNode):
        pages.node(gpus, "elsewhere")
    (unlabelled,) = pages.gpus(snapshot(), EVERYTHING).pools
    assert unlabelled.name == pages.NO_POOL


def maintenance_snapshot(**status: object) -> sources.Snapshot:
    """The H100 node taken whole by GPUMaintenance ``repair`` at NoSchedule, its NoExecute held for the pods."""
    rule = maintenance_rule("dgx-h100-01", effect="NoSchedule")
    held = {"kind": "DeviceTaintRule", "name": rule["metadata"]["name"], "waitsFor": "claims", "reason": "2 claims"}
    return snapshot(objects={sources.RULES: [rule]}, status={"waiting": [held], **status})


RULE_READER = Sight(
    everywhere=INFERENCE_ONLY.everywhere | {sources.RULES},
    namespaces=INFERENCE_ONLY.namespaces,
    fleetsync=True,
)


def test_the_cluster_page_follows_the_live_rules_and_names_only_the_pods_a_viewer_may_see() -> None:
    (everyone,) = pages.cluster(maintenance_snapshot(), EVERYTHING).maintenances
    assert (everyone.name, everyone.phase, everyone.where) == (
        "repair",
        "Out of scheduling",
        "every device of node dgx-h100-01",
    )
    assert [str(p) for p in everyone.pods] == ["inference/server", "ml-research/trainer"]
    assert everyone.waiting is not None and everyone.waiting.on == "claims"
    (seen,) = pages.cluster(maintenance_snapshot(), RULE_READER).maintenances
    assert [str(p) for p in seen.pods] == ["inference/server"] and seen.pod_count == 2


def test_a_viewer_who_may_not_list_the_rules_sees_what_the_fleetsync_says() -> None:
    trainer = {"namespace": "ml-research", "name": "trainer", "team": "ml-research"}
    written = {
        "name": "repair",
        "phase": "Out of scheduling",
        "where": "every device of node x",
        "podsWaitedOn": [trainer],
    }
    page = pages.cluster(maintenance_snapshot(maintenances=[written]), INFERENCE_ONLY)
    (shown,) = page.maintenances
    assert (shown.where, shown.pods, shown.pod_count) == ("every device of node x", (), 1)
    assert page.maintenance_note == "as the controller last wrote them (you may not list devicetaintrules)"


def test_a_device_out_of_scheduling_is_tainted_as_fleetctl_inventory_counts_it() -> None:
    shown = by_name(pages.gpus(maintenance_snapshot(), RULE_READER))
    assert (
        shown["gpu-2"].state == "tainted"
        and "fleet.gpufleet.dev/maintenance=repair:NoSchedule" in shown["gpu-2"].taints
    )
    assert by_name(pages.gpus(maintenance_snapshot(), INFERENCE_ONLY))["gpu-2"].state == "free", "no rules: the slices'"
    assert pages.picture_key(maintenance_snapshot(), rules=True) != pages.picture_key(maintenance_snapshot())


def test_the_node_page_marks_the_devices_a_maintenance_takes() -> None:
    one = maintenance_rule("dgx-h100-01", "gpu-1", effect="None")
    node = pages.node(pages.gpus(snapshot(objects={sources.RULES: [one]}), EVERYTHING), "dgx-h100-01")
    (mark,) = node.marks["gpu-1"]
    assert (mark.maintenance, mark.effect, mark.taint) == (
        "repair",
        "None",
        "fleet.gpufleet.dev/maintenance=repair:None",
    )
    assert set(node.marks) == {"gpu-1"} and node.maintenances == ("repair",)
    hidden = pages.node(pages.gpus(snapshot(objects={sources.RULES: [one]}), INFERENCE_ONLY), "dgx-h100-01")
    assert hidden.marks == {}, "the viewer may not list devicetaintrules"
