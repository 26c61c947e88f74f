"""Simulated GPUs publish exactly what the NVIDIA DRA driver publishes (pure, no cluster)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ruamel.yaml import YAML

from fleet.inventory import limits
from fleet.sandbox import gpus, profiles
from tests import paths

FIXTURES = paths.FIXTURES


def fixture_slice(name: str) -> dict[str, Any]:
    return dict(YAML(typ="safe").load((FIXTURES / "resourceslices" / name).read_text()))


def shape(device: dict[str, Any]) -> dict[str, Any]:
    """Attribute names with their value type, capacity names: what a selector can rely on."""
    return {
        "attributes": {k: next(iter(v)) for k, v in device["attributes"].items()},
        "capacity": sorted(device["capacity"]),
    }


def node(pool: str) -> gpus.NodeSpec:
    return next(n for n in profiles.load(None).nodes() if n.pool == pool)


@pytest.mark.parametrize(
    ("pool", "fixture"), [("h100x8", "h100-node.yaml"), ("a100x8", "a100-node.yaml"), ("h200x8", "h200-node.yaml")]
)
def test_whole_gpus_match_the_driver_fixture(pool: str, fixture: str) -> None:
    ours = gpus.slice_manifest(node(pool), node_uid="uid")
    theirs = fixture_slice(fixture)
    assert ours["spec"]["driver"] == theirs["spec"]["driver"] == "gpu.nvidia.com"
    assert ours["spec"]["pool"] == {"name": ours["spec"]["nodeName"], "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in ours["spec"]["devices"]] == [d["name"] for d in theirs["spec"]["devices"]]
    for a, b in zip(ours["spec"]["devices"], theirs["spec"]["devices"], strict=True):
        assert shape(a) == shape(b)
        for model_attr in (
            "productName",
            "architecture",
            "brand",
            "cudaComputeCapability",
            "driverVersion",
            "cudaDriverVersion",
            "addressingMode",
            "type",
        ):
            assert a["attributes"][model_attr] == b["attributes"][model_attr], model_attr
        assert a["capacity"] == b["capacity"]
    assert ours["metadata"]["generateName"] == f"00000-gpu.nvidia.com-{ours['spec']['nodeName']}-"


def test_mig_devices_match_the_driver_fixture_shape() -> None:
    theirs = {d["name"]: d for d in fixture_slice("mig-node.yaml")["spec"]["devices"]}
    mig = gpus.NodeSpec(name="h100-mig-01", ordinal=1, pool="h100-mig", model=gpus.MODELS["h100"], gpus=2, mig_gpus=1)
    ours = {d["name"]: d for d in gpus.devices(mig)}
    assert set(ours) == set(theirs)  # gpu-0-mig-1g10gb-19-0 ... gpu-1
    for name, device in ours.items():
        assert shape(device) == shape(theirs[name]), name
        assert device["capacity"] == theirs[name]["capacity"], name
        assert (
            device["attributes"]["profile" if "mig" in name else "type"]
            == theirs[name]["attributes"]["profile" if "mig" in name else "type"]
        )
    parent = {d["attributes"]["parentUUID"]["string"] for n, d in ours.items() if "mig" in n}
    assert len(parent) == 1 and parent.pop().startswith("GPU-")


def test_h200_values_come_from_the_nvml_reading() -> None:
    reading = json.loads((FIXTURES / "nvml" / "h200.json").read_text())
    derived = gpus.model_from_nvml(reading)
    m = gpus.MODELS["h200"]
    assert derived == {
        "productName": m.product_name,
        "architecture": m.architecture,
        "brand": m.brand,
        "cudaComputeCapability": m.cuda_compute_capability,
        "driverVersion": m.driver_version,
        "cudaDriverVersion": m.cuda_driver_version,
        "memory": m.memory,
    }


def test_device_identity_differs_per_device_and_node() -> None:
    nodes = profiles.load(None).nodes()
    seen_uuid: set[str] = set()
    seen_bus: set[str] = set()
    for n in nodes:
        for d in gpus.devices(n):
            uuid = d["attributes"]["uuid"]["string"]
            assert re.fullmatch(r"(GPU|MIG)-[0-9a-f-]{36}", uuid)
            assert uuid not in seen_uuid
            seen_uuid.add(uuid)
            if d["attributes"]["type"]["string"] == "gpu":
                bus = d["attributes"]["resource.kubernetes.io/pciBusID"]["string"]
                assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:00\.0", bus)
                assert bus not in seen_bus
                seen_bus.add(bus)


def test_nodes_carry_gpu_labels_and_taint() -> None:
    m = gpus.node_manifest(node("h100x8"))
    assert m["metadata"]["labels"]["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert m["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert m["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert m["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert m["status"]["capacity"]["pods"] == "110"


def test_device_classes_are_the_drivers() -> None:
    classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"] for c in gpus.device_classes()}
    assert classes == {
        "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        "vfio.gpu.nvidia.com": (
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
        ),
    }


def test_gpu_class_serves_nvidia_gpu_and_nodes_do_not_advertise_it() -> None:
    """As the driver's chart on resource.k8s.io/v1: gpu.nvidia.com alone carries extendedResourceName;
    a node advertising nvidia.com/gpu itself (device plugin) would not get DRA devices for it."""
    extended = {c["metadata"]["name"]: c["spec"].get("extendedResourceName") for c in gpus.device_classes()}
    assert extended == {"gpu.nvidia.com": "nvidia.com/gpu", "mig.nvidia.com": None, "vfio.gpu.nvidia.com": None}
    status = gpus.node_manifest(node("h100x8"))["status"]
    assert "nvidia.com/gpu" not in status["capacity"] and "nvidia.com/gpu" not in status["allocatable"]


def test_default_profile_has_the_pools_the_guide_mixes() -> None:
    models = {n.model.key for n in profiles.load(None).nodes()}
    assert {"h100", "a100", "h200"} <= models
    assert any(n.mig_gpus for n in profiles.load(None).nodes() if n.model.key == "a100")


def test_dynamic_mig_matches_the_driver_fixture() -> None:
    """DynamicMIG (split layout): the fixture's counter set, devices and consumptions, every placement."""
    fixture = [
        d for d in YAML(typ="safe").load_all((FIXTURES / "resourceslices" / "mig-node-dynamic.yaml").read_text())
    ]
    node = gpus.NodeSpec(
        name="h100-dynmig-01", ordinal=1, pool="dyn", model=gpus.MODELS["h100"], gpus=1, mig_strategy="dynamic"
    )
    ours = gpus.slice_manifests(node, node_uid="uid")
    assert [s["metadata"]["generateName"] for s in ours] == [s["metadata"]["generateName"] for s in fixture]
    assert [s["spec"]["pool"]["resourceSliceCount"] for s in ours] == [2, 2]
    assert ours[0]["spec"]["sharedCounters"] == fixture[0]["spec"]["sharedCounters"]
    published = {d["name"]: d for d in ours[1]["spec"]["devices"]}
    for theirs in fixture[1]["spec"]["devices"]:
        mine = published[theirs["name"]]
        assert shape(mine) == shape(theirs)
        assert mine["capacity"] == theirs["capacity"]
        assert mine["consumesCounters"] == theirs["consumesCounters"]
    # every placement of every profile nvidia-smi lists for an H100 (7+7+4+3+2+1+1), and the whole GPU
    assert len(published) == 26
    assert "uuid" not in published["gpu-0-mig-1g10gb-me-20-3"]["attributes"]


@pytest.mark.parametrize("model", ["h100", "a100"])
def test_dynamic_mig_slices_keep_the_api_limits(model: str) -> None:
    node = gpus.NodeSpec(name="n", ordinal=1, pool="p", model=gpus.MODELS[model], gpus=8, mig_strategy="dynamic")
    slices = gpus.slice_manifests(node, node_uid="uid")
    assert limits.problems(slices) == []
    assert len(slices) == 9 and len(slices[0]["spec"]["sharedCounters"]) == 8
    assert all(len(s["spec"].get("devices") or ()) <= 64 for s in slices)
    whole = [d for s in slices[1:] for d in s["spec"]["devices"] if d["attributes"]["type"]["string"] == "gpu"]
    assert len(whole) == (0 if model == "a100" else 8)  # Ampere: MIG mode on before the driver starts


def test_consumable_shares_publish_memory_as_consumable() -> None:
    node = gpus.NodeSpec(name="n", ordinal=1, pool="p", model=gpus.MODELS["h200"], gpus=1, consumable_shares="memory")
    [device] = gpus.slice_manifest(node, node_uid="uid")["spec"]["devices"]
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"]["memory"] == {
        "value": "143771Mi",
        "requestPolicy": {"default": "143771Mi", "validRange": {"min": "1Mi", "max": "143771Mi", "step": "1Mi"}},
    }


def test_default_profile_has_one_untainted_system_node() -> None:
    assert profiles.load(None).cpu_nodes() == [("system-01", "system")]
    assert profiles.parse({"pools": {"h100x1": 1}, "cpuPools": {}}).cpu_nodes() == []
    assert profiles.parse({"pools": {"h100x1": 1}, "cpuPools": {"infra": 2}}).cpu_nodes() == [
        ("infra-01", "infra"),
        ("infra-02", "infra"),
    ]
    m = gpus.cpu_node_manifest(name="system-01", pool="system")
    labels = m["metadata"]["labels"]
    assert "taints" not in m["spec"]
    assert not any(k.startswith(("nvidia.com/", "feature.node.kubernetes.io/")) for k in labels)
    assert labels["sandbox.fleet.gpufleet.dev/pool"] == "system"
    assert m["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"


def test_health_taints_are_the_drivers() -> None:
    """``healthEventToTaint`` of the NVIDIA DRA driver: one key per event, NoSchedule or None, never NoExecute."""
    assert gpus.health_taint("xid", xid=79) == {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    assert gpus.health_taint("xid", xid=31)["effect"] == "None"  # an application error informs only
    assert gpus.health_taint("gpu-lost") == {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}
    assert gpus.health_taint("unmonitored") == {"key": "gpu.nvidia.com/unmonitored", "effect": "None"}
    with pytest.raises(ValueError, match="needs the XID"):
        gpus.health_taint("xid")
    names = ["gpu-0", "gpu-0-mig-1g10gb-19-0", "gpu-1", "gpu-10"]
    assert gpus.health_devices(names, event="xid", device="gpu-0") == {"gpu-0"}
    assert gpus.health_devices(names, event="unmonitored", device="gpu-0-mig-1g10gb-19-0") == {
        "gpu-0",
        "gpu-0-mig-1g10gb-19-0",
    }
    assert gpus.health_devices(names, event="gpu-lost", device=None) == set(names)


def test_a_health_event_republishes_only_what_changed_and_bumps_the_generation_across_slices() -> None:
    """The kubelet plugin's ResourceSlice controller keeps the pool's generation for one changed slice."""
    one = gpus.slice_manifests(node("h200x8"), node_uid="uid")
    xid = gpus.health_taint("xid", xid=79)
    [body] = gpus.republished(one, devices={"gpu-3"}, taint=xid, key=xid["key"])
    assert body["spec"]["pool"]["generation"] == 1
    [tainted] = [d for d in body["spec"]["devices"] if d.get("taints")]
    assert (tainted["name"], tainted["taints"]) == ("gpu-3", [xid])
    assert gpus.republished([body], devices={"gpu-3"}, taint=xid, key=xid["key"]) == []  # nothing new
    [cleared] = gpus.republished([body], devices={"gpu-3"}, taint=None, key=xid["key"])
    assert not any(d.get("taints") for d in cleared["spec"]["devices"])

    dynamic = gpus.NodeSpec(name="n", ordinal=1, pool="p", model=gpus.MODELS["h100"], gpus=2, mig_strategy="dynamic")
    slices = gpus.slice_manifests(dynamic, node_uid="uid")
    names = [d["name"] for s in slices for d in s["spec"].get("devices") or ()]
    lost = gpus.health_taint("gpu-lost")
    bodies = gpus.republished(slices, devices=set(names), taint=lost, key=lost["key"])
    assert len(bodies) == len(slices) > 2
    assert {b["spec"]["pool"]["generation"] for b in bodies} == {2}
    assert all(d["taints"] == [lost] for b in bodies for d in b["spec"].get("devices") or ())
