"""The pure parts behind the Kubernetes agreement: checker texts, literal checks, quantity representations.

The agreement test (test_kubernetes_agreement.py) holds the behaviour to Kubernetes'
answers; these pin the pieces it is built from, so a failure points at one of them.
"""

from __future__ import annotations

import pytest

from fleet.cel import asts, literals, quantities, rewrites
from fleet.cel.environments import dra_environment
from fleet.cel.references import tokenize


def test_the_checker_reads_an_alias_of_device_as_device_and_maps_offsets_back() -> None:
    expression = "cel.bind(dev, device, dev.capacity['gpu.nvidia.com'].memory > 40 && has(dev.capacity))"
    edited = rewrites.for_checker(expression)
    assert edited.text == (
        "cel.bind(dev, device, device.capacity['gpu.nvidia.com'].memory > 40 && has(device.driver  ))"
    )
    operator = edited.text.index(">")
    assert edited.original_offset(operator) == expression.index(">")
    assert edited.original_offset(edited.text.index("device.capacity")) == expression.index("dev.capacity")
    assert edited.original_offset(edited.text.index("device.capacity") + 3) == expression.index("dev.capacity")


def test_an_alias_of_an_alias_is_device_and_a_shadowed_alias_is_left_alone() -> None:
    chained = rewrites.for_checker("cel.bind(d, device, cel.bind(e, d, e.driver == 'x'))")
    assert chained.text == "cel.bind(d, device, cel.bind(e, device, device.driver == 'x'))"
    shadowed = "cel.bind(d, device, [1].all(d, d > 0))"
    assert rewrites.for_checker(shadowed).text == shadowed


@pytest.mark.parametrize(
    ("expression", "literal"),
    [
        ("[1, 2].size() == 2", True),
        ("{'a': 1}.a == 1", True),
        ("x[?'a'].hasValue()", False),
        ("[?optional.of(1)].size() == 1", True),
        ("device.attributes['x'].y == 1", False),
        ("f([1])", True),
    ],
)
def test_aggregate_literals_are_told_from_indexing(expression: str, literal: bool) -> None:
    assert literals.has_aggregate_literal(tokenize(expression)) is literal


def _mismatches(expression: str) -> list[tuple[int, str]]:
    checked = asts.read(dra_environment().checker.compile(expression).serialize())
    return literals.mismatches(checked)


def test_literal_elements_must_have_the_first_elements_type() -> None:
    assert _mismatches("[1, 'a', 2.0].size() == 3") == [(4, "expected type 'int' but found 'string'")]
    assert _mismatches("{'a': 1, 2: 'b'}.size() == 2") == [
        (9, "expected type 'string' but found 'int'"),
        (12, "expected type 'int' but found 'string'"),
    ]
    assert _mismatches("[[], [1]].size() == 2") == []
    assert _mismatches("[device.attributes['d'].x, 1].size() == 2") == [(27, "expected type 'any' but found 'int'")]


@pytest.mark.parametrize(
    ("text", "amount", "integer"),
    [
        ("1000m", (1000, -3), False),
        ("10.0", (100, -1), False),
        ("1Ti", (1 << 40, 0), True),
        ("1Pi", quantities.DEC, False),
        ("9223372036854775807", quantities.DEC, False),
        ("123456789012345678", (123456789012345678, 0), True),
        ("1k", (1, 3), True),
        ("1e30", (1, 30), False),
        ("0", (0, 0), True),
        ("-5", (-5, 0), True),
    ],
)
def test_quantities_keep_the_representation_kubernetes_parses_them_into(
    text: str, amount: object, integer: bool
) -> None:
    quantity = quantities.parse_quantity(text)
    assert quantity.amount == amount
    assert quantity.is_integer() is integer


def test_arithmetic_keeps_int64_amounts_until_they_overflow() -> None:
    assert quantities.add_amounts((1, 3), (5, 0)) == (1005, 0)
    assert quantities.add_amounts((1, 0), (1000, -3)) == (2000, -3)
    assert quantities.add_amounts(((1 << 63) - 1, 0), (1, 0)) is None
    one, milli = quantities.parse_quantity("1"), quantities.parse_quantity("1000m")
    assert one.add(milli).is_integer() is False  # (2000, -3): Kubernetes says no
    assert one.sub(one).is_integer() is True
    assert quantities.Quantity.from_canonical("1").is_integer() is True  # representation unknown: by value
