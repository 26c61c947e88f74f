"""Quantities parse and compare exactly as Kubernetes' resource.ParseQuantity (more cases in the oracle test)."""

from __future__ import annotations

import decimal

import pytest

from fleet.cel import Quantity, QuantityError, parse_quantity
from fleet.cel.quantities import MAX_DIGITS


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", 80 * 2**30),
        ("81559Mi", 85_520_809_984),
        ("143771Mi", 150_754_820_096),
        ("1k", 1000),
        ("1M", 10**6),
        ("1E", 10**18),
        ("1Ei", 2**60),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1e+3", 1000),
        ("1.5e3", 1500),
        ("0.5Ki", 512),
        ("-1", -1),
        ("+1", 1),
        ("00", 0),
        ("-", 0),
        (".", 0),
        ("1.G", 10**9),
        ("8Ei", 2**63 - 1),  # binary values are capped at max int64
        ("-8Ei", -(2**63 - 1)),
        ("1e100", 10**100),  # decimal values are not capped
    ],
)
def test_integral_values(text: str, value: int) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1m", "0.001"),
        ("1n", "0.000000001"),
        ("1u", "0.000001"),
        ("1.0000000001", "1.000000001"),  # rounded up to 1n
        ("-1.0000000001", "-1.000000001"),  # away from zero
        ("1e-10", "0.000000001"),
        ("1.1Ki", "1126.4"),
    ],
)
def test_fractional_values_round_up_to_nano(text: str, value: str) -> None:
    assert parse_quantity(text).value == decimal.Decimal(value)


@pytest.mark.parametrize("text", ["", "1K", "1i", "1e", "1Mi5", "1 Gi", " 1", "1.5.5", "abc", "1KiB", "--1"])
def test_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_equal_values_have_one_canonical_spelling() -> None:
    assert parse_quantity("1Gi").canonical() == parse_quantity("1024Mi").canonical()
    assert parse_quantity("1G").canonical() == parse_quantity("1000M").canonical()
    assert parse_quantity("1G").canonical() != parse_quantity("1Gi").canonical()


def test_compare_sign_and_integer() -> None:
    assert parse_quantity("81559Mi").compare(parse_quantity("80Gi")) == -1
    assert parse_quantity("1Ki").compare(parse_quantity("1k")) == 1
    assert parse_quantity("-3").sign() == -1
    assert parse_quantity("1k").as_integer() == 1000
    with pytest.raises(QuantityError, match="cannot convert value to integer"):
        parse_quantity("1.5").as_integer()


def test_arithmetic_is_exact_and_bounded() -> None:
    assert parse_quantity("1").add(parse_quantity("500m")).value == decimal.Decimal("1.5")
    assert parse_quantity("1").sub(Quantity.from_int(2)).sign() == -1
    with pytest.raises(QuantityError, match=str(MAX_DIGITS)):
        parse_quantity("1e5000").add(parse_quantity("1"))


def test_display() -> None:
    assert [parse_quantity(t).display() for t in ("80Gi", "81559Mi", "16", "1500m", "0")] == [
        "80Gi",
        "81559Mi",
        "16",
        "1.5",
        "0",
    ]
