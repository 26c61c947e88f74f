"""Kubernetes ``resource.Quantity`` values, exact, as the DRA CEL library sees them.

Selectors compare GPU memory with ``quantity('40Gi')``; a validator that rounds
through floats would call ``81559Mi`` vs ``79.6Gi`` wrongly. This module is a
line-by-line port of ``ParseQuantity``/``parseQuantityString`` from
k8s.io/apimachinery v0.36.3 (``pkg/api/resource/quantity.go``) onto
:class:`decimal.Decimal`, which compares exactly at any exponent:

* suffixes: binary ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m "" k M G T P E``,
  exponent forms ``e3``/``E-3``/``e+3`` (exponent truncated to int32 as in Go);
* values not representable in the fast int64 path are rounded *up* (away from
  zero) to a multiple of 1e-9, binary values are capped at 2^63-1;
* Go's quirks are kept (``"-"`` and ``"."`` parse as 0, ``"1.G"`` is allowed).

Known difference, on purpose: Kubernetes keeps an internal representation
(``int64Amount{value, scale}`` or ``inf.Dec``) and ``isInteger()`` /
``asInteger()`` answer from it, so ``quantity('1000m').isInteger()`` is false
there although the value is 1. CEL values of this module travel as protobuf
messages whose equality must be numeric (``quantity('1G') == quantity('1000M')``
is true in Kubernetes), so only the canonical value is carried and
``is_integer`` answers from the value. ``as_float`` is correctly rounded where
Go may differ in the last bit.
"""

from __future__ import annotations

import dataclasses
import decimal

BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_MAX_INT64 = (1 << 63) - 1
_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_NANO = decimal.Decimal("1e-9")
# Exact arithmetic needs as many digits as the operands have; bound it so a
# hostile ``quantity('1e2000000000').add(1)`` fails instead of eating memory.
MAX_DIGITS = 4096


class QuantityError(ValueError):
    """A string that ``resource.ParseQuantity`` rejects, or arithmetic beyond the bound."""


def _context() -> decimal.Context:
    return decimal.Context(
        prec=MAX_DIGITS,
        Emax=decimal.MAX_EMAX,
        Emin=decimal.MIN_EMIN,
        traps=[decimal.Inexact, decimal.InvalidOperation, decimal.Overflow],
    )


@dataclasses.dataclass(frozen=True, order=False)
class Quantity:
    """An exact quantity; compare with :meth:`compare`, not ``<``."""

    value: decimal.Decimal

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_integer(self) -> bool:
        return self.value == self.value.to_integral_value() and -_MAX_INT64 - 1 <= self.value <= _MAX_INT64

    def as_integer(self) -> int:
        if not self.is_integer():
            raise QuantityError("cannot convert value to integer")
        return int(self.value)

    def as_float(self) -> float:
        return float(self.value)

    def add(self, other: Quantity) -> Quantity:
        try:
            return Quantity(_context().add(self.value, other.value))
        except decimal.DecimalException as err:
            raise QuantityError(f"quantity arithmetic needs more than {MAX_DIGITS} digits") from err

    def sub(self, other: Quantity) -> Quantity:
        return self.add(Quantity(-other.value))

    def canonical(self) -> str:
        """One spelling per value: equal quantities give equal strings."""
        if self.value == 0:
            return "0"
        return str(self.value.normalize(_context()))

    def display(self) -> str:
        """A readable spelling: ``80Gi``, ``81559Mi``, ``16``, ``1.5``."""
        if self.value == self.value.to_integral_value():
            number = int(self.value)
            for suffix, exponent in sorted(BINARY_EXPONENTS.items(), key=lambda item: -item[1]):
                if number and number % (1 << exponent) == 0 and abs(number) >= 1 << exponent:
                    return f"{number >> exponent}{suffix}"
            return str(number)
        return format(self.value.normalize(_context()), "f")

    @classmethod
    def from_canonical(cls, text: str) -> Quantity:
        return cls(decimal.Decimal(text))

    @classmethod
    def from_int(cls, number: int) -> Quantity:
        return cls(decimal.Decimal(number))


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(_FORMAT_WRONG)
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, bool]:
    """``suffixHandler.interpret``: (base, exponent, is_binary)."""
    if suffix in DECIMAL_EXPONENTS:
        return 10, DECIMAL_EXPONENTS[suffix], False
    if suffix in BINARY_EXPONENTS:
        return 2, BINARY_EXPONENTS[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if body and all(c in _DIGITS for c in body):
            parsed = int(digits)
            if -(1 << 63) <= parsed <= _MAX_INT64:
                return 10, ((parsed + (1 << 31)) % (1 << 32)) - (1 << 31), False  # int32(parsed)
    raise QuantityError("unable to parse quantity's suffix")


def parse_quantity(text: str) -> Quantity:
    """``resource.ParseQuantity`` with the same accept/reject decisions and value."""
    if not text:
        raise QuantityError(_FORMAT_WRONG)
    if text == "0":
        return Quantity(decimal.Decimal(0))
    positive, _value, num, denom, suffix = _split(text)
    base, exponent, binary = _interpret(suffix)
    ctx = _context()
    try:
        magnitude = decimal.Decimal(f"{num}.{denom or '0'}")
        if base == 10:
            magnitude = magnitude.scaleb(exponent, ctx)
        else:
            magnitude = ctx.multiply(magnitude, decimal.Decimal(1 << exponent))
        if magnitude != 0 and int(magnitude.as_tuple().exponent) < -9:
            rounding = _context()
            rounding.traps[decimal.Inexact] = False  # rounding up to 1n is the point here
            magnitude = magnitude.quantize(_NANO, rounding=decimal.ROUND_UP, context=rounding)
    except decimal.DecimalException as err:
        raise QuantityError(f"quantity {text!r} needs more than {MAX_DIGITS} digits") from err
    if binary and magnitude > _MAX_INT64:
        magnitude = decimal.Decimal(_MAX_INT64)
    return Quantity(magnitude if positive else -magnitude)


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


__all__ = ["MAX_DIGITS", "Quantity", "QuantityError", "is_quantity", "parse_quantity"]
