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


NUMA = "device.attributes['resource.kubernetes.io'].numaNode"


def test_the_standard_numa_node_attribute_is_an_int() -> None:
    for fine in (f"{NUMA} == 0", f"{NUMA} in [0, 1]", f"{NUMA} >= 1", f"has({NUMA}) && {NUMA} < 2"):
        _, found = with_selector(f'"{fine}"')
        assert [f for f in found if f.rule.startswith("cel")] == [], fine
    text, found = with_selector(f"\"{NUMA} == '0'\"")
    finding = only(found, "cel-attribute-type")
    assert finding.message.startswith(
        "resource.kubernetes.io/numaNode is an int, but the selector uses it as another type "
        "(found no matching overload for '_==_' applied to '(int, string)')"
    )
    assert finding.hint == "use the standard attribute's type, e.g. " + f"{NUMA} == 0"
    assert where(finding) == position_of(text, "== '0'")
    text, found = with_selector(f"\"{NUMA}.startsWith('0') || {NUMA} in ['1']\"")
    assert sorted(where(f) for f in found if f.rule == "cel-attribute-type") == [
        position_of(text, "('0')"),
        position_of(text, "in ['1']"),
    ]


def test_pci_attributes_are_strings_and_aliases_keep_dyn() -> None:
    _, found = with_selector("\"device.attributes['resource.kubernetes.io'].pciBusID == 0\"")
    finding = only(found, "cel-attribute-type")
    assert finding.message.startswith("resource.kubernetes.io/pciBusID is a string")
    assert "'0000:3b:00.0'" in finding.hint
    # a read through an alias stays dyn: never refused, even where it is wrong
    _, found = with_selector("\"cel.bind(d, device, d.attributes['resource.kubernetes.io'].numaNode == '0')\"")
    assert [f for f in found if f.rule == "cel-attribute-type"] == []


def test_with_list_type_attributes_numa_node_may_be_a_list() -> None:
    cluster = example_files()["clusters/gpu-west.yaml"] + b"  featureGates: {DRAListTypeAttributes: true}\n"
    files = example_files() | {
        "clusters/gpu-west.yaml": cluster,
        "teams/ml-research/t.yaml": template(request=f"selectors:\n- cel:\n    expression: \"{NUMA} == '0'\""),
    }
    [finding] = [f for f in check(load_revision(files)) if f.rule == "cel-attribute-type"]
    assert finding.cluster == "gpu-east"  # gpu-west may publish numaNode as a list of ints
