"""Which devices an alternative can use: class selectors AND request selectors, per device shape.

Selectors are evaluated in the scheduler's order (``isSelectable``): the
class's selectors first, then the request's, stopping at the first false or
error. A runtime error does not make a device "not matching" — it aborts the
allocation attempt on that node (``CEL runtime error`` in the pod's events), so
such nodes are recorded separately and never count as satisfying.

Evaluation runs once per distinct projection of the devices onto what the
alternative's selectors read (:meth:`Inventory.groups`), and results are cached
per (class, selectors, tolerations), so 10,000 templates that reuse a few dozen
selectors cost a few dozen evaluations per device shape.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from fleet import cel
from fleet.cel.devices import Projection
from fleet.inventory.findings import Finding, Source
from fleet.inventory.inventories import ALL_NODES, Inventory, InventoryDevice
from fleet.inventory.requests import Alternative


@dataclasses.dataclass(frozen=True)
class CompiledSelector:
    source: Source  # "class" | "request"
    index: int
    expression: str
    selector: cel.Selector


@dataclasses.dataclass(frozen=True)
class SelectorFailure:
    source: Source
    index: int
    message: str
    devices: int


@dataclasses.dataclass
class Match:
    """Devices usable by one alternative, per node, and where selectors fail."""

    selectors: list[CompiledSelector]
    matching: list[int]
    per_node: Mapping[str, int]
    error_nodes: frozenset[str]
    failures: list[SelectorFailure]
    findings: list[Finding]
    class_known: bool

    @property
    def usable(self) -> bool:
        return self.class_known and not any(f.rule == "cel-compile" for f in self.findings)


def _tolerates(tolerations: tuple[Mapping[str, Any], ...], taint: Mapping[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("operator", "Equal") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _allowed(device: InventoryDevice, tolerations: tuple[Mapping[str, Any], ...]) -> bool:
    return all(
        taint.get("effect") not in ("NoSchedule", "NoExecute") or _tolerates(tolerations, taint)
        for taint in device.taints
    )


class Matcher:
    """Evaluates alternatives against one inventory and one set of DeviceClasses (by name)."""

    def __init__(self, *, inventory: Inventory, classes: Mapping[str, Mapping[str, Any]]) -> None:
        self.inventory = inventory
        self.classes = dict(classes)
        self._matches: dict[tuple[object, ...], Match] = {}
        self._per_node: dict[tuple[object, ...], tuple[Mapping[str, int], frozenset[str]]] = {}
        self._tainted = any(d.taints for d in inventory.devices)

    def class_selectors(self, name: str) -> tuple[str, ...]:
        spec = (self.classes.get(name) or {}).get("spec") or {}
        return tuple(str(((s or {}).get("cel") or {}).get("expression", "")) for s in spec.get("selectors") or [])

    def match(self, alternative: Alternative) -> Match:
        key = (alternative.device_class, alternative.selectors, repr(alternative.tolerations))
        found = self._matches.get(key)
        if found is None:
            found = self._matches[key] = self._evaluate(alternative)
        return found

    def _compile(self, alternative: Alternative) -> tuple[list[CompiledSelector], list[Finding]]:
        compiled, findings = [], []
        sources: tuple[tuple[Source, tuple[str, ...]], ...] = (
            ("class", self.class_selectors(alternative.device_class)),
            ("request", alternative.selectors),
        )
        for source, expressions in sources:
            for index, expression in enumerate(expressions):
                try:
                    compiled.append(CompiledSelector(source, index, expression, cel.compile_selector(expression)))
                except cel.SelectorCompileError as err:
                    issue = err.issues[0]
                    findings.append(
                        Finding(
                            "cel-compile",
                            f"{err.what} ({issue.line}:{issue.column} in the expression)",
                            hint=err.hint,
                            request=alternative.name,
                            request_index=alternative.request_index,
                            subrequest_index=alternative.subrequest_index,
                            source=source,
                            selector_index=index,
                            device_class=alternative.device_class,
                            offset=issue.offset,
                            line=issue.line,
                            column=issue.column,
                        )
                    )
        return compiled, findings

    def _evaluate(self, alternative: Alternative) -> Match:
        if alternative.device_class not in self.classes:
            finding = Finding(
                "deviceclass-unknown",
                f"device class {alternative.device_class!r} does not exist",
                hint=f"known device classes: {', '.join(sorted(self.classes)) or 'none'}; pods using this claim "
                "stay Pending with 'device class ... does not exist'",
                request=alternative.name,
                request_index=alternative.request_index,
                subrequest_index=alternative.subrequest_index,
                device_class=alternative.device_class,
            )
            return Match([], [], {}, frozenset(), [], [finding], class_known=False)
        compiled, findings = self._compile(alternative)
        if findings:
            return Match(compiled, [], {}, frozenset(), [], findings, class_known=True)
        references = cel.References()
        for item in compiled:
            references = references.merged(item.selector.references)
        matching_keys, errors = [], Counter[tuple[Source, int, str]]()
        error_devices: list[int] = []
        groups = self.inventory.groups(references)
        for projection, group in groups.items():
            status = self._status(compiled, projection)
            if status is True:
                matching_keys.append(projection)
            elif status is not False:
                errors[status] += len(group.indices)
                error_devices += group.indices
        per_node, matching = self._nodes(references, groups, matching_keys, alternative.tolerations)
        error_nodes = frozenset(self.inventory.devices[i].node for i in error_devices)
        if ALL_NODES in error_nodes:
            error_nodes = frozenset(self.inventory.nodes)
        failures = [SelectorFailure(s, i, m, n) for (s, i, m), n in errors.items()]
        return Match(compiled, matching, per_node, error_nodes, failures, [], class_known=True)

    @staticmethod
    def _status(compiled: list[CompiledSelector], projection: Projection) -> bool | tuple[Source, int, str]:
        for item in compiled:
            try:
                if not item.selector.evaluate_projection(projection):
                    return False
            except cel.SelectorRuntimeError as err:
                return (item.source, item.index, err.what)
        return True

    def _nodes(
        self,
        references: cel.References,
        groups: Mapping[Any, Any],
        keys: list[Any],
        tolerations: tuple[Mapping[str, Any], ...],
    ) -> tuple[Mapping[str, int], list[int]]:
        cache_key = (references.signature, frozenset(keys), repr(tolerations) if self._tainted else "")
        cached = self._per_node.get(cache_key)
        matching = [i for k in keys for i in groups[k].indices]
        if self._tainted:
            matching = [i for i in matching if _allowed(self.inventory.devices[i], tolerations)]
        if cached is None:
            counts: Counter[str] = Counter()
            if self._tainted:
                counts.update(self.inventory.devices[i].node for i in matching)
            else:
                for k in keys:
                    counts.update(groups[k].per_node)
            shared = counts.pop(ALL_NODES, 0)
            if shared:
                for node in self.inventory.nodes:
                    counts[node] += shared
            cached = (dict(counts), frozenset())
            self._per_node[cache_key] = cached
        return cached[0], matching


__all__ = ["CompiledSelector", "Match", "Matcher", "SelectorFailure"]
