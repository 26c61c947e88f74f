"""Kubernetes ``resource.Quantity`` values, exact, as the DRA CEL library sees them.

Selectors compare GPU memory with ``quantity('40Gi')``; a validator that rounds
through floats would call ``81559Mi`` vs ``79.6Gi`` wrongly. This module is a
line-by-line port of ``ParseQuantity``/``parseQuantityString`` from
k8s.io/apimachinery v0.37.2 (``pkg/api/resource/quantity.go``) onto
:class:`decimal.Decimal`, which compares exactly at any exponent:

* suffixes: binary ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m "" k M G T P E``,
  exponent forms ``e3``/``E-3``/``e+3`` (exponent truncated to int32 as in Go);
* values not representable in the fast int64 path are rounded *up* (away from
  zero) to a multiple of 1e-9, binary values are capped at 2^63-1;
* Go's quirks are kept (``"-"`` and ``"."`` parse as 0, ``"1.G"`` is allowed).

Kubernetes also keeps an internal representation, and ``isInteger()`` /
``asInteger()`` answer from it, not from the value: ``int64Amount{value,
scale}`` when the text fits ParseQuantity's fast path (at most 18 digits, a
scale of at least nano, binary suffixes only with a small mantissa), else an
``inf.Dec``; only an ``int64Amount`` with scale >= 0 whose value times
10^scale fits int64 is an integer. So ``quantity('1000m')``, ``'10.0'``,
``'1Pi'`` and ``'9223372036854775807'`` are not integers there although their
values are. :attr:`Quantity.amount` carries that representation (ported from
k8s.io/apimachinery v0.37.2 ``ParseQuantity``, ``int64Amount.Add``/``Sub``,
``AsInt64``); quantities built from a value alone have it unknown and answer
from the value. ``as_float`` is correctly rounded where Go may differ in the
last bit.
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
_MIN_INT64 = -(1 << 63)
_NANO = decimal.Decimal("1e-9")
DEC = "inf.Dec"  # Quantity.amount of a quantity Kubernetes holds as an inf.Dec
Amount = tuple[int, int]  # Kubernetes' int64Amount: value * 10**scale
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


def _fits(number: int) -> bool:
    return _MIN_INT64 <= number <= _MAX_INT64


def _scaled(value: int, scale: int) -> int | None:
    """``positiveScaleInt64``: value * 10**scale, or None when it overflows int64."""
    result = value * 10**scale
    return result if _fits(result) else None


def add_amounts(first: Amount, second: Amount) -> Amount | None:
    """``int64Amount.Add``: the sum, or None where Kubernetes falls back to inf.Dec."""
    (a, a_scale), (b, b_scale) = first, second
    if b == 0:
        return first
    if a == 0:
        return second
    if a_scale == b_scale:
        total = a + b
        return (total, a_scale) if _fits(total) else None
    if a_scale > b_scale:
        shifted = _scaled(a, a_scale - b_scale)
        if shifted is None or not _fits(shifted + b):
            return None
        return shifted + b, b_scale
    shifted = _scaled(b, b_scale - a_scale)
    if shifted is None or not _fits(a + shifted):
        return None
    return a + shifted, a_scale


def _negated(amount: Amount) -> Amount:
    value, scale = amount
    return (value if value == _MIN_INT64 else -value), scale  # Go's -MinInt64 wraps


@dataclasses.dataclass(frozen=True, order=False)
class Quantity:
    """An exact quantity; compare with :meth:`compare`, not ``<``.

    ``amount`` is Kubernetes' representation: an int64Amount ``(value, scale)``,
    :data:`DEC`, or None when not known (built from a value). It takes part in
    ``==`` and ``hash`` so that devices whose capacities differ only in it are
    not grouped together.
    """

    value: decimal.Decimal
    amount: Amount | str | None = None

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def _as_int64(self) -> int | None:
        """``Quantity.AsInt64``; from the value when the representation is not known."""
        if self.amount is None:
            integral = self.value == self.value.to_integral_value() and _MIN_INT64 <= self.value <= _MAX_INT64
            return int(self.value) if integral else None
        if isinstance(self.amount, str):
            return None
        value, scale = self.amount
        return None if scale < 0 else _scaled(value, scale)

    def is_integer(self) -> bool:
        return self._as_int64() is not None

    def as_integer(self) -> int:
        number = self._as_int64()
        if number is None:
            raise QuantityError("cannot convert value to integer")
        return number

    def as_float(self) -> float:
        return float(self.value)

    def add(self, other: Quantity) -> Quantity:
        try:
            total = _context().add(self.value, other.value)
        except decimal.DecimalException as err:
            raise QuantityError(f"quantity arithmetic needs more than {MAX_DIGITS} digits") from err
        return Quantity(total, self._combined(other.amount))

    def sub(self, other: Quantity) -> Quantity:
        negated = _negated(other.amount) if isinstance(other.amount, tuple) else other.amount
        return Quantity(self.value, self.amount).add(Quantity(-other.value, negated))

    def _combined(self, other: Amount | str | None) -> Amount | str | None:
        """``Quantity.Add``'s representation: int64 arithmetic while it fits, else inf.Dec."""
        if self.amount is None or other is None:
            return None
        if isinstance(self.amount, str) or isinstance(other, str):
            return DEC
        return add_amounts(self.amount, other) or DEC

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
    def from_canonical(cls, text: str, amount: Amount | str | None = None) -> Quantity:
        return cls(decimal.Decimal(text), amount)

    @classmethod
    def from_int(cls, number: int) -> Quantity:
        """``resource.NewQuantity(number, DecimalExponent)``: an int64Amount of scale 0."""
        return cls(decimal.Decimal(number), (number, 0) if _fits(number) else None)


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
        return Quantity(decimal.Decimal(0), (0, 0))
    positive, _value, num, denom, suffix = _split(text)
    base, exponent, binary = _interpret(suffix)
    amount = _fast_path(positive, num, denom, exponent, binary)
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
    return Quantity(magnitude if positive else -magnitude, amount)


def _fast_path(positive: bool, num: str, denom: str, exponent: int, binary: bool) -> Amount | str:
    """ParseQuantity's int64Amount, when the text takes its fast path; else :data:`DEC`."""
    mantissa, scale = 1, exponent
    if not binary:
        precision = 18 - (len(num) + len(denom))  # maxInt64Factors
    elif exponent >= 0 and not denom:
        mantissa, scale = 1 << exponent, 0
        precision = 15 - len(num) - exponent * 3 // 10 - 1  # exponent is a multiple of 10: float32 is exact
    else:
        precision = -1
    if precision < 0:
        return DEC
    scale -= len(denom)
    if scale < -9:
        return DEC
    result = int(num + denom) * mantissa
    if not _fits(result):
        return DEC
    return (result if positive else -result), scale


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


__all__ = ["DEC", "MAX_DIGITS", "Amount", "Quantity", "QuantityError", "add_amounts", "is_quantity", "parse_quantity"]
