"""Devices and nodes grouped by what a set of selectors can observe.

For one :class:`fleet.cel.References` (what some selectors read) every device
has a *projection*; devices with equal projections are one group, and a
selector is evaluated once per group. Nodes whose devices fall into the same
groups (in the same order) are one *node type*: a claim fits on all of them
or on none, so counting nodes, devices and copies is a sum over a handful of
types instead of a loop over 1,000 nodes — that is what keeps validating
10,000 templates fast (bench/validate.py).

Device taints are part of the group key when any device has taints, so every
device of a group is equally (un)tolerated.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet import cel
from fleet.cel.devices import Projection

if TYPE_CHECKING:
    from fleet.inventory.inventories import Inventory


@dataclasses.dataclass
class NodeType:
    groups: tuple[int, ...]  # group id of each device on a node of this type, in the node's device order
    counts: Counter[int]
    nodes: list[str]


class Grouping:
    """Groups of devices and types of nodes for one references signature."""

    def __init__(self, inventory: Inventory, references: cel.References) -> None:
        self.references = references
        self.keys: list[Projection] = []
        self.taints: list[tuple[Mapping[str, Any], ...]] = []
        tainted = any(d.taints for d in inventory.devices)
        ids: dict[object, int] = {}
        setdefault = ids.setdefault
        self.device_group = [
            setdefault(identity, len(ids)) for identity in self._identities(inventory, references, tainted)
        ]
        self.indices: list[list[int]] = [[] for _ in range(len(ids))]
        for index, group in enumerate(self.device_group):
            self.indices[group].append(index)
        for indices in self.indices:
            item = inventory.devices[indices[0]]
            self.keys.append(cel.projection(item.device, references))
            self.taints.append(item.taints)
        self.types: list[NodeType] = []
        self.node_type: list[int] = []  # per inventory.nodes position
        type_ids: dict[tuple[int, ...], int] = {}
        groups = self.device_group
        for node in inventory.nodes:
            on_node = inventory.by_node[node]
            layout = (
                tuple(operator.itemgetter(*on_node)(groups)) if len(on_node) > 1 else tuple(groups[i] for i in on_node)
            )
            kind = type_ids.get(layout)
            if kind is None:
                kind = type_ids[layout] = len(self.types)
                self.types.append(NodeType(layout, Counter(layout), []))
            self.types[kind].nodes.append(node)
            self.node_type.append(kind)

    @staticmethod
    def _identities(inventory: Inventory, references: cel.References, tainted: bool) -> Iterable[object]:
        """One hashable per device, equal exactly when the projections (and taints) are equal.

        Selectors that read named attributes (the common case) are served from per-name value
        columns of the inventory, which is much cheaper than building every projection.
        """
        plan = references.plan
        if any(everything or whole for everything, whole, _ in plan.values()):
            projections: Iterable[object] = (cel.projection(d.device, references) for d in inventory.devices)
        else:
            columns = [inventory.column("driver", "", "", presence=False)]
            for kind, (_, _, wanted) in plan.items():
                for domain, names in sorted(wanted.items()):
                    columns += [inventory.column(kind, domain, n, presence=p) for n, p in sorted(names.items())]
            projections = zip(*columns, strict=True)
        if not tainted:
            return projections
        return zip(projections, (repr(d.taints) for d in inventory.devices), strict=True)

    def nodes_per_group(self, inventory: Inventory, groups: Sequence[int]) -> Counter[str]:
        counts: Counter[str] = Counter()
        for group in groups:
            counts.update(inventory.devices[i].node for i in self.indices[group])
        return counts


__all__ = ["Grouping", "NodeType"]
