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
import functools
from collections import Counter
from collections.abc import Mapping
from typing import Any

from fleet import cel
from fleet.cel.devices import Projection
from fleet.inventory.findings import Finding, Source
from fleet.inventory.groupings import Grouping
from fleet.inventory.inventories import Inventory
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
    """Devices usable by one alternative: matching groups of a grouping, and where selectors fail."""

    selectors: list[CompiledSelector]
    findings: list[Finding]
    class_known: bool
    grouping: Grouping | None = None
    matching_groups: frozenset[int] = frozenset()
    error_groups: frozenset[int] = frozenset()
    failures: list[SelectorFailure] = dataclasses.field(default_factory=list)
    inventory: Inventory | None = None
    tainted_groups: frozenset[int] = frozenset()
    """Groups the selectors match but an untolerated NoSchedule/NoExecute taint keeps out."""

    @property
    def usable(self) -> bool:
        return self.grouping is not None

    @property
    def key(self) -> tuple[object, ...]:
        """Equal keys = same devices match and fail (alternatives differing only in spelling)."""
        signature = self.grouping.references.signature if self.grouping else None
        return (signature, self.matching_groups, self.error_groups)

    def type_count(self, kind: int) -> tuple[int, bool]:
        """(matching devices, any selector error) on a node of type ``kind``."""
        assert self.grouping is not None
        counts = self.grouping.types[kind].counts  # at most the devices of one node
        matching, errors = self.matching_groups, self.error_groups
        return sum(n for g, n in counts.items() if g in matching), any(g in errors for g in counts)

    @functools.cached_property
    def matching(self) -> list[int]:
        if self.grouping is None:
            return []
        return sorted(i for g in self.matching_groups for i in self.grouping.indices[g])

    @functools.cached_property
    def per_node(self) -> dict[str, int]:
        if self.grouping is None or self.inventory is None:
            return {}
        return dict(self.grouping.nodes_per_group(self.inventory, sorted(self.matching_groups)))

    @functools.cached_property
    def error_nodes(self) -> frozenset[str]:
        if self.grouping is None:
            return frozenset()
        return frozenset(
            node
            for kind, node_type in enumerate(self.grouping.types)
            if self.type_count(kind)[1]
            for node in node_type.nodes
        )


def tolerates(tolerations: tuple[Mapping[str, Any], ...], taint: Mapping[str, Any]) -> bool:
    """Whether one of a request's ``tolerations`` tolerates the device ``taint`` (Kubernetes'
    ``resourceclaim.ToleratesTaint``: an empty effect or key matches any, ``Exists`` any value)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("operator", "Equal") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _allowed_taint(taint: Mapping[str, Any], tolerations: tuple[Mapping[str, Any], ...]) -> bool:
    return taint.get("effect") not in ("NoSchedule", "NoExecute") or tolerates(tolerations, taint)


class Matcher:
    """Evaluates alternatives against one inventory and one set of DeviceClasses (by name)."""

    def __init__(self, *, inventory: Inventory, classes: Mapping[str, Mapping[str, Any]]) -> None:
        self.inventory = inventory
        self.classes = dict(classes)
        self._matches: dict[tuple[object, ...], Match] = {}

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
            return Match([], [finding], class_known=False)
        compiled, findings = self._compile(alternative)
        if findings:
            return Match(compiled, findings, class_known=True)
        references = cel.References()
        for item in compiled:
            references = references.merged(item.selector.references)
        grouping = self.inventory.grouping(references)
        matching, errored, tainted = [], [], []
        errors: Counter[tuple[Source, int, str]] = Counter()
        for group, projection in enumerate(grouping.keys):
            status = self._status(compiled, projection)
            if status is True:
                if all(_allowed_taint(t, alternative.tolerations) for t in grouping.taints[group]):
                    matching.append(group)
                else:
                    tainted.append(group)
            elif status is not False:
                errors[status] += len(grouping.indices[group])
                errored.append(group)
        failures = [SelectorFailure(s, i, m, n) for (s, i, m), n in errors.items()]
        return Match(
            compiled,
            [],
            True,
            grouping,
            frozenset(matching),
            frozenset(errored),
            failures,
            self.inventory,
            frozenset(tainted),
        )

    @staticmethod
    def _status(compiled: list[CompiledSelector], projection: Projection) -> bool | tuple[Source, int, str]:
        for item in compiled:
            try:
                if not item.selector.evaluate_projection(projection):
                    return False
            except cel.SelectorRuntimeError as err:
                return (item.source, item.index, err.what)
        return True


__all__ = ["CompiledSelector", "Match", "Matcher", "SelectorFailure", "tolerates"]
