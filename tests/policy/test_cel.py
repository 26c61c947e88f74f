"""CEL selectors: compile errors and removed attributes at their line and column in the YAML file."""

from __future__ import annotations

from fleet.manifests import Finding, load_revision
from fleet.policy import check
from tests.manifests.repos import example_files, only, position_of, template


def with_selector(expression: str) -> tuple[bytes, list[Finding]]:
    """The template written with ``expression`` (YAML text after ``expression:``) and its findings."""
    text = template(request=f"selectors:\n- cel:\n    expression: {expression}")
    files = example_files()
    files["teams/ml-research/t.yaml"] = text
    return text, check(load_revision(files))


def where(finding: Finding) -> tuple[int, int]:
    assert finding.location.file == "teams/ml-research/t.yaml"
    return finding.location.line, finding.location.col


def test_compile_error_in_a_block_scalar_points_at_the_file_line_and_column() -> None:
    text, found = with_selector(
        "|\n"
        "      device.attributes['gpu.nvidia.com'].architecture == 'Hopper' &&\n"
        "      device.attributes['gpu.nvidia.com'].productName.lowerAsci() == 'x'"
    )
    finding = only(found, "cel")
    assert "undeclared reference to 'lowerAsci'" in finding.message
    assert where(finding) == position_of(text, "() == 'x'")  # cel-cpp points at the call
    assert finding.cluster == ""  # ml-research runs on both clusters


def test_compile_error_in_a_quoted_scalar() -> None:
    text, found = with_selector("\"device.driver == 1 + 'a'\"")
    finding = only(found, "cel")
    assert "no matching overload" in finding.message
    assert where(finding) == position_of(text, "+ 'a'")


def test_unknown_device_field() -> None:
    text, found = with_selector("device.foo == 'x'")
    finding = only(found, "cel")
    assert "undefined field 'foo'" in finding.message
    assert where(finding) == position_of(text, ".foo")  # the API server points at the "."


def test_removed_attributes_name_the_current_one() -> None:
    text, found = with_selector("device.attributes['gpu.nvidia.com'].pcieBusID == '0000:1b:00.0'")
    finding = only(found, "cel-removed-attribute")
    assert "pcieBusID is no longer published" in finding.message
    assert "device.attributes['resource.kubernetes.io'].pciBusID" in finding.hint
    assert where(finding) == position_of(text, "pcieBusID")


def test_guide_selectors_compile() -> None:
    _, found = with_selector(
        "|\n"
        "      device.attributes['gpu.nvidia.com'].architecture == 'Hopper'\n"
        "      &&\n"
        "      device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"80Gi\"))"
    )
    assert found == []
