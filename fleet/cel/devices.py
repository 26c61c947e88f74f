"""The ``device`` a selector sees, built from a ResourceSlice device exactly as Kubernetes does.

``DeviceMatches`` in k8s.io/dynamic-resource-allocation/cel/compile.go builds
``device.attributes`` / ``device.capacity`` by splitting every qualified name at
its first ``/`` (``parseQualifiedName``): ``productName`` in a slice of driver
``gpu.nvidia.com`` becomes ``device.attributes['gpu.nvidia.com'].productName``,
``resource.kubernetes.io/pciBusID`` becomes
``device.attributes['resource.kubernetes.io'].pciBusID``. Version attributes
are parsed strictly as semver, capacities are Quantities (the ``value`` only:
``requestPolicy`` is invisible to CEL).

A :class:`Device` is plain Python data; :func:`projection` cuts it down to what
one selector reads (see :mod:`fleet.cel.references`), which is both the grouping
key and, through :func:`activation`, the input handed to cel-cpp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson

from fleet.cel import quantities, semvers
from fleet.cel.environments import CAPACITY_AMOUNTS, Types
from fleet.cel.references import References

Value = int | bool | str | semvers.Semver | quantities.Quantity | tuple[Any, ...]
Domains = dict[str, dict[str, Value]]
# (driver, allowMultipleAllocations, ((kind, domain, ((name, value), ...)), ...))
Projection = tuple[str, bool, tuple[tuple[str, str, tuple[tuple[str, Value], ...]], ...]]


class DeviceError(ValueError):
    """A slice device whose attribute or capacity Kubernetes could not convert."""


def parse_qualified_name(name: str, *, default_domain: str) -> tuple[str, str]:
    """``parseQualifiedName``: split at the first ``/``; no ``/`` means the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


def _attribute_value(name: str, raw: Mapping[str, Any]) -> Value:
    try:
        if "version" in raw:
            return semvers.parse_semver(str(raw["version"]))
        if "versions" in raw:
            return tuple(semvers.parse_semver(str(v)) for v in raw["versions"])
    except semvers.SemverError as err:
        raise DeviceError(f"attribute {name}: parse semantic version: {err}") from err
    for key, kind in (("int", int), ("bool", bool), ("string", str)):
        if key in raw:
            return kind(raw[key])
        if key + "s" in raw:
            return tuple(kind(v) for v in raw[key + "s"])
    raise DeviceError(f"attribute {name}: no value (expected one of int, bool, string, version)")


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__.
@dataclasses.dataclass(eq=False, slots=True)
class Device:
    """``device`` as CEL sees it: driver, attributes and capacity by domain."""

    driver: str
    attributes: Domains
    capacity: Domains
    allow_multiple_allocations: bool = False

    @classmethod
    def from_slice(cls, *, driver: str, device: Mapping[str, Any], cache: dict[object, Any] | None = None) -> Device:
        """From one entry of ``ResourceSlice.spec.devices`` of a slice with ``spec.driver``.

        ``cache`` (one dict for many devices) keeps converted names and values, and whole
        attribute and capacity maps: devices whose entries are equal share one (read-only)
        map (see :func:`shared_key`). A fleet's 100,000 devices repeat a few hundred distinct
        attribute values, and the dynamic-MIG placements of one GPU differ only in their
        profile: 109,432 such devices have 37,360 distinct attribute maps and 13 capacity maps.
        """
        memo: dict[object, Any] = {} if cache is None else cache
        raw_attributes, raw_capacity = device.get("attributes") or {}, device.get("capacity") or {}
        multi = bool(device.get("allowMultipleAllocations", False))
        key = shared_key((driver, raw_attributes, raw_capacity))
        if key is None:
            return cls(driver, _attributes(driver, raw_attributes, memo), _capacity(driver, raw_capacity, memo), multi)
        found = memo.get(key)
        if found is None:
            capacity_key = orjson.dumps((driver, raw_capacity))  # part of what ``key`` could encode
            capacity = memo.get(capacity_key)
            if capacity is None:
                capacity = memo[capacity_key] = _capacity(driver, raw_capacity, memo)
            found = memo[key] = (_attributes(driver, raw_attributes, memo), capacity)
        return cls(driver, found[0], found[1], multi)

    def kind(self, kind: str) -> Domains:
        return self.attributes if kind == "attributes" else self.capacity

    def get(self, kind: str, domain: str, name: str) -> Value | None:
        return self.kind(kind).get(domain, {}).get(name)


def shared_key(content: object) -> bytes | None:
    """A key equal exactly for equal slice content: its JSON as orjson writes it, or None.

    orjson, because this runs for every device of a large inventory and is cheaper than a
    tuple of the items. JSON tells apart what Python's
    ``==`` would not (``1``, ``1.0`` and ``true``). None (convert without sharing) where JSON
    cannot tell content apart: an integer beyond 64 bits or a non-string key (orjson refuses
    them) and NaN or infinity (written as ``null``, as ``None`` is).
    """
    try:
        key = orjson.dumps(content)
    except orjson.JSONEncodeError:
        return None
    return None if b"null" in key else key


def _attributes(driver: str, raw_attributes: Mapping[str, Any], memo: dict[object, Any]) -> Domains:
    attributes: Domains = {}
    for name, raw in raw_attributes.items():
        item = next(iter(raw.items())) if raw and len(raw) == 1 else None
        # the type too: ("string", 1) and ("string", True) are equal keys but convert to "1" and "True"
        key = (driver, name, item, type(item[1])) if item is not None and not isinstance(item[1], list) else None
        found = memo.get(key) if key is not None else None
        if found is None:
            domain, ident = parse_qualified_name(name, default_domain=driver)
            found = (domain, ident, _attribute_value(name, raw or {}))
            if key is not None:
                memo[key] = found
        domain, ident, value = found
        values = attributes.get(domain)
        if values is None:
            values = attributes[domain] = {}
        values[ident] = value
    return attributes


def _capacity(driver: str, raw_capacity: Mapping[str, Any], memo: dict[object, Any]) -> Domains:
    capacity: Domains = {}
    for name, raw in raw_capacity.items():
        text = str((raw or {}).get("value", ""))
        quantity_key = ("capacity", driver, name, text)
        parsed = memo.get(quantity_key)
        if parsed is None:
            domain, ident = parse_qualified_name(name, default_domain=driver)
            try:
                parsed = memo[quantity_key] = (domain, ident, quantities.parse_quantity(text))
            except quantities.QuantityError as err:
                raise DeviceError(f"capacity {name}: {err}") from err
        domain, ident, amount = parsed
        capacity.setdefault(domain, {})[ident] = amount
    return capacity


def projection(device: Device, references: References) -> Projection:
    """The part of ``device`` that ``references`` can observe, as a hashable key.

    Literal domains absent from the device appear as empty maps (Kubernetes' default);
    a name read only by ``has()`` contributes its presence, not its value.
    """
    parts: list[tuple[str, str, tuple[tuple[str, Value], ...]]] = []
    for kind, (everything, whole, wanted) in references.plan.items():
        values = device.attributes if kind == "attributes" else device.capacity
        if everything:
            for domain in sorted(set(values) | references.domains(kind)):
                parts.append((kind, domain, tuple(sorted(values.get(domain, {}).items()))))
            continue
        for domain in sorted(whole):
            parts.append((kind, domain, tuple(sorted(values.get(domain, {}).items()))))
        for domain, names in sorted(wanted.items()):
            present = values.get(domain, {})
            items = tuple(
                (name, True if presence else present[name])
                for name, presence in sorted(names.items())
                if name in present
            )
            parts.append((kind, domain, items))
    return (device.driver, device.allow_multiple_allocations, tuple(parts))


def _cel_value(types: Types, value: Value, amount: bool = False) -> Any:
    if isinstance(value, quantities.Quantity):
        return types.quantity_message(value, amount=amount)
    if isinstance(value, semvers.Semver):
        return types.semver_message(value)
    if isinstance(value, tuple):
        return [_cel_value(types, item) for item in value]
    return value


def activation(types: Types, key: Projection, *, amounts: bool = False) -> dict[str, Any]:
    """The ``device`` variable for cel-cpp, from a :func:`projection`.

    With ``amounts``, also ``@capacity_amounts``: the capacities with Kubernetes'
    representation, which the receivers of ``isInteger()``/``asInteger()`` read
    (:mod:`fleet.cel.rewrites`).
    """
    driver, multi, parts = key
    data: dict[str, Any] = {
        "driver": driver,
        "allowMultipleAllocations": multi,
        "attributes": {},
        "capacity": {},
    }
    for kind, domain, items in parts:
        data[kind][domain] = {name: _cel_value(types, value) for name, value in items}
        if amounts and kind == "capacity":
            data.setdefault(CAPACITY_AMOUNTS, {})[domain] = {
                name: _cel_value(types, value, amount=True) for name, value in items
            }
    if amounts:
        data.setdefault(CAPACITY_AMOUNTS, {})
    return data


__all__ = ["Device", "DeviceError", "Projection", "activation", "parse_qualified_name", "projection"]
