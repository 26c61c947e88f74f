"""Selectors from the guide against the fixture slices; Kubernetes' error semantics; compile positions."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.cel import (
    MAX_EXPRESSION_LENGTH,
    Device,
    SelectorCompileError,
    SelectorRuntimeError,
    compile_selector,
    normalize_and_parse,
    parse_quantity,
)

GPU = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"
H100 = f"{GPU}.productName.lowerAscii().matches('^.*h100.*$')"
LARGE_MEMORY = f'{CAP}.memory.isGreaterThan(quantity("40Gi"))'


def matches(expression: str, devices: list[Device]) -> list[bool]:
    selector = compile_selector(expression)
    return [selector.evaluate(d) for d in devices]


def test_guide_h100_selector(fixture_devices: dict[str, list[Device]]) -> None:
    assert matches(H100, fixture_devices["h100-node"]) == [True] * 8
    assert matches(H100, fixture_devices["a100-node"]) == [False] * 8
    assert matches(H100, fixture_devices["h200-node"]) == [False] * 8
    assert matches(H100, fixture_devices["mig-node"]) == [True] * 5  # MIG devices copy the parent's productName


def test_guide_large_memory_selector(fixture_devices: dict[str, list[Device]]) -> None:
    for name in ("h100-node", "a100-node", "h200-node"):
        assert matches(LARGE_MEMORY, fixture_devices[name]) == [True] * 8
    # MIG slices: 1g.10gb, 1g.10gb, 2g.20gb, 3g.40gb (39.5 GiB) are not > 40Gi; the whole GPU is.
    assert matches(LARGE_MEMORY, fixture_devices["mig-node"]) == [False, False, False, False, True]


def test_h200_fixture_matches_the_nvml_reading(
    fixture_devices: dict[str, list[Device]], nvml_h200: dict[str, Any]
) -> None:
    gpu = nvml_h200["devices"][0]
    major, minor = gpu["cudaComputeCapability"]
    cuda = nvml_h200["cudaDriverVersion"]
    expression = (
        f"{GPU}.productName == '{gpu['name']}'"
        f" && {CAP}.memory == quantity('{gpu['memoryTotalBytes']}')"
        f" && {GPU}.driverVersion == semver('{nvml_h200['driverVersion']}', true)"
        f" && {GPU}.cudaComputeCapability == semver('{major}.{minor}', true)"
        f" && {GPU}.cudaDriverVersion == semver('{cuda // 1000}.{cuda % 1000 // 10}', true)"
        f" && {GPU}.architecture == 'Hopper' && {GPU}.brand == 'Nvidia'"
    )
    assert matches(expression, fixture_devices["h200-node"]) == [True] * 8
    assert parse_quantity("143771Mi").value == gpu["memoryTotalBytes"]
    assert str(normalize_and_parse(nvml_h200["driverVersion"])) == "580.159.4"


def test_unknown_attribute_in_known_domain_is_an_error(fixture_devices: dict[str, list[Device]]) -> None:
    selector = compile_selector(f"{GPU}.index == 0")
    with pytest.raises(SelectorRuntimeError, match="no such key: index") as raised:
        selector.evaluate(fixture_devices["h100-node"][0])
    assert "has(" in raised.value.hint


def test_unknown_domain_is_an_empty_map(fixture_devices: dict[str, list[Device]]) -> None:
    device = fixture_devices["h100-node"][0]
    assert compile_selector("size(device.attributes['example.com']) == 0").evaluate(device)
    assert compile_selector("!has(device.attributes['example.com'].x)").evaluate(device)
    assert compile_selector("device.attributes['example.com'].?x.orValue(7) == 7").evaluate(device)
    with pytest.raises(SelectorRuntimeError, match="no such key: x"):
        compile_selector("device.attributes['example.com'].x == 1").evaluate(device)


def test_errors_are_absorbed_like_cel_go(fixture_devices: dict[str, list[Device]]) -> None:
    device = fixture_devices["h100-node"][0]
    assert compile_selector(f"{GPU}.index == 0 || true").evaluate(device)
    assert not compile_selector(f"false && {GPU}.index == 0").evaluate(device)


def test_result_must_be_bool(fixture_devices: dict[str, list[Device]]) -> None:
    with pytest.raises(SelectorCompileError, match="must evaluate to bool"):
        compile_selector("1 + 1")
    with pytest.raises(SelectorRuntimeError, match="type string could not be converted to bool"):
        compile_selector(f"{GPU}.productName").evaluate(fixture_devices["h100-node"][0])


@pytest.mark.parametrize(
    ("expression", "message", "line", "column"),
    [
        (f"{GPU}.productName.lowerAsci() == 'x'", "undeclared reference to 'lowerAsci'", 1, 58),
        ("quantity(40).isGreaterThan(quantity('1'))", "no matching overload for 'quantity'", 1, 9),
        ("semver('1.0.0').isGreaterThan(quantity('1'))", "'(kubernetes.Semver, kubernetes.Quantity)'", 1, 30),
        # at the ".", as the API server reports it
        ("device.drvier == 'gpu.nvidia.com'", "undefined field 'drvier'", 1, 7),
        (f"{GPU}.productName == 'x' &&\n  {GPU}.brand.matches('[')", "invalid matches argument", 2, 53),
        (f"{GPU}.architecture == 'Hopper' &&\n    1 + 'a'", "no matching overload for '_+_'", 2, 7),
        ("quantity('1').sign() == 1", "undeclared reference to 'sign'", 1, 19),
    ],
)
def test_compile_errors_have_positions(expression: str, message: str, line: int, column: int) -> None:
    with pytest.raises(SelectorCompileError) as raised:
        compile_selector(expression)
    issue = raised.value.issues[0]
    assert message in issue.message
    assert (issue.line, issue.column) == (line, column)
    lines = expression.split("\n")
    assert issue.offset == sum(len(text) + 1 for text in lines[: line - 1]) + column - 1


def test_expression_length_limit_is_10_kib() -> None:
    clause = "device.driver == 'gpu.nvidia.com'"
    fits = " || ".join([clause] * (MAX_EXPRESSION_LENGTH // (len(clause) + 4)))
    assert len(fits.encode()) <= MAX_EXPRESSION_LENGTH
    compile_selector(fits)
    with pytest.raises(SelectorCompileError, match="longer than the limit of 10240 bytes"):
        compile_selector(fits + " || " + clause)


def test_compiled_selectors_are_cached() -> None:
    assert compile_selector(H100) is compile_selector(H100)
