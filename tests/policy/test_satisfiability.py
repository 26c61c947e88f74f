"""Inventory findings are placed at the claim's (or its DeviceClass's) YAML line."""

from __future__ import annotations

from fleet.inventory.findings import Finding as InventoryFinding
from fleet.manifests import Manifest, load_revision
from fleet.policy import validate
from fleet.policy.satisfiability import located
from tests.manifests.repos import example_files, position_of, template, yaml

CLAIM = yaml("""
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: pair, namespace: ml-research}
    spec:
      spec:
        devices:
          requests:
          - name: gpu
            exactly:
              deviceClassName: gpu.nvidia.com
              selectors:
              - cel:
                  expression: |
                    device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H300'
          - name: mig
            firstAvailable:
            - {name: big, deviceClassName: mig.nvidia.com}
          constraints:
          - {requests: [mig], matchAttribute: gpu.nvidia.com/parentUUID}
""")


def manifests() -> tuple[Manifest, dict[str, Manifest]]:
    files = example_files()
    files["teams/ml-research/pair.yaml"] = CLAIM
    revision = load_revision(files)
    claim = next(m for m in revision.manifests if m.name == "pair")
    return claim, {m.name: m for m in revision.of_kind("DeviceClass")}


def test_request_selector_finding_points_inside_the_expression() -> None:
    claim, classes = manifests()
    found = InventoryFinding(
        "claim-unsatisfiable",
        "no device has productName 'NVIDIA H300'",
        hint="present: 'NVIDIA H100 80GB HBM3'",
        request="gpu",
        request_index=0,
        source="request",
        selector_index=0,
        line=1,
        column=37,
    )
    finding = located(found, claim=claim, classes=classes, cluster="gpu-east")
    assert finding is not None
    assert (finding.location.line, finding.location.col) == position_of(CLAIM, "productName == 'NVIDIA H300'")
    assert (finding.rule, finding.cluster, finding.object) == (
        "claim-unsatisfiable",
        "gpu-east",
        "ResourceClaimTemplate/ml-research/pair",
    )


def test_class_selector_finding_points_at_the_device_class_file() -> None:
    claim, classes = manifests()
    found = InventoryFinding(
        "cel-runtime-error",
        "no such key: type",
        source="class",
        device_class="mig.nvidia.com",
        request_index=1,
        subrequest_index=0,
        selector_index=0,
    )
    finding = located(found, claim=claim, classes=classes, cluster="gpu-west")
    assert finding is not None
    assert str(finding.location) == "deviceclasses/mig.nvidia.com.yaml:13:20"  # where the selector text starts


def test_first_available_and_constraint_findings() -> None:
    claim, classes = manifests()
    sub = located(
        InventoryFinding("claim-unsatisfiable", "x", request_index=1, subrequest_index=0, source="request"),
        claim=claim,
        classes=classes,
        cluster="c",
    )
    constraint = located(
        InventoryFinding("claim-unsatisfiable", "y", source="constraint", constraint_index=0),
        claim=claim,
        classes=classes,
        cluster="c",
    )
    assert sub is not None and constraint is not None
    assert sub.location.line == position_of(CLAIM, "{name: big")[0]
    assert constraint.location.line == position_of(CLAIM, "{requests: [mig]")[0]


def test_duplicates_of_static_rules_are_dropped() -> None:
    claim, classes = manifests()
    assert located(InventoryFinding("cel-compile", "x"), claim=claim, classes=classes, cluster="c") is None
    assert located(InventoryFinding("deviceclass-unknown", "x"), claim=claim, classes=classes, cluster="c") is None


def numa_template(count: int, attribute: str) -> bytes:
    return template(request=f"count: {count}") + f"      constraints:\n      - matchAttribute: {attribute}\n".encode()


def test_match_attribute_on_the_standard_numa_node_keeps_a_claims_gpus_on_one_numa_node() -> None:
    """The model table puts half of a node's GPUs on each of two NUMA nodes (resource.kubernetes.io/numaNode)."""
    files = example_files() | {"teams/ml-research/t.yaml": numa_template(4, "resource.kubernetes.io/numaNode")}
    result = validate(load_revision(files), clusters=["gpu-west"])
    assert [f for f in result.findings if f.location.file == "teams/ml-research/t.yaml"] == []
    [fits] = [s for s in result.satisfaction if s.object == "ResourceClaimTemplate/ml-research/t"]
    assert fits.capacity == 2 * fits.nodes  # two NUMA nodes of four GPUs on every eight-GPU node

    files = example_files() | {"teams/ml-research/t.yaml": numa_template(5, "resource.kubernetes.io/numaNode")}
    [finding] = [
        f for f in validate(load_revision(files), clusters=["gpu-west"]).findings if f.rule == "claim-unsatisfiable"
    ]
    assert "matchAttribute: resource.kubernetes.io/numaNode" in finding.message
    assert "enough of them share (or differ in) its value on one node" in finding.hint


def test_match_attribute_on_numa_node_in_the_drivers_domain_names_the_standard_one() -> None:
    text = numa_template(2, "gpu.nvidia.com/numaNode")
    files = example_files() | {"teams/ml-research/t.yaml": text}
    [finding] = [
        f for f in validate(load_revision(files), clusters=["gpu-west"]).findings if f.rule == "claim-unsatisfiable"
    ]
    assert (finding.location.line, finding.location.col) == position_of(text, "matchAttribute")
    assert finding.hint.startswith(
        "no device publishes gpu.nvidia.com/numaNode; it is published as resource.kubernetes.io/numaNode"
    )
