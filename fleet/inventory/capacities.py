"""Consumable capacity: how much of a device one allocation takes, by the scheduler's rules.

With DRAConsumableCapacity (beta and on in Kubernetes 1.36 and 1.37) a device that sets
``allowMultipleAllocations`` is shared: several claims get it at once until its
capacities are used up. A request asks for amounts (``capacity.requests``);
each capacity of the device may carry a ``requestPolicy`` that rounds a request
up (``validRange`` min/step, ``validValues``), fills in a ``default`` for a
capacity the request does not name, and refuses a request above ``max`` or off
the step. A capacity with no policy and no request takes the whole value, so
an unshared device is taken whole.

This is a port of k8s.io/dynamic-resource-allocation v0.37.2
``structured/internal/incubating/consumable_capacity.go``
(``CmpRequestOverCapacity``, ``calculateConsumedCapacity``, ``roundUpRange``,
``roundUpValidValues``, ``violatesPolicy``) with DRAFractionalCapacityRange off,
as 1.37 runs by default. Amounts are integers in nano-units (a Kubernetes quantity
is exact to 1e-9), so the search adds and compares plain ints; Go's
``Quantity.Value()`` (rounded up to a whole number) is kept where the rounding
rules use it. Not ported: with DRAFractionalCapacityRange a fractional
``validRange`` rounds in milli-units, and 1.37 aborts the allocation for a request
beyond int64 (``errCapacityRequestNotRepresentable``) where fleet finds no device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fleet import cel

NANO = 10**9


@dataclasses.dataclass(frozen=True)
class Capacity:
    """One capacity of a device: its value and its request policy, in nano-units."""

    value: int
    default: int | None = None
    valid_values: tuple[int, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    step: int | None = None
    policy: bool = False
    ranged: bool = False


def nanos(quantity: cel.Quantity) -> int:
    return int(quantity.value * NANO)


def _whole(amount: int) -> int:
    """``Quantity.Value()``: rounded up to a whole number (in units)."""
    return -(-amount // NANO)


def parse(raw: Mapping[str, object]) -> Capacity:
    """A slice device's ``capacity`` entry (``{value, requestPolicy}``); raises cel.QuantityError."""

    def amount(text: object) -> int:
        return nanos(cel.parse_quantity(str(text)))

    value = amount(raw.get("value", "0"))
    policy = raw.get("requestPolicy")
    if not isinstance(policy, Mapping):
        return Capacity(value)
    default = amount(policy["default"]) if policy.get("default") is not None else None
    values = tuple(amount(v) for v in policy.get("validValues") or ())
    rng = policy.get("validRange")
    if isinstance(rng, Mapping):
        return Capacity(
            value,
            default,
            values,
            amount(rng["min"]) if rng.get("min") is not None else None,
            amount(rng["max"]) if rng.get("max") is not None else None,
            amount(rng["step"]) if rng.get("step") is not None else None,
            policy=True,
            ranged=True,
        )
    return Capacity(value, default, values, policy=True)


def consumed(requested: int | None, capacity: Capacity) -> int:
    """``calculateConsumedCapacity``: what one allocation takes of ``capacity``."""
    if requested is None:
        return capacity.default if capacity.default is not None else capacity.value
    if not capacity.policy:
        return requested
    if capacity.ranged and capacity.minimum is not None:
        if requested < capacity.minimum:
            return capacity.minimum
        if capacity.step is None:
            return requested
        step, low = _whole(capacity.step), _whole(capacity.minimum)
        n, rest = divmod(_whole(requested) - low, step)
        return (low + step * (n + (1 if rest else 0))) * NANO
    if capacity.valid_values:
        return next((v for v in capacity.valid_values if requested <= v), requested)
    return requested


def violates(amount: int, capacity: Capacity) -> bool:
    """``violatesPolicy``: an amount the policy refuses (above max, off the step, not a valid value)."""
    if not capacity.policy:
        return False
    if capacity.default is not None and amount == capacity.default:
        return False
    if capacity.ranged:
        if capacity.maximum is not None and amount > capacity.maximum:
            return True
        if capacity.step is not None and capacity.minimum is not None:
            return (_whole(amount) - _whole(capacity.minimum)) % _whole(capacity.step) != 0
        return False
    if capacity.valid_values:
        return amount not in capacity.valid_values
    return False


def take(
    requests: Mapping[str, int], capacities: Mapping[str, Capacity], used: Mapping[str, int] | None = None
) -> dict[str, int] | None:
    """What one allocation takes of every capacity of the device, or None when it does not fit.

    None also when the request names a capacity the device lacks (the scheduler skips such a
    device) or an amount its policy refuses. ``used``: what other allocations already hold.
    """
    if any(name not in capacities for name in requests):
        return None
    out: dict[str, int] = {}
    for name, capacity in capacities.items():
        amount = consumed(requests.get(name), capacity)
        if violates(amount, capacity):
            return None
        if amount + (used.get(name, 0) if used else 0) > capacity.value:
            return None
        out[name] = amount
    return out


def why_not(requests: Mapping[str, int], capacities: Mapping[str, Capacity]) -> str:
    """Why a request can never take this device, even unshared ("" when it can)."""
    for name in requests:
        if name not in capacities:
            return f"the device has no capacity {name!r}"
    for name, capacity in capacities.items():
        amount = consumed(requests.get(name), capacity)
        if violates(amount, capacity):
            return f"{name} {show(amount)} is outside the device's requestPolicy ({describe(capacity)})"
        if amount > capacity.value:
            return f"{name} {show(amount)} is more than the device has ({show(capacity.value)})"
    return ""


def show(amount: int) -> str:
    whole, rest = divmod(amount, NANO)
    if rest:
        return f"{amount / NANO:g}"
    for suffix, exponent in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if whole and whole % (1 << exponent) == 0:
            return f"{whole >> exponent}{suffix}"
    return str(whole)


def describe(capacity: Capacity) -> str:
    parts = []
    if capacity.default is not None:
        parts.append(f"default {show(capacity.default)}")
    if capacity.ranged:
        low = show(capacity.minimum) if capacity.minimum is not None else "0"
        high = show(capacity.maximum) if capacity.maximum is not None else show(capacity.value)
        parts.append(f"{low}..{high}" + (f" step {show(capacity.step)}" if capacity.step is not None else ""))
    if capacity.valid_values:
        parts.append("one of " + ", ".join(show(v) for v in capacity.valid_values))
    return ", ".join(parts) or "none"


__all__ = ["NANO", "Capacity", "consumed", "describe", "nanos", "parse", "show", "take", "violates", "why_not"]
