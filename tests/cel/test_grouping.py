"""Evaluating a selector on a device's projection answers exactly as on the whole device.

The inventory evaluates each selector once per distinct projection; that is
only sound if the projection never drops something the selector can read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet.cel import Device, SelectorCompileError, SelectorRuntimeError, compile_selector, find_references, projection
from fleet.cel.devices import Projection, activation
from fleet.cel.environments import dra_environment
from fleet.cel.references import References, split_clauses

sys.path.insert(0, str(Path(__file__).parent / "oracle"))
import cases


def whole(device: Device, references: References) -> Projection:
    return projection(device, References(whole_device=True).merged(references))


def outcome(evaluate: Callable[[Projection], bool], key: Projection) -> object:
    try:
        return evaluate(key)
    except SelectorRuntimeError as err:
        return err.what


@pytest.mark.parametrize("expression", cases.selector_cases())
def test_projection_agrees_with_whole_device(expression: str, fixture_devices: dict[str, list[Device]]) -> None:
    try:
        selector = compile_selector(expression)
    except SelectorCompileError:
        return
    for devices in fixture_devices.values():
        for device in devices:
            full = whole(device, selector.references)
            narrow = projection(device, selector.references)
            assert outcome(selector.evaluate_projection, narrow) == outcome(selector.evaluate_projection, full)


def test_distinct_gpus_collapse_to_one_projection(fixture_devices: dict[str, list[Device]]) -> None:
    selector = compile_selector("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')")
    keys = {projection(d, selector.references) for d in fixture_devices["h100-node"]}
    assert len(keys) == 1
    assert len({whole(d, References()) for d in fixture_devices["h100-node"]}) == 8  # uuid and pciBusID differ


def test_unrecognised_reads_widen_the_projection() -> None:
    assert find_references("cel.bind(d, device, d.driver == 'x')").whole_device
    assert find_references("device.attributes[x].y == 1").whole_kinds == {"attributes"}
    assert find_references("device.attributes['a'].exists(k, k == 'b')").whole_domains == {("attributes", "a")}
    uses = find_references("has(device.attributes['a'].x) && device.capacity['b']['m'].isInteger()").names
    assert [(u.kind, u.domain, u.name, u.guarded) for u in uses] == [
        ("attributes", "a", "x", True),
        ("capacity", "b", "m", False),
    ]


def test_literal_domains_default_to_empty_maps(fixture_devices: dict[str, list[Device]]) -> None:
    references = find_references("device.attributes['example.com'].?x.orValue(1) == 1")
    data = activation(dra_environment().types, projection(fixture_devices["h100-node"][0], references))
    assert data["attributes"] == {"example.com": {}}


def test_split_clauses_keeps_offsets() -> None:
    expression = "a == 1 &&\n  (b || c) && f(x && y)"
    clauses = split_clauses(expression)
    assert [c.text for c in clauses] == ["a == 1", "(b || c)", "f(x && y)"]
    assert [expression[c.offset : c.offset + len(c.text)] for c in clauses] == [c.text for c in clauses]
    assert [c.text for c in split_clauses("a && b || c")] == ["a && b || c"]
    assert [c.text for c in split_clauses("a ? b && c : d")] == ["a ? b && c : d"]
