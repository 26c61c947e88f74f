"""GPUMaintenance rules: each bad maintenance is refused at its field's line with a hint, on declared and live devices.

The example fleet with gpu-east able to carry a maintenance (1.36, ``resource.k8s.io/v1beta2`` served,
DRADeviceTaintRules on) and one maintenance file more per test. "Live" devices are the fixture slices
of tests/data (the NVIDIA driver's shape) with node labels that the example pools select.
"""

from __future__ import annotations

import copy
from typing import Any

from fleet.inventory import Inventory
from fleet.manifests import Finding, load_revision
from fleet.manifests.maintenances import GPUMaintenance
from fleet.policy import validate
from fleet.policy.satisfiability import Live
from tests.inventory.conftest import fixture_slices, renamed
from tests.manifests.repos import ROOT, example_files, only, position_of, rules

EAST = b"""apiVersion: fleet.gpufleet.dev/v1alpha1
kind: Cluster
metadata:
  name: gpu-east
  labels: {env: prod, region: us-east-1}
spec:
  kubernetesVersion: "1.36"
  context: gpu-east
  apiVersions: [resource.k8s.io/v1beta2]
  featureGates: {DRADeviceTaintRules: true}
"""


def maintenance(name: str, spec: str, *, clusters: str = "clusters: {names: [gpu-east]}") -> bytes:
    """A GPUMaintenance; ``spec`` is written under ``spec:`` (two spaces in), after ``clusters`` (if any)."""
    head = f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: GPUMaintenance\nmetadata: {{name: {name}}}\nspec:\n"
    lines = [f"  {clusters}"] if clusters else []
    lines += ["  reason: a failing GPU"] + ["  " + line for line in spec.strip("\n").splitlines()]
    return (head + "\n".join(lines) + "\n").encode()


def files_with(changes: dict[str, bytes]) -> dict[str, bytes]:
    files = example_files()
    files["clusters/gpu-east.yaml"] = EAST
    files.update(changes)
    return files


def findings(changes: dict[str, bytes], **live: Any) -> list[Finding]:
    return validate(load_revision(files_with(changes)), **live).findings


def of(found: list[Finding], prefix: str = "maintenance") -> list[str]:
    return [f.rule for f in found if f.rule.startswith(prefix) or f.rule.startswith("cel")]


def live_east(*, labels: bool = True) -> dict[str, Any]:
    """``validate``'s arguments for gpu-east's live devices: two H100 nodes, an H200 and an A100 node."""
    slices = fixture_slices("h100-node", "h200-node", "a100-node")
    slices += [renamed(copy.deepcopy(s), "dgx-h100-02") for s in fixture_slices("h100-node")]
    nodes = {
        "dgx-h100-01": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "dgx-h100-02": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "hgx-h200-01": {"node.kubernetes.io/instance-type": "p5en.48xlarge"},
        "dgx-a100-01": {"node.kubernetes.io/instance-type": "p4de.24xlarge"},
    }
    return {
        "clusters": ["gpu-east"],
        "inventories": {"gpu-east": Inventory.from_slices(slices)},
        "sources": {"gpu-east": "live context gpu-east"},
        "live": {"gpu-east": Live(slices=slices, claims=[], nodes=nodes if labels else None)},
    }


def uuid_of(node: str, device: str) -> str:
    inventory = live_east()["inventories"]["gpu-east"]
    found = next(d for d in inventory.devices if d.node == node and d.name == device)
    return str(found.device.get("attributes", "gpu.nvidia.com", "uuid"))


def test_the_example_with_a_maintenance_that_takes_one_node_is_clean() -> None:
    text = maintenance("node", "devices:\n  nodes: [dgx-h100-01]")
    assert of(findings({"maintenance/node.yaml": text}, **live_east())) == []
    assert of(findings({"maintenance/node.yaml": text})) == []  # declared node names are made up: not judged


# -- a selection that takes no device ----------------------------------------------------------------


def test_a_selector_matching_no_declared_device_is_a_warning_at_the_selector() -> None:
    text = maintenance("b200", "devices:\n  selector: device.attributes['gpu.nvidia.com'].productName == 'B200'")
    finding = only(findings({"maintenance/b200.yaml": text}), "maintenance-devices")
    assert finding.severity == "warning"
    assert (finding.location.line, finding.location.col) == position_of(text, "device.attributes")
    assert finding.message == (
        "the maintenance takes no device: the selector is false on every device on the cluster "
        "(devices: declared pools)"
    )
    assert "productName = 'NVIDIA H100 80GB HBM3' (128)" in finding.hint
    assert finding.cluster == "gpu-east"


def test_a_selector_matching_no_live_device_is_an_error() -> None:
    text = maintenance("b200", "devices:\n  selector: device.attributes['gpu.nvidia.com'].productName == 'B200'")
    finding = only(findings({"maintenance/b200.yaml": text}, **live_east()), "maintenance-devices")
    assert finding.severity == "error"
    assert finding.message.endswith("(devices: live context gpu-east)")
    assert "'NVIDIA H100 80GB HBM3' (16)" in finding.hint


def test_the_field_that_leaves_no_device_is_named() -> None:
    text = maintenance("gone", "devices:\n  nodes: [dgx-h100-01]\n  devices: [gpu-9]")
    finding = only(findings({"maintenance/gone.yaml": text}, **live_east()), "maintenance-devices")
    assert finding.location.line == position_of(text, "devices: [gpu-9]")[0]
    assert finding.message.startswith("the maintenance takes no device: no device on node dgx-h100-01 is named gpu-9")
    assert finding.hint.startswith("device names on node dgx-h100-01: gpu-0, gpu-1")


def test_a_node_that_publishes_nothing_is_an_error_when_it_is_all_the_maintenance_names() -> None:
    text = maintenance("gone", "devices:\n  nodes: [dgx-h100-09]")
    finding = only(findings({"maintenance/gone.yaml": text}, **live_east()), "maintenance-devices")
    assert (finding.severity, finding.location.line) == ("error", position_of(text, "nodes:")[0])
    assert "nodes with devices: dgx-a100-01, dgx-h100-01, dgx-h100-02, hgx-h200-01" in finding.hint


def test_a_uuid_no_device_has_is_a_warning_at_its_line_when_others_match() -> None:
    good, typo = uuid_of("dgx-h100-01", "gpu-0"), "GPU-00000000-0000-0000-0000-000000000000"
    text = maintenance("uuids", f"devices:\n  uuids:\n  - {good}\n  - {typo}")
    finding = only(findings({"maintenance/uuids.yaml": text}, **live_east()), "maintenance-devices")
    assert (finding.severity, finding.location.line) == ("warning", position_of(text, typo)[0])
    assert (
        finding.message
        == f"no device has uuid {typo}, so the maintenance does not take it (devices: live context gpu-east)"
    )


def test_the_whole_selection_matching_nothing_is_named_at_spec_devices() -> None:
    h200 = uuid_of("hgx-h200-01", "gpu-0")
    text = maintenance("apart", f"devices:\n  pools: [h100]\n  uuids: [{h200}]")
    finding = only(findings({"maintenance/apart.yaml": text}, **live_east()), "maintenance-devices")
    assert finding.message.startswith("the maintenance takes no device: no device on pool h100 has uuid")
    assert finding.location.line == position_of(text, "uuids:")[0]


# -- CEL -----------------------------------------------------------------------------------------


def test_a_selector_that_does_not_compile_is_a_cel_error_at_its_position() -> None:
    text = maintenance("bad", "devices:\n  selector: device.attributes['gpu.nvidia.com'].productName == ")
    finding = only(findings({"maintenance/bad.yaml": text}), "cel")
    assert finding.location.line == position_of(text, "selector:")[0]
    assert finding.location.col > position_of(text, "device.attributes")[1]
    assert finding.message.startswith("CEL selector does not compile")
    assert "maintenance-devices" not in rules(findings({"maintenance/bad.yaml": text}))


def test_a_selector_reading_an_attribute_no_device_publishes_is_an_error_at_the_attribute() -> None:
    text = maintenance("typo", "devices:\n  selector: device.attributes['gpu.nvidia.com'].prodName == 'x'")
    for live in ({}, live_east()):
        found = findings({"maintenance/typo.yaml": text}, **live)
        finding = only(found, "cel-unknown-attribute")
        assert finding.severity == "error"
        assert (finding.location.line, finding.location.col) == position_of(text, "prodName")
        assert finding.hint.startswith("did you mean productName?")
        assert "maintenance-devices" not in rules(found)


def test_a_removed_attribute_is_reported_once() -> None:
    text = maintenance("bus", "devices:\n  selector: device.attributes['gpu.nvidia.com'].pcieBusID == '0000:1b:00.0'")
    found = findings({"maintenance/bus.yaml": text}, **live_east())
    assert of(found) == ["cel-removed-attribute"]
    assert only(found, "cel-removed-attribute").location.line == position_of(text, "pcieBusID")[0]


# -- a whole pool ------------------------------------------------------------------------------------


def test_taking_every_device_of_the_only_pool_a_template_can_use_is_refused() -> None:
    text = maintenance("h200", "devices:\n  pools: [h200]")
    for live, source in (({}, "declared pools"), (live_east(), "live context gpu-east")):
        finding = only(findings({"maintenance/h200.yaml": text}, **live), "maintenance-full-pool")
        assert finding.location.line == position_of(text, "pools:")[0]
        assert finding.message == (
            "the maintenance takes every device of pool h200, the only devices "
            "ResourceClaimTemplate/inference/hopper-large-memory can be allocated from: their pods stay Pending "
            f"until it ends (devices: {source})"
        )
        assert finding.hint == (
            "leave some devices of h200 in service (name nodes, devices or uuids), or set allowFullPool: true "
            "if team inference can wait for the repair"
        )


def test_a_pool_taken_whole_is_allowed_with_allow_full_pool_or_without_an_effect() -> None:
    for extra in ("allowFullPool: true", "effect: None"):
        text = maintenance("h200", f"devices:\n  pools: [h200]\n{extra}")
        assert "maintenance-full-pool" not in rules(findings({"maintenance/h200.yaml": text}, **live_east()))


def test_a_pool_whose_templates_can_go_elsewhere_may_be_taken_whole() -> None:
    # h200-or-h100 falls back to H100s; hopper-large-memory needs more memory than an H100 has
    text = maintenance("h100", "devices:\n  pools: [h100]")
    found = findings({"maintenance/h100.yaml": text})
    assert "ResourceClaimTemplate/inference/h200-or-h100" not in only(found, "maintenance-full-pool").message
    assert "ResourceClaimTemplate/ml-research/h100-gpu" in only(found, "maintenance-full-pool").message


def test_the_nodes_of_a_whole_pool_count_as_the_pool() -> None:
    text = maintenance("h200", "devices:\n  nodes: [hgx-h200-01]")
    finding = only(findings({"maintenance/h200.yaml": text}, **live_east()), "maintenance-full-pool")
    assert finding.location.line == position_of(text, "devices:")[0]


def test_two_maintenances_that_empty_a_pool_together_are_each_refused_naming_the_other() -> None:
    # each takes one of the two H100 nodes: neither alone empties the pool, together they do
    first = maintenance("a", "devices:\n  nodes: [dgx-h100-01]")
    second = maintenance("b", "devices:\n  nodes: [dgx-h100-02]")
    found = findings({"maintenance/a.yaml": first, "maintenance/b.yaml": second}, **live_east())
    refused = sorted((f for f in found if f.rule == "maintenance-full-pool"), key=lambda f: f.location.file)
    assert [(f.location.file, f.location.line) for f in refused] == [
        ("maintenance/a.yaml", position_of(first, "devices:")[0]),
        ("maintenance/b.yaml", position_of(second, "devices:")[0]),
    ]
    assert refused[0].message.startswith(
        "the maintenance takes every device of pool h100 together with GPUMaintenance 'b' (maintenance/b.yaml), "
        "the only devices ResourceClaimTemplate/ml-research/h100-gpu"
    )
    assert "together with GPUMaintenance 'a' (maintenance/a.yaml)" in refused[1].message
    assert "maintenance-overlap" not in rules(found)


def test_a_pool_emptied_together_is_refused_only_where_allow_full_pool_is_missing() -> None:
    first = maintenance("a", "devices:\n  nodes: [dgx-h100-01]\nallowFullPool: true")
    second = maintenance("b", "devices:\n  nodes: [dgx-h100-02]")
    found = findings({"maintenance/a.yaml": first, "maintenance/b.yaml": second}, **live_east())
    assert only(found, "maintenance-full-pool").location.file == "maintenance/b.yaml"


def test_a_maintenance_at_effect_none_keeps_its_devices_in_scheduling_for_the_others() -> None:
    first = maintenance("a", "devices:\n  nodes: [dgx-h100-01]\neffect: None")
    second = maintenance("b", "devices:\n  nodes: [dgx-h100-02]")
    found = findings({"maintenance/a.yaml": first, "maintenance/b.yaml": second}, **live_east())
    assert "maintenance-full-pool" not in rules(found)


def test_a_pool_one_maintenance_empties_alone_names_no_other() -> None:
    first = maintenance("a", "devices:\n  pools: [h200]")
    second = maintenance("b", "devices:\n  nodes: [dgx-h100-02]")
    found = findings({"maintenance/a.yaml": first, "maintenance/b.yaml": second}, **live_east())
    assert "together with" not in only(found, "maintenance-full-pool").message


def test_pools_are_not_judged_where_the_nodes_labels_are_unknown() -> None:
    text = maintenance("h200", "devices:\n  pools: [h200]")
    assert of(findings({"maintenance/h200.yaml": text}, **live_east(labels=False))) == []


# -- the cluster's API, direct ---------------------------------------------------------------------


def test_a_cluster_without_a_device_taint_rule_api_refuses_the_maintenance() -> None:
    text = maintenance("node", "devices:\n  nodes: [n1]", clusters="clusters: {names: [gpu-west]}")
    finding = only(findings({"maintenance/node.yaml": text}), "maintenance-api")
    assert finding.location.line == position_of(text, "clusters:")[0]
    assert finding.message == (
        "cluster gpu-west (Kubernetes 1.36) has no DeviceTaintRule API for a maintenance: resource.k8s.io/v1beta2 "
        "is not served (spec.apiVersions does not list it) and feature gate DRADeviceTaintRules is off"
    )
    assert finding.hint.startswith("run kube-apiserver with --runtime-config=resource.k8s.io/v1beta2=true")
    assert finding.hint.endswith(
        "of clusters/gpu-west.yaml; or upgrade gpu-west to 1.37, where DeviceTaintRule is served by default"
    )


def test_each_minor_before_the_ga_one_names_its_api_and_gate() -> None:
    text = maintenance("node", "devices:\n  nodes: [n1]")
    alpha = EAST.replace(b'"1.36"', b'"1.35"').replace(b"v1beta2", b"v1alpha3")
    finding = only(findings({"maintenance/node.yaml": text, "clusters/gpu-east.yaml": alpha}), "maintenance-api")
    assert finding.message == (
        "cluster gpu-east (Kubernetes 1.35) has no DeviceTaintRule API for a maintenance: "
        "feature gate DRADeviceTaintRules is off (it needs DRADeviceTaints)"
    )
    assert finding.hint.startswith(
        "run kube-apiserver, kube-scheduler and kube-controller-manager with "
        "--feature-gates=DRADeviceTaints=true,DRADeviceTaintRules=true and declare DRADeviceTaints: true, "
        "DRADeviceTaintRules: true in spec.featureGates of clusters/gpu-east.yaml; or upgrade gpu-east to 1.37"
    )
    both = alpha.replace(b"{DRADeviceTaintRules: true}", b"{DRADeviceTaints: true, DRADeviceTaintRules: true}")
    assert "maintenance-api" not in rules(findings({"maintenance/node.yaml": text, "clusters/gpu-east.yaml": both}))


def test_an_older_minor_has_no_api_for_a_maintenance() -> None:
    text = maintenance("node", "devices:\n  nodes: [n1]")
    east = EAST.replace(b'"1.36"', b'"1.34"').replace(b"v1beta2", b"v1alpha3")
    east = east.replace(b"DRADeviceTaintRules", b"DRADeviceTaints")
    finding = only(findings({"maintenance/node.yaml": text, "clusters/gpu-east.yaml": east}), "maintenance-api")
    assert finding.message == (
        "cluster gpu-east (Kubernetes 1.34) has no DeviceTaintRule fleet can walk: its DeviceTaintRule "
        "(resource.k8s.io/v1alpha3) has no None effect and no eviction preview"
    )
    assert finding.hint == (
        "upgrade gpu-east to 1.37, where DeviceTaintRule is served by default (or to 1.35, 1.36 with its "
        "DeviceTaintRule API served and its gate on)"
    )


def test_a_direct_no_execute_with_nothing_to_hold_it_back_is_refused() -> None:
    text = maintenance("now", "direct: true\ndevices:\n  nodes: [dgx-h100-01]")
    finding = only(findings({"maintenance/now.yaml": text}), "maintenance-direct")
    assert finding.location.line == position_of(text, "direct:")[0]
    assert "cluster gpu-east has no maintenance window and the maintenance sets no disruption" in finding.message
    assert finding.hint.startswith("set spec.disruption (policy: wait or drain) in maintenance/now.yaml")
    window = EAST + b"  maintenance:\n    windows:\n    - {schedule: '0 2 * * 6', duration: 4h}\n"
    for changes in (
        {"maintenance/now.yaml": text + b"  disruption: {policy: drain}\n"},
        {"maintenance/now.yaml": text.replace(b"direct: true", b"direct: true\n  effect: NoSchedule")},
        {"maintenance/now.yaml": text, "clusters/gpu-east.yaml": window},
    ):
        assert "maintenance-direct" not in rules(findings(changes))


# -- drivers -------------------------------------------------------------------------------------------


def with_nics(live: dict[str, Any], *nodes: str) -> dict[str, Any]:
    """``live`` with a NIC driver's pool (named after the node, as NVIDIA's) on each of ``nodes``."""
    from tests.engine.test_maintenances import nic_slice

    slices = [*live["live"]["gpu-east"].slices, *(nic_slice(n, 2) for n in nodes)]
    return {
        **live,
        "inventories": {"gpu-east": Inventory.from_slices(slices)},
        "live": {"gpu-east": Live(slices=slices, claims=[], nodes=live["live"]["gpu-east"].nodes)},
    }


def test_a_driver_that_publishes_nothing_where_the_maintenance_looks_is_refused_at_drivers() -> None:
    text = maintenance("nic", "devices:\n  nodes: [dgx-h100-01]\n  drivers: [dra.net]")
    finding = only(findings({"maintenance/nic.yaml": text}, **live_east()), "maintenance-devices")
    assert finding.location.line == position_of(text, "drivers:")[0]
    assert finding.message == (
        "the maintenance takes no device: no device on node dgx-h100-01 is published by driver dra.net "
        "(devices: live context gpu-east)"
    )
    assert finding.hint == "drivers there: gpu.nvidia.com"
    assert "maintenance-devices" not in rules(
        findings({"maintenance/nic.yaml": text}, **with_nics(live_east(), "dgx-h100-01"))
    )


def test_a_node_of_only_another_drivers_devices_is_named_for_the_maintenances_driver() -> None:
    text = maintenance("nic", "devices:\n  nodes: [dgx-h100-01, nic-only-01]")
    found = findings({"maintenance/nic.yaml": text}, **with_nics(live_east(), "nic-only-01"))
    finding = only(found, "maintenance-devices")
    assert finding.message.startswith(
        "node nic-only-01 publishes no device of driver gpu.nvidia.com, so the maintenance takes none there"
    )


def test_another_drivers_devices_on_a_pools_nodes_do_not_keep_a_gpu_maintenance_from_emptying_it() -> None:
    text = maintenance("h200", "devices:\n  pools: [h200]")
    found = findings({"maintenance/h200.yaml": text}, **with_nics(live_east(), "hgx-h200-01"))
    assert "hopper-large-memory" in only(found, "maintenance-full-pool").message


def test_drivers_are_driver_names_and_at_least_one() -> None:
    long = "a" * 60 + ".com"
    for bad, said in (
        ("[]", "at least 1 item"),
        ("[Gpu.Nvidia.Com]", "'Gpu.Nvidia.Com' is not a DRA driver's name"),
        (f"[{long}]", f"'{long}' is not a DRA driver's name"),
    ):
        text = maintenance("nic", f"devices:\n  nodes: [dgx-h100-01]\n  drivers: {bad}")
        schema = only(findings({"maintenance/nic.yaml": text}), "schema")
        assert schema.location.line == position_of(text, "drivers:")[0]
        assert said in schema.message, schema.message
        if "DRA driver" in said:
            assert schema.hint.startswith("write it as the driver's ResourceSlices name it, e.g. gpu.nvidia.com")


# -- two maintenances ------------------------------------------------------------------------------


def test_two_maintenances_taking_a_same_device_are_refused_naming_both_files() -> None:
    first = maintenance("a", "devices:\n  nodes: [dgx-h100-01]")
    second = maintenance("b", "devices:\n  nodes: [dgx-h100-01]\n  devices: [gpu-0, gpu-1]")
    found = findings({"maintenance/a.yaml": first, "maintenance/b.yaml": second}, **live_east())
    finding = only(found, "maintenance-overlap")
    assert (finding.location.file, finding.location.line) == ("maintenance/b.yaml", position_of(second, "devices:")[0])
    assert finding.message == (
        "GPUMaintenance 'b' (maintenance/b.yaml) and 'a' (maintenance/a.yaml) both take 2 device(s): "
        "dgx-h100-01/gpu-0, dgx-h100-01/gpu-1 (devices: live context gpu-east)"
    )


def test_maintenances_overlap_on_declared_devices_too() -> None:
    first = maintenance("a", "devices:\n  pools: [h100]\nallowFullPool: true")
    second = maintenance("b", "devices:\n  selector: device.attributes['gpu.nvidia.com'].productName.contains('H100')")
    found = findings({"maintenance/a.yaml": first, "maintenance/b.yaml": second})
    assert "(devices: declared pools)" in only(found, "maintenance-overlap").message


# -- bad input the model or the layout refuses -----------------------------------------------------


def test_a_bad_uuid_is_refused_at_its_line_and_the_rest_is_not_judged() -> None:
    text = maintenance("bad", "devices:\n  pools: [h200]\n  uuids:\n  - GPU-0\n  - MIG-nope")
    found = findings({"maintenance/bad.yaml": text})
    schema = [f for f in found if f.rule == "schema"]
    assert [(f.location.line, f.message) for f in schema] == [
        (position_of(text, "GPU-0")[0], "spec.devices.uuids[0]: 'GPU-0' is not a GPU or MIG uuid"),
        (position_of(text, "MIG-nope")[0], "spec.devices.uuids[1]: 'MIG-nope' is not a GPU or MIG uuid"),
    ]
    assert schema[0].hint.startswith("copy it from `nvidia-smi -L` or `fleetctl inventory -o json`")
    assert "maintenance-full-pool" not in rules(found)  # what is left of it is not what was written


def test_an_unknown_pool_is_refused_with_the_known_pools() -> None:
    text = maintenance("typo", "devices:\n  pools: [h10]")
    found = findings({"maintenance/typo.yaml": text})
    finding = only(found, "maintenance-pool")
    assert (finding.location.line, finding.location.col) == position_of(text, "h10]")
    assert finding.hint == "did you mean 'h100'? known pools: a100, a100-mig, h100, h200"
    assert "maintenance-devices" not in rules(found)


def test_a_maintenance_in_a_team_folder_is_refused() -> None:
    text = maintenance("mine", "devices:\n  nodes: [n1]")
    finding = only(findings({"teams/ml-research/mine.yaml": text}), "team-kind")
    assert finding.hint.endswith(
        "move it to maintenance/ (spec.clusters says which clusters) or clusters/<cluster>/maintenance/ (that cluster)"
    )


def test_a_maintenance_elsewhere_is_refused() -> None:
    text = maintenance("mine", "devices:\n  nodes: [n1]")
    for path in ("pools/mine.yaml", "clusters/gpu-east/mine.yaml", "maintenance.yaml"):
        finding = only(findings({path: text}), "maintenance-location")
        assert (finding.location.file, finding.location.line) == (path, 1)


def test_a_cluster_folder_is_for_its_cluster_alone() -> None:
    text = maintenance("mine", "devices:\n  nodes: [n1]", clusters="clusters: {names: [gpu-west]}")
    finding = only(findings({"clusters/gpu-east/maintenance/mine.yaml": text}), "maintenance-location")
    assert (finding.location.line, finding.location.col) == position_of(text, "gpu-west")
    assert finding.message == (
        "a file in clusters/gpu-east/maintenance/ is for cluster 'gpu-east' alone, but its spec.clusters names "
        "'gpu-west'"
    )
    labels = maintenance("mine", "devices:\n  nodes: [n1]", clusters="clusters: {matchLabels: {env: staging}}")
    assert (
        "does not select 'gpu-east'"
        in only(findings({"clusters/gpu-east/maintenance/mine.yaml": labels}), "maintenance-location").message
    )
    alone = maintenance("mine", "devices:\n  nodes: [dgx-h100-01]", clusters="")
    assert of(findings({"clusters/gpu-east/maintenance/mine.yaml": alone}, **live_east())) == []


def test_a_cluster_folder_naming_no_cluster_is_refused() -> None:
    text = maintenance("mine", "devices:\n  nodes: [n1]", clusters="")
    finding = only(findings({"clusters/gpu-north/maintenance/mine.yaml": text}), "maintenance-location")
    assert (
        finding.message
        == "clusters/gpu-north/maintenance/ is the folder of cluster 'gpu-north', but there is no such Cluster"
    )
    assert finding.hint.startswith("known clusters: gpu-east, gpu-west;")


def test_spec_clusters_names_clusters_that_exist_and_select_one() -> None:
    unknown = maintenance("m", "devices:\n  nodes: [n1]", clusters="clusters: {names: [gpu-nort]}")
    finding = only(findings({"maintenance/m.yaml": unknown}), "cluster-reference")
    assert (finding.location.line, finding.hint) == (
        position_of(unknown, "gpu-nort")[0],
        "known clusters: gpu-east, gpu-west",
    )
    none = maintenance("m", "devices:\n  nodes: [n1]", clusters="clusters: {matchLabels: {env: dev}}")
    finding = only(findings({"maintenance/m.yaml": none}), "cluster-reference")
    assert (finding.severity, finding.message) == (
        "warning",
        "GPUMaintenance 'm' selects no cluster, so it is never applied",
    )


def test_a_deadline_is_an_rfc_3339_time_with_a_zone() -> None:
    good = maintenance("m", 'devices:\n  nodes: [n1]\ndeadline: "2026-12-12T06:00:00+01:00"')
    revision = load_revision(files_with({"maintenance/m.yaml": good}))
    assert revision.findings == ()
    [model] = [m.model for m in revision.manifests if isinstance(m.model, GPUMaintenance)]
    assert isinstance(model, GPUMaintenance) and str(model.spec.deadline) == "2026-12-12 06:00:00+01:00"
    for value, message in (
        ('"tomorrow"', "spec.deadline: 'tomorrow' is not an RFC 3339 time"),
        ('"2026-12-12T06:00:00"', "spec.deadline: deadline has no time zone"),
    ):
        text = maintenance("m", f"devices:\n  nodes: [n1]\ndeadline: {value}")
        finding = only(load_revision(files_with({"maintenance/m.yaml": text})).findings, "schema")
        assert (finding.location.line, finding.message) == (position_of(text, "deadline:")[0], message)
        assert "2026-12-12T06:00:00Z" in finding.hint


def test_the_documented_maintenance_is_valid() -> None:
    text = (ROOT / "docs" / "maintenance.md").read_text()
    start = text.index("```yaml\n") + len("```yaml\n")
    example = text[start : text.index("```\n", start)]
    assert "kind: GPUMaintenance" in example
    path = "clusters/gpu-east/maintenance/hbm-repair.yaml"
    assert validate(load_revision(files_with({path: example.encode()}))).findings == []


def test_a_maintenance_rule_follows_the_fleets_drift_policy_for_device_taint_rules() -> None:
    from fleet.engine import maintenances as engine_maintenances
    from fleet.engine import renders
    from fleet.engine.maintenances import Target
    from fleet.manifests import resolve

    files = files_with({"maintenance/m.yaml": maintenance("m", "devices: {nodes: [h100-01]}")})
    fleet = files["fleet.yaml"].decode()
    files["fleet.yaml"] = fleet.replace(
        "  defaults:\n", "  defaults:\n    driftPolicyByKind: {DeviceTaintRule: report}\n", 1
    ).encode()
    assert "DeviceTaintRule: report" in files["fleet.yaml"].decode(), "the example's fleet.yaml has defaults"
    plan = renders.plan(resolve(load_revision(files), cluster="gpu-east"), revision="r")
    [rule] = plan.maintenances
    assert rule.drift == "report"
    target = Target("gpu.nvidia.com", "h100-01", "", "h100-01", ())
    [desired] = engine_maintenances.desired(rule, [target], live_rules={}, cluster="gpu-east", revision="r")
    assert desired.drift == "report"
