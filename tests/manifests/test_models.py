"""Kinds and their API shape: unknown fields, kinds, versions and types are located findings."""

from __future__ import annotations

from fleet.manifests import load_revision, resources
from tests.manifests.repos import SEED, only, yaml

TEMPLATE = """
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata:
      name: t
      namespace: ml-research
    spec:
      spec:
        devices:
          requests:
          - name: gpu
            exactly:
              {field}: gpu.nvidia.com
"""


def test_seed_templates_load_as_v1_models() -> None:
    files = {p.name: p.read_bytes() for p in SEED.glob("*.yaml")}
    revision = load_revision(files)
    assert revision.findings == ()
    templates = revision.of_kind("ResourceClaimTemplate")
    assert sorted(m.name for m in templates) == ["h100-gpu", "large-memory-gpu", "single-gpu", "two-gpus"]
    two = next(m for m in templates if m.name == "two-gpus").model
    assert isinstance(two, resources.ResourceClaimTemplate)
    assert two.spec.spec.devices.requests[0].alternatives[0].devices == 2


def test_unknown_field_says_did_you_mean_at_its_line() -> None:
    revision = load_revision({"t.yaml": yaml(TEMPLATE.format(field="devicClassName"))})
    finding = only(revision.findings, "schema")
    assert "unknown field 'spec.spec.devices.requests[0].exactly.devicClassName'" in finding.message
    assert finding.hint == "did you mean 'deviceClassName'?"
    assert (finding.location.line, finding.location.col) == (12, 11)
    assert finding.object == "ResourceClaimTemplate/ml-research/t"


def test_unknown_field_without_a_close_match_lists_allowed_fields() -> None:
    revision = load_revision({"t.yaml": yaml(TEMPLATE.format(field="zzz"))})
    finding = next(f for f in revision.findings if "zzz" in f.message)
    assert "allowed here: adminAccess, allocationMode" in finding.hint


def test_unknown_kind_says_did_you_mean() -> None:
    revision = load_revision(
        {
            "t.yaml": yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplat
        metadata: {name: t}
    """)
        }
    )
    finding = only(revision.findings, "unknown-kind")
    assert finding.hint == "did you mean 'ResourceClaimTemplate'?"
    assert finding.location.line == 2


def test_unknown_fleet_version_names_the_served_one() -> None:
    revision = load_revision({"t.yaml": b"apiVersion: fleet.gpufleet.dev/v1\nkind: Team\nmetadata: {name: t}\n"})
    assert only(revision.findings, "unknown-kind").hint == "use fleet.gpufleet.dev/v1alpha1"


def test_v1beta1_template_is_refused_with_the_exact_v1_rewrite() -> None:
    revision = load_revision(
        {
            "t.yaml": yaml("""
        apiVersion: resource.k8s.io/v1beta1
        kind: ResourceClaimTemplate
        metadata: {name: two, namespace: ml}
        spec:
          spec:
            devices:
              requests:
              - name: gpus
                deviceClassName: gpu.nvidia.com
                count: 2
    """)
        }
    )
    finding = only(revision.findings, "deprecated-api")
    assert finding.location.line == 1
    assert "change apiVersion to resource.k8s.io/v1" in finding.hint
    assert "requests[0] → {name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}" in finding.hint


def test_v1beta2_only_needs_the_version_changed() -> None:
    text = yaml(TEMPLATE.format(field="deviceClassName")).replace(b"resource.k8s.io/v1", b"resource.k8s.io/v1beta2")
    finding = only(load_revision({"t.yaml": text}).findings, "deprecated-api")
    assert finding.hint == "change apiVersion to resource.k8s.io/v1"


def test_quoted_numbers_and_yes_are_refused_as_the_api_server_would() -> None:
    text = yaml(TEMPLATE.format(field="deviceClassName")) + b'          count: "2"\n          adminAccess: yes\n'
    revision = load_revision({"t.yaml": text})
    messages = sorted(f.message for f in revision.findings if f.rule == "schema")
    assert messages == [
        "spec.spec.devices.requests[0].exactly.adminAccess: Input should be a valid boolean",
        "spec.spec.devices.requests[0].exactly.count: Input should be a valid integer",
    ]
    assert any(f.rule == "yaml-ambiguous" and f.location.line == 14 for f in revision.findings)


def test_exactly_and_first_available_are_mutually_exclusive() -> None:
    revision = load_revision(
        {
            "t.yaml": yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c, namespace: ml}
        spec:
          devices:
            requests:
            - name: gpu
    """)
        }
    )
    finding = only(revision.findings, "schema")
    assert "exactly one of exactly or firstAvailable" in finding.message
    assert finding.location.line == 7


def test_v1_shape_features_validate() -> None:
    revision = load_revision(
        {
            "t.yaml": yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: mig-pair, namespace: ml}
        spec:
          metadata: {labels: {a: b}}
          spec:
            devices:
              requests:
              - name: all
                exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, adminAccess: true,
                          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}],
                          capacity: {requests: {gpu.nvidia.com/memory: 10Gi}}}
              - name: mig
                firstAvailable:
                - {name: big, deviceClassName: mig.nvidia.com, count: 2}
                - {name: small, deviceClassName: mig.nvidia.com}
              constraints:
              - {requests: [mig], matchAttribute: gpu.nvidia.com/parentUUID}
              - {distinctAttribute: resource.kubernetes.io/pcieRoot}
              config:
              - requests: [all]
                opaque:
                  driver: gpu.nvidia.com
                  parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig,
                               sharing: {strategy: TimeSlicing}}
    """)
        }
    )
    assert revision.findings == ()


def test_unqualified_match_attribute_and_count_with_all_are_refused() -> None:
    revision = load_revision(
        {
            "t.yaml": yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c, namespace: ml}
        spec:
          devices:
            requests:
            - {name: g, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, count: 2}}
            constraints:
            - {matchAttribute: parentUUID}
    """)
        }
    )
    messages = " ".join(f.message for f in revision.findings)
    assert "count must not be set when allocationMode is All" in messages
    assert "matchAttribute: String should match pattern" in messages


def test_status_is_refused() -> None:
    text = yaml(TEMPLATE.format(field="deviceClassName")) + b"status: {}\n"
    assert "unknown field 'status'" in only(load_revision({"t.yaml": text}).findings, "schema").message


def test_documents_that_are_not_objects_are_findings() -> None:
    revision = load_revision({"t.yaml": b"- just\n- a list\n"})
    assert "not a Kubernetes object" in only(revision.findings, "schema").message


def test_constraints_and_config_must_name_existing_requests() -> None:
    revision = load_revision(
        {
            "t.yaml": yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c, namespace: ml}
        spec:
          devices:
            requests:
            - {name: g, exactly: {deviceClassName: gpu.nvidia.com}}
            constraints:
            - {requests: [gpu], matchAttribute: gpu.nvidia.com/parentUUID}
    """)
        }
    )
    finding = only(revision.findings, "schema")
    assert "constraints names unknown request 'gpu' (requests: g)" in finding.message
    assert finding.location.line == 5
