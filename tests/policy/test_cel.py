"""CEL selectors: compile errors and removed attributes at their line and column in the YAML file."""

from __future__ import annotations

from fleet.manifests import Finding, load_revision
from fleet.policy import check
from tests.manifests.repos import example_files, only, yaml


def with_selector(expression_yaml: str) -> list[Finding]:
    files = example_files()
    files["teams/ml-research/t.yaml"] = (
        yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: t, namespace: ml-research}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly:
                  deviceClassName: gpu.nvidia.com
                  selectors:
                  - cel:
    """)
        + expression_yaml.encode()
    )
    return check(load_revision(files))


def test_compile_error_in_a_block_scalar_points_at_the_file_line_and_column() -> None:
    found = with_selector(
        "                expression: |\n"
        "                  device.attributes['gpu.nvidia.com'].architecture == 'Hopper' &&\n"
        "                  device.attributes['gpu.nvidia.com'].productName.lowerAsci() == 'x'\n"
    )
    finding = only(found, "cel")
    assert "undeclared reference to 'lowerAsci'" in finding.message
    # line 2 of the expression is file line 15; the content starts in column 19
    assert (finding.location.file, finding.location.line) == ("teams/ml-research/t.yaml", 15)
    line = "                  device.attributes['gpu.nvidia.com'].productName.lowerAsci() == 'x'"
    assert line[finding.location.col - 1] == "("  # cel-cpp points at the call
    assert finding.cluster == ""  # ml-research runs on both clusters


def test_compile_error_in_a_quoted_scalar() -> None:
    found = with_selector("                expression: \"device.driver == 1 + 'a'\"\n")
    finding = only(found, "cel")
    assert "no matching overload" in finding.message
    assert finding.location.line == 13
    line = "                expression: \"device.driver == 1 + 'a'\""
    assert line[finding.location.col - 1] == "+"


def test_unknown_device_field() -> None:
    finding = only(with_selector("                expression: device.foo == 'x'\n"), "cel")
    assert "undefined field 'foo'" in finding.message
    assert finding.location.col == 29 + 7


def test_removed_attributes_name_the_current_one() -> None:
    found = with_selector(
        "                expression: device.attributes['gpu.nvidia.com'].pcieBusID == '0000:1b:00.0'\n"
    )
    finding = only(found, "cel-removed-attribute")
    assert "pcieBusID is no longer published" in finding.message
    assert "device.attributes['resource.kubernetes.io'].pciBusID" in finding.hint
    assert finding.location.col == 29 + 36


def test_guide_selectors_compile() -> None:
    found = with_selector(
        "                expression: |\n"
        "                  device.attributes['gpu.nvidia.com'].architecture == 'Hopper'\n"
        "                  &&\n"
        "                  device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"80Gi\"))\n"
    )
    assert found == []
