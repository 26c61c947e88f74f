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
import json
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

    def __init__(self, *, inventory: Inventory, classes: Mapping[str, Mapping[str, Any]]) -> None:
        self.inventory = inventory
        self.matcher = Matcher(inventory=inventory, classes=classes)
        self._claims: dict[str, ClaimReport] = {}
        self._shapes: dict[tuple[object, ...], tuple[bool, int, int]] = {}

    def check_template(self, template: Mapping[str, Any]) -> ClaimReport:
        """A ResourceClaimTemplate object (``spec.spec.devices``)."""
        return self.check_claim(((template.get("spec") or {}).get("spec")) or {})

    def check_claim(self, spec: Mapping[str, Any]) -> ClaimReport:
        """A ResourceClaim spec (``{devices: {requests, constraints, config}}``)."""
        key = json.dumps(spec.get("devices") or {}, sort_keys=True, default=str)
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
            tuple(
                AlternativeReport(
                    alt.name,
                    len(m.matching),
                    sum(1 for n, c in m.per_node.items() if _enough(alt, c) and n not in m.error_nodes),
                )
                for alt, m in zip(alternatives, per_request, strict=True)
            )
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
        return (
            len(shape.requests) == 1
            and len(shape.requests[0]) == 1
            and not shape.constraints
            and not self.inventory.counters
        )

    @staticmethod
    def _count_simple(alternative: Alternative, match: Match) -> tuple[int, int, int, int]:
        nodes = devices = capacity = 0
        for node, count in match.per_node.items():
            if node in match.error_nodes or not _enough(alternative, count):
                continue
            nodes += 1
            devices += count
            capacity += 1 if alternative.all_devices else count // alternative.count
        return nodes, devices, capacity, 0

    def _search(self, shape: ClaimShape, matches: Sequence[Sequence[Match]]) -> tuple[int, int, int, int]:
        sets = [[(frozenset(m.matching), m.error_nodes) for m in per_request] for per_request in matches]
        nodes = devices = capacity = undecided = 0
        for node in self.inventory.nodes:
            if not all(
                any(_enough(alt, m.per_node.get(node, 0)) for alt, m in zip(alts, per_request, strict=True))
                for alts, per_request in zip(shape.requests, matches, strict=True)
            ):
                continue
            candidates = allocations.candidates_on_node(sets, node, self.inventory.by_node)
            on_node = self.inventory.by_node[node]
            key = (
                repr([[(a.name, a.count, a.all_devices) for a in r] for r in shape.requests]),
                repr([(c.attribute, c.distinct, c.requests) for c in shape.constraints]),
                allocations.node_shape(self.inventory, shape, candidates, on_node),
            )
            result = self._shapes.get(key)
            if result is None:
                try:
                    copies = allocations.capacity_on_node(inventory=self.inventory, shape=shape, candidates=candidates)
                    usable = len(set().union(*(c for per_request in candidates for c in per_request if c)))
                    result = (copies > 0, copies, usable)
                except allocations.SearchLimit:
                    result = (False, -1, 0)
                self._shapes[key] = result
            ok, copies, usable = result
            if copies < 0:
                undecided += 1
            elif ok:
                nodes += 1
                devices += usable
                capacity += copies
        return nodes, devices, capacity, undecided

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
                            hint="pods using this claim stay Pending on those nodes; guard the attribute with has(...) "
                            "or use optional chaining (.? followed by orValue())",
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
            if any(r.nodes for r in report):
                continue
            return explanations.explain_alternative(self.inventory, alternatives[0], per_request[0])
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
                    hint=f"without it the claim fits on {nodes} nodes; check that the devices publish "
                    f"{constraint.attribute} and that enough of them share (or differ in) its value on one node",
                )
        return explanations.unsatisfiable_together(requests=[a[0].request for a in shape.requests])


__all__ = ["AlternativeReport", "Checker", "ClaimReport"]
