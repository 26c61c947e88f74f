"""The devices of a cluster, from its ResourceSlices, grouped so selectors run once per shape.

An :class:`Inventory` is built from ResourceSlices exactly as the API returns
them (plain dicts), whether they come from a live cluster (``fleetctl
inventory``) or a snapshot file. Like the scheduler, it keeps only the newest
``pool.generation`` of each pool and notes pools with fewer slices than
``resourceSliceCount`` (incomplete: allocation mode ``All`` cannot use them).

Devices are node-local when their slice has ``nodeName`` (every NVIDIA pool);
``allNodes`` devices are offered to every node; devices behind a
``nodeSelector`` form a pseudo-node ``<selector:pool>`` because node labels are
not part of an inventory.

Why grouping: 1,000 nodes x 8 GPUs are 8,000 distinct devices (each has its own
``uuid``/``pciBusID``), but :meth:`Inventory.groups` projects every device onto
what a selector actually reads (:func:`fleet.cel.projection`) and a selector is
evaluated once per distinct projection — a handful per GPU model.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleet import cel
from fleet.cel.devices import Domains, Projection, shared_key
from fleet.cel.references import KINDS
from fleet.errors import FleetError
from fleet.inventory import capacities
from fleet.inventory.capacities import Capacity
from fleet.inventory.groupings import Grouping

ALL_NODES = "*"
Consumption = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]


class InventoryError(FleetError):
    """A ResourceSlice that cannot be read as Kubernetes would read it."""


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__.
@dataclasses.dataclass(eq=False, slots=True)
class InventoryDevice:
    node: str
    pool: str
    driver: str
    name: str
    device: cel.Device
    taints: tuple[Mapping[str, Any], ...] = ()
    consumes: Consumption = ()
    """``consumesCounters``: (counter set, ((counter, nano-units), ...)), ..."""
    shared: bool = False
    """``allowMultipleAllocations``: several claims may hold the device until its capacity is used."""
    capacities: Mapping[str, Capacity] = dataclasses.field(default_factory=dict)
    """Capacity by the name the slice gives it (what ``capacity.requests`` names), with its requestPolicy."""

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


def node_of(spec: Mapping[str, Any]) -> str:
    """The node a slice's devices are on (``ALL_NODES``, or ``<selector:POOL>`` for a node selector)."""
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    if spec.get("allNodes"):
        return ALL_NODES
    return f"<selector:{spec.get('pool', {}).get('name', '')}>"


_VALUE = operator.itemgetter("value")


class _Amounts:
    """Quantities and capacities parsed once per distinct spelling (a fleet repeats a few dozen)."""

    def __init__(self) -> None:
        self._amounts: dict[str, int] = {}
        self._capacities: dict[str, Capacity] = {}
        self._counters: dict[tuple[object, ...], tuple[tuple[str, int], ...]] = {}
        self._shared_capacities: dict[object, Mapping[str, Capacity]] = {}
        self._consumes: dict[bytes, Consumption] = {}
        self._by_converted: dict[int, Mapping[str, Capacity]] = {}
        self.devices: dict[object, Any] = {}
        """``cel.Device.from_slice``'s cache."""

    def amount(self, text: str, where: str) -> int:
        found = self._amounts.get(text)
        if found is None:
            try:
                found = self._amounts[text] = capacities.nanos(cel.parse_quantity(text))
            except cel.QuantityError as err:
                raise InventoryError(f"counter value: {err}", where=where) from err
        return found

    def counters(self, raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int], ...]:
        try:
            key: tuple[object, ...] = (tuple(raw), tuple(map(_VALUE, raw.values())))
        except (KeyError, TypeError):
            key = (tuple(raw), tuple((v or {}).get("value") for v in raw.values()))
        found = self._counters.get(key)
        if found is None:
            names, values = tuple(raw), [(v or {}).get("value") for v in raw.values()]
            found = self._counters[key] = tuple(
                sorted((str(name), self.amount(str(value), where)) for name, value in zip(names, values, strict=True))
            )
        return found

    def consumes(self, raw: Sequence[Mapping[str, Any]], where: str) -> Consumption:
        """A device's ``consumesCounters``, parsed once per distinct content (a few hundred in a fleet)."""
        if not raw:
            return ()
        key = shared_key(raw)
        found = self._consumes.get(key) if key is not None else None
        if found is None:
            found = tuple((str(c.get("counterSet")), self.counters(c.get("counters") or {}, where)) for c in raw)
            if key is not None:
                self._consumes[key] = found
        return found

    def capacities(self, raw: Mapping[str, Any], where: str, *, converted: Domains) -> Mapping[str, Capacity]:
        """A device's capacities; devices with equal capacities share one (read-only) mapping.

        ``converted`` is the device's ``cel.Device.capacity``, which devices share exactly when
        their capacity entries are equal (``cel.Device.from_slice``): its identity is the key."""
        found = self._by_converted.get(id(converted))
        if found is None:
            found = self._by_converted[id(converted)] = self._parse_capacities(raw, where)
        return found

    def _parse_capacities(self, raw: Mapping[str, Any], where: str) -> Mapping[str, Capacity]:
        try:
            if max(map(len, raw.values()), default=1) > 1:  # a requestPolicy beside the value
                return {str(k): self.capacity(v or {}, where) for k, v in raw.items()}
            key: tuple[tuple[Any, Any], ...] = tuple(zip(raw, map(_VALUE, raw.values()), strict=True))
        except (KeyError, TypeError):
            return {str(k): self.capacity(v or {}, where) for k, v in raw.items()}
        found = self._shared_capacities.get(key)
        if found is None:
            found = self._shared_capacities[key] = {str(k): self.capacity(v or {}, where) for k, v in raw.items()}
        return found

    def capacity(self, raw: Mapping[str, Any], where: str) -> Capacity:
        key = repr(raw) if raw.get("requestPolicy") else str(raw.get("value", ""))
        found = self._capacities.get(key)
        if found is None:
            try:
                found = self._capacities[key] = capacities.parse(raw)
            except (cel.QuantityError, KeyError, TypeError) as err:
                raise InventoryError(f"capacity: {err}", where=where) from err
        return found


class Inventory:
    """All devices of one cluster; read-only after construction."""

    def __init__(
        self,
        *,
        devices: Sequence[InventoryDevice],
        counters: Mapping[tuple[str, str, str], Mapping[str, int]],
        notes: Sequence[str] = (),
        slices: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.devices = list(devices)
        self.counters = dict(counters)
        self.notes = list(notes)
        self.slices = list(slices)
        self.invalid_pools = _invalid_pools(self.devices, self.counters)
        self.nodes = sorted({d.node for d in self.devices if d.node != ALL_NODES})
        self.by_node: dict[str, list[int]] = {node: [] for node in self.nodes}
        shared = [i for i, d in enumerate(self.devices) if d.node == ALL_NODES]
        for index, item in enumerate(self.devices):
            if item.node != ALL_NODES:
                self.by_node[item.node].append(index)
        for node in self.nodes:
            self.by_node[node] += shared
        self._groupings: dict[tuple[object, ...], Grouping] = {}
        self._patterns: dict[str, list[tuple[int, ...]]] = {}
        self._counter_layout: list[object] | None = None
        self._columns: dict[tuple[str, str, str, bool], list[int]] = {}
        self._maps: dict[str, tuple[list[int], list[Domains]]] = {}
        self._published: dict[str, dict[str, set[str]]] | None = None

    @functools.cached_property
    def shared(self) -> bool:
        """Some device allows multiple allocations (consumable capacity)."""
        return any(d.shared for d in self.devices)

    @functools.cached_property
    def policies(self) -> bool:
        """Some capacity has a requestPolicy (devices with equal capacities share one mapping)."""
        distinct = {id(d.capacities): d.capacities for d in self.devices}
        return any(c.policy for capacity in distinct.values() for c in capacity.values())

    @classmethod
    def from_slices(cls, slices: Iterable[Mapping[str, Any]]) -> Inventory:
        # the scheduler reads a pool's slices in name order (and pools in driver/pool order)
        kept = sorted(slices, key=_slice_order)
        newest: dict[tuple[str, str], int] = {}
        for item in kept:
            spec = item.get("spec") or {}
            key = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
            newest[key] = max(newest.get(key, 0), int((spec.get("pool") or {}).get("generation", 0)))
        devices: list[InventoryDevice] = []
        counters: dict[tuple[str, str, str], dict[str, int]] = {}
        seen: Counter[tuple[str, str]] = Counter()
        expected: dict[tuple[str, str], int] = {}
        used = []
        amounts = _Amounts()
        for item in kept:
            spec = item.get("spec") or {}
            pool = spec.get("pool") or {}
            driver, pool_name = str(spec.get("driver", "")), str(pool.get("name", ""))
            if int(pool.get("generation", 0)) != newest[(driver, pool_name)]:
                continue
            used.append(item)
            where = f"ResourceSlice {(item.get('metadata') or {}).get('name', '?')}"
            seen[(driver, pool_name)] += 1
            expected[(driver, pool_name)] = int(pool.get("resourceSliceCount", 1))
            for counter_set in spec.get("sharedCounters") or []:
                counters[(driver, pool_name, str(counter_set.get("name")))] = dict(
                    amounts.counters(counter_set.get("counters") or {}, where)
                )
            node = node_of(spec)
            for raw in spec.get("devices") or []:
                try:
                    device = cel.Device.from_slice(driver=driver, device=raw, cache=amounts.devices)
                except cel.DeviceError as err:
                    raise InventoryError(str(err), where=f"{where} device {raw.get('name')}") from err
                consumes = amounts.consumes(raw.get("consumesCounters") or (), where)
                capacity = amounts.capacities(raw.get("capacity") or {}, where, converted=device.capacity)
                devices.append(
                    InventoryDevice(
                        node,
                        pool_name,
                        driver,
                        str(raw.get("name")),
                        device,
                        tuple(raw.get("taints") or ()),
                        consumes,
                        bool(raw.get("allowMultipleAllocations")),
                        capacity,
                    )
                )
        notes = [
            f"pool {pool} of driver {driver} is incomplete: {seen[(driver, pool)]} of {count} slices"
            for (driver, pool), count in sorted(expected.items())
            if seen[(driver, pool)] < count
        ]
        inventory = cls(devices=devices, counters=counters, notes=notes, slices=used)
        inventory.notes += [
            f"pool {pool} of driver {driver} is invalid, the scheduler allocates none of its devices: {why}"
            for (driver, pool), why in sorted(inventory.invalid_pools.items())
        ]
        return inventory

    def grouping(self, references: cel.References) -> Grouping:
        """Devices grouped by what ``references`` can observe, and node types (cached per signature)."""
        signature = references.signature
        cached = self._groupings.get(signature)
        if cached is None:
            cached = self._groupings[signature] = Grouping(self, references)
        return cached

    def groups(self, references: cel.References) -> dict[Projection, list[int]]:
        """Device indices per distinct projection onto ``references``."""
        grouping = self.grouping(references)
        merged: dict[Projection, list[int]] = {}
        for key, indices in zip(grouping.keys, grouping.indices, strict=True):
            merged.setdefault(key, []).extend(indices)
        return merged

    def pattern(self, qualified: str) -> list[tuple[int, ...]]:
        """Per node (``nodes`` order): which devices share a value of ``qualified`` (values replaced by
        first-seen indices; -1 = not published). Equal patterns behave alike under match/distinct constraints."""
        cached = self._patterns.get(qualified)
        if cached is None:
            domain, _, name = qualified.partition("/")
            cached = []
            for node in self.nodes:
                seen: dict[str, int] = {}
                row = []
                for index in self.by_node[node]:
                    value = self.devices[index].device.get("attributes", domain, name)
                    row.append(-1 if value is None else seen.setdefault(repr(value), len(seen)))
                cached.append(tuple(row))
            self._patterns[qualified] = cached
        return cached

    def column(self, kind: str, domain: str, name: str, *, presence: bool) -> list[int]:
        """Per device: an id of its value of ``kind``/``domain``/``name`` (-1 = absent; with
        ``presence`` only 0/-1). ``kind`` "driver" gives the driver and allowMultipleAllocations.

        Ids are numbered in the order values first appear among the devices. Read from each
        distinct map once (:meth:`maps`), then spread to the devices by a C-level gather."""
        key = (kind, domain, name, presence)
        cached = self._columns.get(key)
        if cached is None:
            ids: dict[object, int] = {}
            values: list[object]
            if kind == "driver":
                index, values = self._drivers()
            else:
                empty: dict[str, Any] = {}
                index, maps = self.maps(kind)
                values = [values.get(domain, empty).get(name) for values in maps]
            if presence:
                per_value = [-1 if v is None else 0 for v in values]
            else:
                setdefault = ids.setdefault
                per_value = [-1 if v is None else setdefault((type(v), v), len(ids)) for v in values]
            cached = self._columns[key] = _gather(per_value, index)
        return cached

    def maps(self, kind: str) -> tuple[list[int], list[Domains]]:
        """(per device: the position of its ``kind`` map, the distinct maps in first-seen order).

        Devices with equal slice entries share one map (:meth:`cel.Device.from_slice`): 109,432
        dynamic-MIG devices have 37,360 distinct attribute maps and 13 capacity maps."""
        cached = self._maps.get(kind)
        if cached is None:
            positions: dict[int, int] = {}
            maps: list[Domains] = []
            index: list[int] = []
            for item in self.devices:
                values = item.device.kind(kind)
                position = positions.get(id(values))
                if position is None:
                    position = positions[id(values)] = len(maps)
                    maps.append(values)
                index.append(position)
            cached = self._maps[kind] = (index, maps)
        return cached

    def _drivers(self) -> tuple[list[int], list[object]]:
        ids: dict[tuple[str, bool], int] = {}
        index = [ids.setdefault((d.device.driver, d.device.allow_multiple_allocations), len(ids)) for d in self.devices]
        return index, list(ids)

    def counter_layout(self) -> list[object]:
        """Per node (``nodes`` order): the counters its devices consume and its pools offer."""
        if self._counter_layout is None:
            ids: dict[object, int] = {}
            by_pool: dict[tuple[str, str], list[tuple[str, tuple[tuple[str, int], ...]]]] = {}
            for (driver, pool, counter_set), counters in self.counters.items():
                by_pool.setdefault((driver, pool), []).append((counter_set, tuple(sorted(counters.items()))))
            self._counter_layout = []
            for node in self.nodes:
                items = [self.devices[i] for i in self.by_node[node]]
                pools = sorted({(d.driver, d.pool) for d in items})
                offered = tuple(sorted(entry for pool in pools for entry in by_pool.get(pool, ())))
                consumed = tuple(ids.setdefault((d.consumes, d.shared), len(ids)) for d in items)
                self._counter_layout.append((consumed, ids.setdefault(offered, len(ids))))
        return self._counter_layout

    def published(self, kind: str) -> dict[str, set[str]]:
        """Names published per domain for ``kind`` ('attributes' or 'capacity')."""
        if self._published is None:
            self._published = {"attributes": {}, "capacity": {}}
            for k in KINDS:
                for values_by_domain in self.maps(k)[1]:
                    for domain, values in values_by_domain.items():
                        self._published[k].setdefault(domain, set()).update(values)
        return self._published[kind]

    def summary(self) -> list[dict[str, Any]]:
        """Rows of node, driver, model (productName or profile), type and count."""
        rows: Counter[tuple[str, str, str, str]] = Counter()
        for item in self.devices:
            attrs = item.device.attributes.get(item.driver, {})
            model = str(attrs.get("productName", ""))
            kind = str(attrs.get("type", ""))
            if kind == "mig" and "profile" in attrs:
                model = f"{model} MIG {attrs['profile']}"
            rows[(item.node, item.driver, model, kind)] += 1
        return [
            {"node": node, "driver": driver, "model": model, "type": kind, "count": count}
            for (node, driver, model, kind), count in sorted(rows.items())
        ]


def _gather(values: list[int], index: list[int]) -> list[int]:
    """``[values[i] for i in index]``, in C (``operator.itemgetter``): a column has 100,000 entries."""
    if len(index) > 1:
        return list(operator.itemgetter(*index)(values))
    return [values[i] for i in index]


def _slice_order(item: Mapping[str, Any]) -> tuple[str, str, str]:
    spec = item.get("spec") or {}
    name = str((item.get("metadata") or {}).get("name", ""))
    return str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")), name


def _invalid_pools(
    devices: Sequence[InventoryDevice], counters: Mapping[tuple[str, str, str], Mapping[str, int]]
) -> dict[tuple[str, str], str]:
    """Pools the scheduler refuses whole (``validateDeviceCounterConsumption``): a device consumes from
    a counter set, or a counter, that the pool does not define."""
    out: dict[tuple[str, str], str] = {}
    signatures: dict[frozenset[str], int] = {}
    offered = {key: signatures.setdefault(frozenset(value), len(signatures)) for key, value in counters.items()}
    names = {number: names for names, number in signatures.items()}
    verdicts: dict[tuple[int, tuple[tuple[str, int], ...]], str] = {}
    for item in devices:
        if not item.consumes:
            continue
        key = (item.driver, item.pool)
        if key in out:
            continue
        for counter_set, used in item.consumes:
            signature = offered.get((item.driver, item.pool, counter_set))
            if signature is None:
                out[key] = f"device {item.name} consumes from counter set {counter_set}, which the pool does not define"
                break
            verdict = verdicts.get((signature, used))
            if verdict is None:
                missing = [name for name, _ in used if name not in names[signature]]
                verdict = verdicts[(signature, used)] = missing[0] if missing else ""
            if verdict:
                out[key] = f"device {item.name} consumes counter {verdict}, which counter set {counter_set} lacks"
                break
    return out


__all__ = ["ALL_NODES", "Inventory", "InventoryDevice", "InventoryError", "node_of"]
