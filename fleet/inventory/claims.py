"""Satisfiability of ResourceClaims and ResourceClaimTemplates against an inventory.

``Checker(inventory=..., classes=...).check_claim(spec)`` answers, for one
cluster: on how many nodes the whole claim can be allocated, how many devices
it can use there, how many copies fit at once (what a Deployment scaling up
would get), and the findings (compile errors, unknown attributes, runtime
errors, "can never be satisfied" with the excluding clause).

The common claim — one ``exactly`` request, no constraints, no shared
counters — is answered from per-node counts alone. Everything else goes
through the per-node search of :mod:`fleet.inventory.allocations`, once per
node *shape*. Results are cached per claim spec, so identical templates
across teams cost one check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.inventory import allocations, explanations
from fleet.inventory.findings import Finding
from fleet.inventory.inventories import Inventory
from fleet.inventory.matches import Match, Matcher
from fleet.inventory.requests import Alternative, ClaimShape, read_claim


@dataclasses.dataclass(frozen=True)
class AlternativeReport:
    name: str
    devices: int  # matching devices in the cluster
    nodes: int  # nodes with enough matching devices for this alternative alone


@dataclasses.dataclass(frozen=True)
class ClaimReport:
    nodes: int  # nodes on which the whole claim can be allocated
    devices: int  # devices the claim can use on those nodes
    capacity: int  # copies of the claim that can be allocated at the same time
    requests: tuple[tuple[AlternativeReport, ...], ...]
    findings: tuple[Finding, ...]
    undecided_nodes: int = 0  # nodes where the bounded search gave up

    @property
    def satisfiable(self) -> bool:
        return self.nodes > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "devices": self.devices,
            "capacity": self.capacity,
            "requests": [[dataclasses.asdict(a) for a in alternatives] for alternatives in self.requests],
            "findings": [f.as_dict() for f in self.findings],
            "undecidedNodes": self.undecided_nodes,
        }


def _enough(alternative: Alternative, count: int) -> bool:
    return count >= 1 if alternative.all_devices else count >= alternative.count


class Checker:
    """Checks claims against one cluster's inventory and DeviceClasses (``{name: DeviceClass dict}``)."""

    def __init__(
        self,
        *,
        inventory: Inventory,
        classes: Mapping[str, Mapping[str, Any]],
        usage: allocations.Usage | None = None,
    ) -> None:
        """``usage``: what allocated claims hold (fits now); without it, what fits on idle devices."""
        self.inventory = inventory
        self.usage = usage if usage is not None and (usage.taken or usage.capacity) else None
        self._usage_column: list[object] | None = None
        self.matcher = Matcher(inventory=inventory, classes=classes)
        self._claims: dict[str, ClaimReport] = {}
        self._explained: dict[object, object] = {}
        self._unusable = [0] * len(inventory.nodes)
        self._classes: dict[tuple[int, ...], dict[tuple[object, ...], list[int]]] = {}
        self._shapes: dict[tuple[object, ...], tuple[bool, int, int]] = {}

    def check_template(self, template: Mapping[str, Any]) -> ClaimReport:
        """A ResourceClaimTemplate object (``spec.spec.devices``)."""
        return self.check_claim(((template.get("spec") or {}).get("spec")) or {})

    def check_claim(self, spec: Mapping[str, Any]) -> ClaimReport:
        """A ResourceClaim spec (``{devices: {requests, constraints, config}}``)."""
        # repr, not json.dumps(sort_keys=True): 10,000 templates per cluster; equal specs written with
        # keys in another order only miss the cache
        key = repr(spec.get("devices") or {})
        report = self._claims.get(key)
        if report is None:
            report = self._claims[key] = self._check(spec)
        return report

    def _check(self, spec: Mapping[str, Any]) -> ClaimReport:
        shape, findings = read_claim(spec)
        if not shape.requests:
            return ClaimReport(0, 0, 0, (), tuple(findings))
        matches = [[self.matcher.match(alt) for alt in alternatives] for alternatives in shape.requests]
        for alternatives, per_request in zip(shape.requests, matches, strict=True):
            for alternative, match in zip(alternatives, per_request, strict=True):
                findings += match.findings
                if match.usable:
                    findings += explanations.unknown_attributes(self.inventory, alternative, match)
        reports = tuple(
            tuple(self._alternative_report(alt, m) for alt, m in zip(alternatives, per_request, strict=True))
            for alternatives, per_request in zip(shape.requests, matches, strict=True)
        )
        if self._simple(shape):
            nodes, devices, capacity, undecided = self._count_simple(shape.requests[0][0], matches[0][0])
        else:
            nodes, devices, capacity, undecided = self._search(shape, matches)
        findings += self._failures(shape, matches, satisfiable=nodes > 0, reported=findings)
        explained = ("cel-compile", "deviceclass-unknown", "claim-invalid", "cel-unknown-attribute")
        if nodes == 0 and not any(f.rule in explained for f in findings):
            findings.append(self._explain(shape, matches, reports))
        return ClaimReport(nodes, devices, capacity, reports, tuple(findings), undecided)

    def _simple(self, shape: ClaimShape) -> bool:
        """One request, nothing shared between copies: a count of matching devices answers."""
        inventory = self.inventory
        return (
            len(shape.requests) == 1
            and len(shape.requests[0]) == 1
            and not shape.constraints
            and not shape.requests[0][0].capacity
            and not inventory.counters
            and not inventory.shared
            and not inventory.policies
            and not inventory.invalid_pools
            and self.usage is None
        )

    @staticmethod
    def _alternative_report(alternative: Alternative, match: Match) -> AlternativeReport:
        if match.grouping is None:
            return AlternativeReport(alternative.name, 0, 0)
        devices = nodes = 0
        for kind, node_type in enumerate(match.grouping.types):
            count, error = match.type_count(kind)
            devices += count * len(node_type.nodes)
            if not error and _enough(alternative, count):
                nodes += len(node_type.nodes)
        return AlternativeReport(alternative.name, devices, nodes)

    @staticmethod
    def _count_simple(alternative: Alternative, match: Match) -> tuple[int, int, int, int]:
        nodes = devices = capacity = 0
        if match.grouping is None:
            return 0, 0, 0, 0
        for kind, node_type in enumerate(match.grouping.types):
            count, error = match.type_count(kind)
            if error or not _enough(alternative, count):
                continue
            many = len(node_type.nodes)
            nodes += many
            devices += count * many
            capacity += many * (1 if alternative.all_devices else count // alternative.count)
        return nodes, devices, capacity, 0

    def _search(self, shape: ClaimShape, matches: Sequence[Sequence[Match]]) -> tuple[int, int, int, int]:
        """Per node class (same node type for every alternative, same constraint patterns): one search."""
        inventory = self.inventory
        columns: list[Sequence[object]] = [
            m.grouping.node_type if m.grouping is not None else self._unusable
            for per_request in matches
            for m in per_request
        ]
        columns += [inventory.pattern(c.attribute) for c in shape.constraints]
        if inventory.counters:
            columns.append(inventory.counter_layout())
        if self.usage is not None:
            columns.append(self._node_usage())
        # The columns are long-lived lists cached by the inventory, so their identities are a key.
        identity = tuple(id(column) for column in columns)
        classes = self._classes.get(identity)
        if classes is None:
            classes = self._classes[identity] = {}
            for position, key in enumerate(zip(*columns, strict=True)):
                entry = classes.get(key)
                if entry is None:
                    classes[key] = [1, position]
                else:
                    entry[0] += 1
        alternatives = tuple(
            (m.key, a.name, a.count, a.all_devices, a.capacity)
            for alts, per_request in zip(shape.requests, matches, strict=True)
            for a, m in zip(alts, per_request, strict=True)
        )
        constraints = tuple((c.attribute, c.distinct, c.requests) for c in shape.constraints)
        nodes = devices = capacity = undecided = 0
        for key, (many, position) in classes.items():
            cache_key = (alternatives, constraints, key)
            result = self._shapes.get(cache_key)
            if result is None:
                result = self._shapes[cache_key] = self._search_node(shape, matches, inventory.nodes[position])
            ok, copies, usable = result
            if copies < 0:
                undecided += many
            elif ok:
                nodes += many
                devices += usable * many
                capacity += copies * many
        return nodes, devices, capacity, undecided

    def _node_usage(self) -> list[object]:
        """Per node (``nodes`` order): what allocated claims hold there, by device position."""
        if self._usage_column is None:
            assert self.usage is not None
            usage, by_node = self.usage, self.inventory.by_node
            self._usage_column = [usage.on_node(by_node[node]) for node in self.inventory.nodes]
        return self._usage_column

    def _search_node(self, shape: ClaimShape, matches: Sequence[Sequence[Match]], node: str) -> tuple[bool, int, int]:
        on_node = self.inventory.by_node[node]
        candidates: list[list[frozenset[int] | None]] = []
        for alternatives, per_request in zip(shape.requests, matches, strict=True):
            row: list[frozenset[int] | None] = []
            for alternative, m in zip(alternatives, per_request, strict=True):
                if m.grouping is None:
                    row.append(frozenset())
                    continue
                groups = m.grouping.device_group
                if any(groups[i] in m.error_groups for i in on_node):
                    row.append(None)
                elif alternative.all_devices and any(groups[i] in m.tainted_groups for i in on_node):
                    row.append(frozenset())  # "All" includes a device whose taint it does not tolerate
                else:
                    row.append(frozenset(i for i in on_node if groups[i] in m.matching_groups))
            candidates.append(row)
        try:
            copies = allocations.capacity_on_node(
                inventory=self.inventory, shape=shape, candidates=candidates, usage=self.usage
            )
        except allocations.SearchLimit:
            return False, -1, 0
        usable = len(set().union(*(c for row in candidates for c in row if c)))
        return copies > 0, copies, usable

    def _failures(
        self, shape: ClaimShape, matches: Sequence[Sequence[Match]], *, satisfiable: bool, reported: Sequence[Finding]
    ) -> list[Finding]:
        unknown = {(f.request, f.source, f.selector_index) for f in reported if f.rule == "cel-unknown-attribute"}
        findings = []
        for alternatives, per_request in zip(shape.requests, matches, strict=True):
            for alternative, match in zip(alternatives, per_request, strict=True):
                for failure in match.failures:
                    if (alternative.name, failure.source, failure.index) in unknown:
                        continue
                    findings.append(
                        Finding(
                            "cel-runtime-error",
                            f"selector #{failure.index} fails on {failure.devices} devices on {len(match.error_nodes)} "
                            f"nodes: {failure.message}",
                            hint=_runtime_hint(failure.message),
                            severity="warning" if satisfiable else "error",
                            request=alternative.name,
                            request_index=alternative.request_index,
                            subrequest_index=alternative.subrequest_index,
                            source=failure.source,
                            selector_index=failure.index,
                            device_class=alternative.device_class,
                        )
                    )
        return findings

    def _explain(
        self, shape: ClaimShape, matches: Sequence[Sequence[Match]], reports: Sequence[Sequence[AlternativeReport]]
    ) -> Finding:
        for alternatives, per_request, report in zip(shape.requests, matches, reports, strict=True):
            refused = all(
                explanations.capacity_refusals(self.inventory, a, m)
                for a, m in zip(alternatives, per_request, strict=True)
            )
            if any(r.nodes for r in report) and not refused:
                continue
            return explanations.explain_alternative(
                self.inventory, alternatives[0], per_request[0], cache=self._explained
            )
        for constraint in shape.constraints:
            relaxed = ClaimShape(shape.requests, tuple(c for c in shape.constraints if c is not constraint))
            nodes, _, _, _ = self._search(relaxed, matches)
            if nodes:
                kind = "distinctAttribute" if constraint.distinct else "matchAttribute"
                return explanations.unsatisfiable_together(
                    requests=[],
                    constraint=constraint.index,
                    message=f"constraint #{constraint.index} ({kind}: {constraint.attribute}) cannot hold on any "
                    "node for the devices the requests match",
                    hint=explanations.constraint_hint(self.inventory, constraint.attribute, nodes=nodes),
                )
        return explanations.unsatisfiable_together(requests=[a[0].request for a in shape.requests])


def _runtime_hint(message: str) -> str:
    if "overload" in message.lower():
        return (
            "pods using this claim stay Pending on those nodes: an attribute's type does not fit the operation. "
            "Version attributes (driverVersion, cudaComputeCapability, ...) compare with semver('580.0.0') and "
            ".isGreaterThan()/.compareTo(), capacities with quantity('40Gi'), strings with '...'"
        )
    return (
        "pods using this claim stay Pending on those nodes; guard the attribute with has(...) "
        "or use optional chaining (.? followed by orValue())"
    )


__all__ = ["AlternativeReport", "Checker", "ClaimReport"]
