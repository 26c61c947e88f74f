"""Per-cluster Kubernetes versions and feature gates: which DRA fields a cluster keeps.

The expected defaults are transcribed by hand from Kubernetes v1.37.2
``pkg/features/kube_features.go`` (independently of ``fleet.policy.featuregates``): a
change to the table that does not match Kubernetes fails here, and so does a row of
docs/repo-format.md's table that does not say what the table says.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from fleet.manifests import Finding, load_revision
from fleet.policy import check, featuregates, gateprobes
from tests.manifests.repos import ROOT, example_files, only, template, yaml

ON, OFF, ABSENT = True, False, None
KUBERNETES = {
    # gate: (1.34, 1.35, 1.36, 1.37)
    "DynamicResourceAllocation": (ON, ON, ON, ON),
    "DRAPrioritizedList": (ON, ON, ON, ON),
    "DRAAdminAccess": (ON, ON, ON, ON),
    "DRADeviceTaints": (OFF, OFF, ON, ON),
    "DRADeviceTaintRules": (ABSENT, OFF, OFF, ON),
    "DRAPartitionableDevices": (OFF, OFF, ON, ON),
    "DRAConsumableCapacity": (OFF, OFF, ON, ON),
    "DRAResourceClaimDeviceStatus": (ON, ON, ON, ON),
    "DRADeviceBindingConditions": (OFF, OFF, ON, ON),
    "DRAExtendedResource": (OFF, OFF, ON, ON),
    "DRASchedulerFilterTimeout": (ON, ON, ON, ON),
    "DRAResourceClaimGranularStatusAuthorization": (ABSENT, ABSENT, ON, ON),
    "DRAListTypeAttributes": (ABSENT, ABSENT, OFF, OFF),
    "DRANodeAllocatableResources": (ABSENT, ABSENT, OFF, OFF),
    "DRAResourcePoolStatus": (ABSENT, ABSENT, OFF, OFF),
    "DRAWorkloadResourceClaims": (ABSENT, ABSENT, OFF, OFF),
    "DRADerivedAttributes": (ABSENT, ABSENT, ABSENT, OFF),
    "DRADeviceCompatibilityGroups": (ABSENT, ABSENT, ABSENT, OFF),
    "DRAFractionalCapacityRange": (ABSENT, ABSENT, ABSENT, OFF),
    "DRAOptionalNodeOperations": (ABSENT, ABSENT, ABSENT, OFF),
    "DRAPartitionableDevicesType": (ABSENT, ABSENT, ABSENT, OFF),
    "ResourceHealthStatus": (OFF, OFF, ON, ON),
    "ResourceHealthStatusMessage": (ABSENT, ABSENT, ON, ON),
    "GenericWorkload": (ABSENT, OFF, OFF, OFF),
    "NodeDeclaredFeatures": (ABSENT, OFF, ON, ON),
}
LOCKED = {
    ("DynamicResourceAllocation", 35),
    ("DynamicResourceAllocation", 36),
    ("DynamicResourceAllocation", 37),
    ("DRAAdminAccess", 36),
    ("DRAAdminAccess", 37),
    ("DRAPrioritizedList", 37),
    ("DRAExtendedResource", 37),
    ("DRAResourceClaimDeviceStatus", 37),
    ("NodeDeclaredFeatures", 37),
}
GA = {  # (gate, first GA minor)
    "DynamicResourceAllocation": 34,
    "DRAPrioritizedList": 36,
    "DRAAdminAccess": 36,
    "DRADeviceTaints": 37,
    "DRADeviceTaintRules": 37,
    "DRAExtendedResource": 37,
    "DRAResourceClaimDeviceStatus": 37,
    "NodeDeclaredFeatures": 37,
}


@pytest.mark.parametrize("gate", sorted(KUBERNETES))
@pytest.mark.parametrize("minor", featuregates.MINORS)
def test_table_matches_kubernetes_defaults(gate: str, minor: int) -> None:
    expected = KUBERNETES[gate][featuregates.MINORS.index(minor)]
    spec = featuregates.GATES[gate].spec(minor)
    assert (spec.default if spec else None) == expected
    assert (spec is not None and spec.locked) == ((gate, minor) in LOCKED)
    assert (spec is not None and spec.stage == "GA") == (gate in GA and minor >= GA[gate])
    assert (gate in featuregates.effective(minor, {})) == bool(expected)


def test_table_covers_the_dra_gates_and_names_the_first_default_on_minor() -> None:
    assert set(featuregates.GATES) == set(KUBERNETES)
    firsts = {g: featuregates.GATES[g].first_default_on() for g in KUBERNETES}
    assert firsts["DRAExtendedResource"] == firsts["DRADeviceTaints"] == firsts["DRAPartitionableDevices"] == 36
    assert firsts["DRAPrioritizedList"] == 34
    assert firsts["DRADeviceTaintRules"] == 37
    assert firsts["DRADerivedAttributes"] is None
    assert {f.gate for f in featuregates.FIELDS} <= set(featuregates.GATES)
    assert featuregates.MINORS == (34, 35, 36, 37)


def test_dependencies_are_kubernetes_own() -> None:
    """``defaultKubernetesFeatureGateDependencies`` of v1.37.2, for the gates whose dependencies are not just
    DynamicResourceAllocation."""
    depends = {name: set(gate.depends) for name, gate in featuregates.GATES.items()}
    assert depends["DRADeviceTaintRules"] == {"DRADeviceTaints"}
    assert depends["DRAFractionalCapacityRange"] == {"DRAConsumableCapacity"}
    assert depends["DRADeviceCompatibilityGroups"] == {"DynamicResourceAllocation", "DRAPartitionableDevices"}
    assert depends["DRAPartitionableDevicesType"] == {
        "DynamicResourceAllocation",
        "DRAPartitionableDevices",
        "DRAResourcePoolStatus",
    }
    assert depends["DRAOptionalNodeOperations"] == {"DynamicResourceAllocation", "NodeDeclaredFeatures"}
    assert depends["DRAWorkloadResourceClaims"] == {"DynamicResourceAllocation", "GenericWorkload"}
    assert depends["ResourceHealthStatusMessage"] == {"ResourceHealthStatus"}
    assert depends["DRAResourceClaimDeviceStatus"] == depends["GenericWorkload"] == set()
    # a new alpha gate can be turned on where its dependencies are (NodeDeclaredFeatures is GA in 1.37)
    assert "DRAOptionalNodeOperations" in featuregates.effective(37, {"DRAOptionalNodeOperations": True})
    assert "DRAWorkloadResourceClaims" not in featuregates.effective(37, {"DRAWorkloadResourceClaims": True})
    both = {"DRAWorkloadResourceClaims": True, "GenericWorkload": True}
    assert "DRAWorkloadResourceClaims" in featuregates.effective(37, both)


SYMBOL = {"alpha": "\u03b1", "beta": "\u03b2", "GA": "GA"}
ON_SIGN, OFF_SIGN = "\u2713", "\u2013"  # the table's check mark and en dash


def docs_table() -> list[list[str]]:
    text = (ROOT / "docs" / "repo-format.md").read_text()
    section = text[text.index("### DRA fields per Kubernetes version and feature gate") :].splitlines()
    first = next(i for i, line in enumerate(section) if line.startswith("|"))
    lines = list(itertools.takewhile(lambda line: line.startswith("|"), section[first:]))
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["field", "gate", *(f"1.{m}" for m in featuregates.MINORS)]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_the_documented_table_says_what_the_code_does() -> None:
    rows = docs_table()
    documented = set()
    for field, gates, *cells in rows:
        gate = gates.split()[0]
        documented.add(gate)
        for minor, cell in zip(featuregates.MINORS, cells, strict=True):
            if gate == "DRADeviceTaintRules" and minor == 34:
                assert cell == f"{SYMBOL['alpha']} {OFF_SIGN}", field  # 1.34's rules come with DRADeviceTaints
                continue
            spec = featuregates.GATES[gate].spec(minor)
            if spec is None:
                assert cell == "·", (field, minor)
                continue
            expected = f"{SYMBOL[spec.stage]} {ON_SIGN if spec.default else OFF_SIGN}"
            assert cell in (expected, f"{expected} (locked)"), (field, minor, cell)
            assert cell.endswith("(locked)") == (spec.locked and spec.stage == "GA" and minor > 34), (field, minor)
    assert {f.gate for f in featuregates.FIELDS} == documented


def test_a_gate_is_off_when_its_dependency_is_off() -> None:
    assert "DRADeviceBindingConditions" not in featuregates.effective(36, {"DRAResourceClaimDeviceStatus": False})
    assert "DRADeviceTaintRules" in featuregates.effective(36, {"DRADeviceTaintRules": True})
    assert "DRADeviceTaintRules" not in featuregates.effective(
        36, {"DRADeviceTaintRules": True, "DRADeviceTaints": False}
    )
    # locked gates keep their default whatever is declared
    assert "DRAAdminAccess" in featuregates.effective(36, {"DRAAdminAccess": False})
    assert "DRAAdminAccess" not in featuregates.effective(35, {"DRAAdminAccess": False})


def cluster(version: str, gates: str = "", *, name: str = "gpu-west", api_versions: str = "") -> bytes:
    text = example_files()[f"clusters/{name}.yaml"].replace(b'"1.36"', f'"{version}"'.encode())
    if gates:
        text += f"  featureGates: {gates}\n".encode()
    if api_versions:
        text += f"  apiVersions: {api_versions}\n".encode()
    return text


WITHOUT_EXTENDED_NAME = {
    "deviceclasses/gpu.nvidia.com.yaml": example_files()["deviceclasses/gpu.nvidia.com.yaml"].replace(
        b"  extendedResourceName: nvidia.com/gpu\n", b""
    )
}


def findings_with(changes: dict[str, bytes]) -> list[Finding]:
    """The example, without its DeviceClass's extendedResourceName unless ``changes`` puts it back."""
    files = example_files() | WITHOUT_EXTENDED_NAME | changes
    return check(load_revision(files))


def gate_findings(changes: dict[str, bytes]) -> list[Finding]:
    return [f for f in findings_with(changes) if f.rule == featuregates.RULE]


FIRST_AVAILABLE = yaml("""
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: t, namespace: ml-research}
    spec:
      spec:
        devices:
          requests:
          - name: gpu
            firstAvailable:
            - {name: h200, deviceClassName: gpu.nvidia.com}
            - {name: mig, deviceClassName: mig.nvidia.com}
""")
DISTINCT = template(request="count: 2") + b"      constraints:\n      - distinctAttribute: gpu.nvidia.com/uuid\n"
DERIVED = (
    template(
        request="count: 2\nderivedAttributes:\n"
        "- {name: derived/numa, expression: \"device.attributes['resource.kubernetes.io'].numaNode\"}"
    )
    + b"      constraints:\n      - matchAttribute: derived/numa\n"
)

# (gate, file, content, the field's line)
USES = {
    "tolerations": (
        "DRADeviceTaints",
        "teams/ml-research/t.yaml",
        template(request="tolerations:\n- {key: gpu.nvidia.com/xid, operator: Exists}"),
        13,
    ),
    "capacity": (
        "DRAConsumableCapacity",
        "teams/ml-research/t.yaml",
        template(request="capacity:\n  requests:\n    memory: 10Gi"),
        13,
    ),
    "distinctAttribute": ("DRAConsumableCapacity", "teams/ml-research/t.yaml", DISTINCT, 15),
    "extendedResourceName": (
        "DRAExtendedResource",
        "deviceclasses/gpu.nvidia.com.yaml",
        example_files()["deviceclasses/gpu.nvidia.com.yaml"],
        17,
    ),
    "firstAvailable": ("DRAPrioritizedList", "teams/ml-research/t.yaml", FIRST_AVAILABLE, 10),
    "derivedAttributes": ("DRADerivedAttributes", "teams/ml-research/t.yaml", DERIVED, 14),
}


@pytest.mark.parametrize("field", sorted(USES))
@pytest.mark.parametrize("minor", featuregates.MINORS)
def test_a_field_is_refused_exactly_where_its_gate_is_off_by_default(field: str, minor: int) -> None:
    gate, file, content, line = USES[field]
    found = gate_findings({"clusters/gpu-west.yaml": cluster(f"1.{minor}"), file: content})
    if KUBERNETES[gate][featuregates.MINORS.index(minor)]:
        assert found == []
        return
    finding = only([f for f in found if f.cluster in ("", "gpu-west")], featuregates.RULE)
    assert (finding.location.file, finding.location.line) == (file, line)
    first = featuregates.GATES[gate].first_default_on()
    assert gate in finding.message and f"cluster gpu-west (Kubernetes 1.{minor})" in finding.message
    if first is None:
        assert "not on by default in any minor through 1.37" in finding.message and "upgrade" not in finding.hint
    else:
        assert f"on by default from 1.{first}" in finding.message
        assert f"upgrade gpu-west to 1.{first}" in finding.hint
    assert f"declare {gate}: true in spec.featureGates of clusters/gpu-west.yaml" in finding.hint


def test_message_and_hint_in_full() -> None:
    found = gate_findings(
        {"clusters/gpu-west.yaml": cluster("1.35"), "teams/ml-research/t.yaml": USES["tolerations"][2]}
    )
    [finding] = found
    assert finding.message == (
        "request 'gpu' tolerations needs feature gate DRADeviceTaints: cluster gpu-west (Kubernetes 1.35) drops it "
        "without an error, because DRADeviceTaints is alpha and off by default in 1.35 (on by default from 1.36)"
    )
    assert finding.hint == (
        "upgrade gpu-west to 1.36 or later; or, if its kube-apiserver, kube-scheduler and kube-controller-manager "
        "run with --feature-gates=DRADeviceTaints=true, declare DRADeviceTaints: true in spec.featureGates of "
        "clusters/gpu-west.yaml; or drop the field on this cluster with an overlay (null)"
    )
    assert finding.object == "ResourceClaimTemplate/ml-research/t"


def test_an_enabled_gate_lets_the_field_through_and_a_disabled_one_refuses_it() -> None:
    tolerations = USES["tolerations"][2]
    on = {"clusters/gpu-west.yaml": cluster("1.35", "{DRADeviceTaints: true}"), "teams/ml-research/t.yaml": tolerations}
    assert gate_findings(on) == []
    off = {
        "clusters/gpu-west.yaml": cluster("1.36", "{DRADeviceTaints: false}"),
        "teams/ml-research/t.yaml": tolerations,
    }
    finding = only(gate_findings(off), featuregates.RULE)
    assert "DRADeviceTaints is off there (spec.featureGates; on by default from 1.36)" in finding.message


def test_a_team_template_is_checked_against_every_cluster_it_deploys_to() -> None:
    """ml-research deploys everywhere, inference only to env=prod (gpu-east): gpu-west at 1.35 refuses
    ml-research's tolerations and not inference's."""
    tolerations = "tolerations:\n- {key: gpu.nvidia.com/xid, operator: Exists}"
    found = gate_findings(
        {
            "clusters/gpu-west.yaml": cluster("1.35"),
            "teams/ml-research/t.yaml": template(request=tolerations),
            "teams/inference/t.yaml": template(namespace="inference", request=tolerations),
        }
    )
    [finding] = found
    assert finding.location.file == "teams/ml-research/t.yaml"
    assert "cluster gpu-west" in finding.message


def test_team_admin_access_needs_its_gate() -> None:
    team = example_files()["teams/ml-research/team.yaml"] + b"  adminAccess: true\n"
    off = cluster("1.35", "{DRAAdminAccess: false}")
    finding = only(gate_findings({"clusters/gpu-west.yaml": off, "teams/ml-research/team.yaml": team}), "feature-gate")
    assert finding.location.file == "teams/ml-research/team.yaml"
    assert "adminAccess needs feature gate DRAAdminAccess" in finding.message


def test_gate_settings_the_components_refuse() -> None:
    locked = only(gate_findings({"clusters/gpu-west.yaml": cluster("1.36", "{DRAAdminAccess: false}")}), "feature-gate")
    assert locked.message.startswith("DRAAdminAccess is GA and locked on in 1.36")
    assert (locked.location.file, locked.location.line) == ("clusters/gpu-west.yaml", 12)
    absent = only(
        gate_findings({"clusters/gpu-west.yaml": cluster("1.35", "{DRAListTypeAttributes: true}")}), "feature-gate"
    )
    assert absent.message.startswith("DRAListTypeAttributes does not exist in Kubernetes 1.35")
    dependency = gate_findings(
        {"clusters/gpu-west.yaml": cluster("1.36", "{DRADeviceTaintRules: true, DRADeviceTaints: false}")}
    )
    assert [f.message.split(":")[0] for f in dependency] == [
        "DRADeviceTaintRules depends on DRADeviceTaints, which is off in 1.36 here"
    ]
    unknown = only(findings_with({"clusters/gpu-west.yaml": cluster("1.36", "{SomethingElse: true}")}), "feature-gate")
    assert unknown.severity == "warning"


def test_turning_off_what_a_default_on_gate_depends_on_stops_the_components() -> None:
    """component-base's ``SetFromMap`` checks the dependencies of every enabled gate, defaults included."""
    [taints] = gate_findings({"clusters/gpu-west.yaml": cluster("1.37", "{DRADeviceTaints: false}")})
    assert taints.message == (
        "DRADeviceTaintRules is on by default in 1.37 and depends on DRADeviceTaints: the components refuse to "
        "start with DRADeviceTaints off and DRADeviceTaintRules on"
    )
    assert taints.hint == "set DRADeviceTaintRules: false as well, or remove DRADeviceTaints"
    assert (taints.location.file, taints.location.line) == ("clusters/gpu-west.yaml", 12)
    both = "{DRADeviceTaints: false, DRADeviceTaintRules: false}"
    assert gate_findings({"clusters/gpu-west.yaml": cluster("1.37", both)}) == []
    assert gate_findings({"clusters/gpu-west.yaml": cluster("1.36", "{DRADeviceTaints: false}")}) == []
    status = gate_findings({"clusters/gpu-west.yaml": cluster("1.36", "{DRAResourceClaimDeviceStatus: false}")})
    assert [f.message.split(" is on by default")[0] for f in status] == [
        "DRADeviceBindingConditions",
        "DRAResourceClaimGranularStatusAuthorization",
    ]


def test_a_newer_minor_is_checked_with_the_newest_gates_and_warned_about() -> None:
    assert [f for f in findings_with({"clusters/gpu-west.yaml": cluster("1.37")}) if f.rule == "cluster-version"] == []
    found = findings_with({"clusters/gpu-west.yaml": cluster("1.38")})
    finding = only(found, "cluster-version")
    assert finding.severity == "warning" and "1.38 is checked with the gates of 1.37" in finding.message


def taint_rule_findings(version: str, api_version: str, gates: str = "", apis: str = "") -> list[str]:
    """featuregates.check on a DeviceTaintRule (the loader has no model for the kind: the rule works on
    any manifest of that kind, so it is built from a stand-in document and renamed)."""
    files = example_files() | {
        "clusters/gpu-west.yaml": cluster(version, gates, api_versions=apis),
        "deviceclasses/xid.yaml": yaml("""
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: xid-gpu-0}
        """),
    }
    revision = load_revision(files)
    [west] = [m for m in revision.manifests if m.kind == "Cluster" and m.name == "gpu-west"]
    [stand_in] = [m for m in revision.manifests if m.kind == "ConfigMap"]
    rule = dataclasses.replace(stand_in, api_version=f"resource.k8s.io/{api_version}", kind="DeviceTaintRule")
    return [f.message for f in featuregates.check([rule], features=featuregates.declared(west))]


def test_device_taint_rules_need_the_gate_and_the_api_version_the_scheduler_reads() -> None:
    [gate] = taint_rule_findings("1.36", "v1beta2", apis="[resource.k8s.io/v1beta2]")
    assert gate.startswith("DeviceTaintRule needs feature gate DRADeviceTaintRules")
    assert "beta and off by default in 1.36 (on by default from 1.37)" in gate
    [api] = taint_rule_findings("1.36", "v1beta2", "{DRADeviceTaintRules: true}")
    assert api.startswith("DeviceTaintRule on cluster gpu-west (Kubernetes 1.36) needs resource.k8s.io/v1beta2 served")
    assert taint_rule_findings("1.36", "v1beta2", "{DRADeviceTaintRules: true}", "[resource.k8s.io/v1beta2]") == []
    [needs] = taint_rule_findings("1.35", "v1alpha3", "{DRADeviceTaintRules: true}", "[resource.k8s.io/v1alpha3]")
    assert "because DRADeviceTaintRules needs DRADeviceTaints, which is off there" in needs
    both = "{DRADeviceTaintRules: true, DRADeviceTaints: true}"
    assert taint_rule_findings("1.35", "v1alpha3", both, "[resource.k8s.io/v1alpha3]") == []
    [old] = taint_rule_findings("1.35", "v1beta2", both, "[resource.k8s.io/v1alpha3]")
    assert old == "cluster gpu-west (Kubernetes 1.35) has no DeviceTaintRule in resource.k8s.io/v1beta2"
    [v134] = taint_rule_findings("1.34", "v1alpha3", apis="[resource.k8s.io/v1alpha3]")
    assert v134.startswith("DeviceTaintRule needs feature gate DRADeviceTaints")
    [reader] = taint_rule_findings("1.36", "v1alpha3", "{DRADeviceTaintRules: true}", "[resource.k8s.io/v1alpha3]")
    assert "needs resource.k8s.io/v1beta2 served (its scheduler reads the rules through it;" in reader


def test_device_taint_rules_in_1_37_are_ga_and_served_in_v1() -> None:
    assert taint_rule_findings("1.37", "v1") == []
    [older] = taint_rule_findings("1.37", "v1beta2")
    assert older.startswith(
        "DeviceTaintRule on cluster gpu-west (Kubernetes 1.37) needs resource.k8s.io/v1beta2 served"
    )
    assert taint_rule_findings("1.37", "v1beta2", apis="[resource.k8s.io/v1beta2]") == []
    [off] = taint_rule_findings("1.37", "v1", "{DRADeviceTaintRules: false}")
    assert "DRADeviceTaintRules is off there (spec.featureGates; on by default from 1.37)" in off
    [needs] = taint_rule_findings("1.37", "v1", "{DRADeviceTaints: false}")
    assert "because DRADeviceTaintRules needs DRADeviceTaints, which is off there" in needs
    [none] = taint_rule_findings("1.37", "v1beta1")
    assert none == "cluster gpu-west (Kubernetes 1.37) has no DeviceTaintRule in resource.k8s.io/v1beta1"


def test_a_probe_reads_a_kept_field_as_on_and_a_dropped_one_as_off() -> None:
    probe = next(p for p in gateprobes.PROBES if p.gate == "DRAExtendedResource")
    assert gateprobes.kept(probe.body, probe.path)  # the body itself carries the field
    dropped = {**probe.body, "spec": {}}
    assert not gateprobes.kept(dropped, probe.path)
    assert not gateprobes.kept({"spec": {"devices": []}}, ("spec", "devices", 0, "bindingConditions"))


def test_what_a_cluster_shows_replaces_what_it_declares() -> None:
    revision = load_revision(example_files() | {"clusters/gpu-west.yaml": cluster("1.35", "{DRADeviceTaints: true}")})
    [west] = [m for m in revision.manifests if m.kind == "Cluster" and m.name == "gpu-west"]
    declared = featuregates.declared(west)
    assert declared is not None and "DRAExtendedResource" not in declared.enabled
    seen = gateprobes.observed(
        declared,
        minor=36,
        served=frozenset({"resource.k8s.io/v1"}),
        seen={"DRAExtendedResource": True, "DRAConsumableCapacity": False, "DRAPrioritizedList": None},
        source="live context west",
    )
    assert (seen.minor, seen.declared_minor, seen.source) == (36, 35, "live context west")
    assert "DRAExtendedResource" in seen.enabled  # seen on
    assert "DRAConsumableCapacity" not in seen.enabled  # seen off, though on by default in 1.36
    assert "DRAPrioritizedList" in seen.enabled  # the probe could not tell: the 1.36 default
    assert "DRADeviceTaints" in seen.enabled  # not probed here: declared
    assert seen.apis == frozenset({"resource.k8s.io/v1"})
