"""The import's DeviceTaintRules as pure functions: live rules in, GPUMaintenance files, rows and origins out.

The round trip is checked without a cluster too: the files are written and validated as the import
writes them, and the plan they make is expanded by the engine's own functions over the same slices
and rules, which must give back the live rules by name, selector and effect.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from fleet.engine import maintenances as fleet_rules
from fleet.engine.imports import Imported, Live, imported
from fleet.engine.imports.repositories import plan, write
from fleet.inventory.inventories import Inventory
from fleet.policy import featuregates

CONTEXT = "by-hand"
API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"


def _uuid(node: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{index}')}"


def _node(name: str) -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": "p5.48xlarge", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}}


def _slice(node: str, gpus: int = 4, *, driver: str = DRIVER) -> dict[str, Any]:
    """The node's pool as NVIDIA's driver publishes it: named after the node, ``gpu-<i>`` with a uuid."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "uuid": {"string": _uuid(node, i)},
            },
            "capacity": {"memory": {"value": "81559Mi"}},
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _rule(
    name: str,
    *,
    pool: str | None = "node-a",
    device: str | None = None,
    driver: str | None = DRIVER,
    effect: str = "NoSchedule",
    key: str = "example.com/repair",
    value: str = "psu",
    maintenance: str = "",
    reason: str = "",
) -> dict[str, Any]:
    """A live DeviceTaintRule: as fleet writes one when ``maintenance`` is given, else as a person does."""
    selector = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", device)) if v is not None}
    meta: dict[str, Any] = {"name": name, "uid": "u", "resourceVersion": "7"}
    if maintenance:
        meta["labels"] = {fleet_rules.LABEL: maintenance}
        key, value = fleet_rules.TAINT_KEY, maintenance
    if reason:
        meta["annotations"] = {fleet_rules.REASON: reason}
    return {
        "apiVersion": API,
        "kind": "DeviceTaintRule",
        "metadata": meta,
        "spec": {"deviceSelector": selector, "taint": {"key": key, "value": value, "effect": effect}},
    }


def _template(name: str, tolerations: list[dict[str, str]]) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "tolerations": tolerations}}
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def _live(rules: list[dict[str, Any]], *, nodes: tuple[str, ...] = ("node-a", "node-b"), **lists: Any) -> Live:
    features = featuregates.ClusterFeatures(cluster="", file="", minor=37, enabled=featuregates.effective(37, {}))
    lists.setdefault("slices", [_slice(n) for n in nodes])
    return Live(context=CONTEXT, minor=37, features=features, nodes=[_node(n) for n in nodes], others=rules, **lists)


def _import(live: Live) -> Imported:
    return imported(live, cluster="east", fleet="gpus", context=CONTEXT)


def _maintenances(found: Imported) -> dict[str, dict[str, Any]]:
    folder = "clusters/east/maintenance/"
    return {d.path.removeprefix(folder): d.body for d in found.documents if d.path.startswith(folder)}


def _rows(found: Imported) -> dict[str, str]:
    return {u.what: u.reason for u in found.unmapped if u.what.startswith("DeviceTaintRule")}


def test_fleets_rules_are_grouped_by_their_maintenance_into_one_file() -> None:
    rules = [
        _rule("psu.node-a.gpu-1", device="gpu-1", maintenance="psu", effect="NoExecute", reason="PSU swap"),
        _rule("psu.node-b", pool="node-b", maintenance="psu", effect="NoExecute", reason="PSU swap"),
    ]
    found = _import(_live(rules))
    assert _rows(found) == {}
    assert _maintenances(found) == {
        "psu.yaml": {
            "apiVersion": "fleet.gpufleet.dev/v1alpha1",
            "kind": "GPUMaintenance",
            "metadata": {"name": "psu"},
            "spec": {
                # rules on two nodes: nodes x devices would take gpu-1 of node-b too, so uuids
                "devices": {"uuids": sorted([_uuid("node-a", 1), *(_uuid("node-b", i) for i in range(4))])},
                "reason": "PSU swap",
                "effect": "NoExecute",  # no direct: the rules stay at NoExecute, a new one walks from None
            },
        }
    }
    assert {k: v for k, v in found.handover.items() if "DeviceTaintRule" in k} == {
        "resource.k8s.io/DeviceTaintRule//psu.node-a.gpu-1": "created",
        "resource.k8s.io/DeviceTaintRule//psu.node-b": "created",
    }


def test_a_whole_pool_is_its_node_and_devices_of_one_node_are_nodes_and_devices() -> None:
    pool = _import(_live([_rule("xid.node-b", pool="node-b", maintenance="xid", effect="None")]))
    assert _maintenances(pool)["xid.yaml"]["spec"] == {
        "devices": {"nodes": ["node-b"]},
        "reason": "Imported by fleetctl import from DeviceTaintRule xid.node-b with taint "
        "fleet.gpufleet.dev/maintenance=xid.",
        "effect": "None",
    }
    devices = _import(
        _live([_rule(f"fan.node-a.gpu-{i}", device=f"gpu-{i}", maintenance="fan", reason="fan") for i in (0, 2)])
    )
    assert _maintenances(devices)["fan.yaml"]["spec"]["devices"] == {"nodes": ["node-a"], "devices": ["gpu-0", "gpu-2"]}


def test_a_rule_made_by_hand_is_a_maintenance_of_its_name_that_fleet_takes_over() -> None:
    found = _import(_live([_rule("gpu3.psu", device="gpu-3", effect="NoSchedule")]))
    assert _rows(found) == {}
    assert _maintenances(found)["gpu3-psu.yaml"] == {
        "apiVersion": "fleet.gpufleet.dev/v1alpha1",
        "kind": "GPUMaintenance",
        "metadata": {"name": "gpu3-psu", "annotations": {"fleet.gpufleet.dev/adopt": "true"}},
        "spec": {
            "devices": {"nodes": ["node-a"], "devices": ["gpu-3"]},
            "reason": "Imported by fleetctl import from DeviceTaintRule gpu3.psu with taint example.com/repair=psu.",
            "effect": "NoSchedule",
            "direct": True,  # a rule made anew (deleted by hand) goes to NoSchedule at once, not through None
        },
    }
    assert found.handover["resource.k8s.io/DeviceTaintRule//gpu3.psu"] == "created"
    [doc] = [d for d in found.documents if d.path.endswith("gpu3-psu.yaml")]
    assert "taint of gpu3.psu (example.com/repair=psu) becomes fleet's" in doc.comment


def test_the_written_repository_validates_and_renders_the_live_rules_by_name(tmp_path: Path) -> None:
    """The round trip without a cluster: the plan of the files the import writes, expanded by the engine
    over the same slices and rules, is the live rules (a hand-made one under its own name), nothing more."""
    rules = [
        _rule("psu.node-b", pool="node-b", maintenance="psu", effect="NoExecute", reason="PSU swap"),
        _rule("gpu3-psu", device="gpu-3", effect="NoSchedule"),
    ]
    live = _live(rules)
    found = _import(live)
    root = tmp_path / "fleet"
    written = write(root, plan(root, found, cluster="east", fleet="gpus", context=CONTEXT), cluster="east")
    assert written.refused == ()
    inventory = Inventory.from_slices(live.slices)
    by_name = {r["metadata"]["name"]: r for r in rules}
    out = {}
    for rule in written.plan.maintenances:
        chosen = fleet_rules.select(rule, inventory, pool_nodes={})
        targets = fleet_rules.targets(inventory, chosen)
        for d in fleet_rules.desired(rule, targets, live_rules=by_name, cluster="east", revision="r"):
            out[d.ref.name] = (fleet_rules.target_of(d.body), fleet_rules.effect_of(d.body))
    assert out == {n: (fleet_rules.target_of(r), fleet_rules.effect_of(r)) for n, r in by_name.items()}


def test_a_taint_some_claim_tolerates_stays_a_persons_and_one_nobody_tells_apart_becomes_fleets() -> None:
    rule = _rule("gpu3-psu", device="gpu-3", key="example.com/repair", value="psu")
    burn_in = _template("burn-in", [{"key": "example.com/repair", "operator": "Exists", "effect": "NoSchedule"}])
    everything = _template("anything", [{"operator": "Exists"}])
    found = _import(_live([rule], templates=[burn_in, everything]))
    assert _maintenances(found) == {}
    reason = _rows(found)["DeviceTaintRule gpu3-psu"]
    assert "claims tolerate one and not the other (gpu3-psu: ResourceClaimTemplate ml/burn-in)" in reason
    assert "Change those tolerations" in reason
    # a toleration of every taint tolerates both: the take-over changes nothing for it
    assert "gpu3-psu.yaml" in _maintenances(_import(_live([rule], templates=[everything])))


def test_what_a_maintenance_cannot_name_is_a_row_that_says_what_to_do() -> None:
    rules = [
        _rule("nic", driver="mellanox.com"),
        _rule("no-pool", pool=None, device="gpu-0"),
        _rule("no-driver", driver=None),
        _rule("gone", pool="node-z"),
        _rule("no-such-gpu", device="gpu-9"),
    ]
    nothing = _rule("empty")
    del nothing["spec"]["deviceSelector"]
    rows = _rows(_import(_live([*rules, nothing])))
    assert rows.keys() == {f"DeviceTaintRule {r['metadata']['name']}" for r in [*rules, nothing]}
    assert (
        "driver mellanox.com, and the import maps rules of NVIDIA's GPUs (gpu.nvidia.com) alone; it stays as it is. "
        "Write a GPUMaintenance with devices.drivers: [mellanox.com] by hand" in rows["DeviceTaintRule nic"]
    )
    assert "names no pool, so it takes device gpu-0 on every node" in rows["DeviceTaintRule no-pool"]
    assert "Add driver: gpu.nvidia.com to it" in rows["DeviceTaintRule no-driver"]
    assert "no node publishes pool node-z" in rows["DeviceTaintRule gone"]
    assert "pool node-a (node node-a) publishes no device gpu-9" in rows["DeviceTaintRule no-such-gpu"]
    assert "no deviceSelector" in rows["DeviceTaintRule empty"]


def test_a_maintenance_is_imported_whole_or_not_at_all() -> None:
    mixed = [
        _rule("walk.node-a.gpu-0", device="gpu-0", maintenance="walk", effect="NoSchedule"),
        _rule("walk.node-a.gpu-1", device="gpu-1", maintenance="walk", effect="NoExecute"),
    ]
    stale = [
        _rule("old.node-a.gpu-0", device="gpu-0", maintenance="old", effect="None"),
        _rule("old.node-z.gpu-0", pool="node-z", device="gpu-0", maintenance="old", effect="None"),
    ]
    found = _import(_live([*mixed, *stale]))
    assert _maintenances(found) == {}
    rows = _rows(found)
    assert (
        "at different effects (walk.node-a.gpu-0 NoSchedule, walk.node-a.gpu-1 NoExecute)"
        in rows["DeviceTaintRules walk.node-a.gpu-0, walk.node-a.gpu-1 (maintenance walk)"]
    )
    assert rows["DeviceTaintRules old.node-a.gpu-0, old.node-z.gpu-0 (maintenance old)"].startswith(
        "a maintenance is imported whole or not at all, and old.node-z.gpu-0: no node publishes pool node-z"
    )


def test_devices_another_maintenance_takes_stay_with_it() -> None:
    fleets = _rule("psu.node-a", maintenance="psu", effect="NoExecute")
    by_hand = _rule("gpu2-fan", device="gpu-2")
    found = _import(_live([fleets, by_hand]))
    assert set(_maintenances(found)) == {"psu.yaml"}
    assert "its devices are in maintenance psu already" in _rows(found)["DeviceTaintRule gpu2-fan"]


def test_a_rule_fleet_manages_already_is_listed_and_a_long_or_taken_name_is_made_fit() -> None:
    managed = _rule("psu.node-b", pool="node-b", maintenance="psu")
    managed["metadata"]["labels"].update({"app.kubernetes.io/managed-by": "fleet", "fleet.gpufleet.dev/cluster": "w"})
    long = "r" * 70
    found = _import(_live([managed, _rule("psu", device="gpu-0"), _rule(long, device="gpu-1")]))
    assert found.unmapped[0].what == "DeviceTaintRule psu.node-b"
    assert "fleet manages it already, as part of cluster w" in found.unmapped[0].reason
    names = {body["metadata"]["name"] for body in _maintenances(found).values()}
    assert names == {"psu-2", f"{'r' * 52}-{__import__('hashlib').sha256(long.encode()).hexdigest()[:10]}"}
    assert all(len(n) <= 63 for n in names)


def test_a_whole_pool_out_is_allowed_in_the_file() -> None:
    found = _import(
        _live([_rule("psu.node-a", maintenance="psu"), _rule("psu.node-b", pool="node-b", maintenance="psu")])
    )
    assert _maintenances(found)["psu.yaml"]["spec"]["allowFullPool"] is True


def test_rules_where_fleet_has_no_maintenance_api_stay_rows() -> None:
    live = _live([])
    live.others = [_rule("gpu3-psu", device="gpu-3") | {"apiVersion": "resource.k8s.io/v1alpha3"}]
    live.features = featuregates.ClusterFeatures(cluster="", file="", minor=35, enabled=featuregates.effective(35, {}))
    assert _rows(_import(live)) == {
        "DeviceTaintRule gpu3-psu": "this cluster has no DeviceTaintRule API a GPUMaintenance is carried out "
        "through (Kubernetes 1.37; 1.35 and 1.36 with it served and DRADeviceTaintRules on); it stays as it is. "
        "Import again once it has one"
    }


def test_files_land_in_the_clusters_folder(tmp_path: Path) -> None:
    found = _import(_live([_rule("gpu3-psu", device="gpu-3")]))
    files = plan(tmp_path / "fleet", found, cluster="east", fleet="gpus", context=CONTEXT)
    text = files["clusters/east/maintenance/gpu3-psu.yaml"]
    assert text.startswith("# Imported by fleetctl import: DeviceTaintRule gpu3-psu, read from context by-hand;")
    assert yaml.safe_load(text)["spec"]["effect"] == "NoSchedule"
