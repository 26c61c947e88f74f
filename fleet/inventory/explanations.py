"""Why a claim can never be satisfied, and which selector names an attribute nobody publishes.

A pending pod says little ("cannot allocate all claims"). The guide's
troubleshooting is: find the selector that excludes everything, then look at
what the devices actually publish. This module does that mechanically: the
first request that fits no node, its DeviceClass, then each top-level ``&&``
clause of each selector in order; the first clause no device passes is named
with its offset in the expression, together with the values the devices do
have for the attributes that clause reads (e.g. the ``productName`` values).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from fleet import cel
from fleet.inventory import capacities
from fleet.inventory.findings import Finding
from fleet.inventory.inventories import Inventory
from fleet.inventory.matches import CompiledSelector, Match
from fleet.inventory.requests import Alternative

# Attributes the NVIDIA DRA driver removed or renamed (its full-GPU and MIG attributes, HEAD vs v0.4.1).
RENAMED = {
    ("gpu.nvidia.com", "pcieBusID"): ("resource.kubernetes.io", "pciBusID"),
    ("gpu.nvidia.com", "pciBusID"): ("resource.kubernetes.io", "pciBusID"),
    ("gpu.nvidia.com", "pcieRoot"): ("resource.kubernetes.io", "pcieRoot"),
    ("gpu.nvidia.com", "numa"): ("resource.kubernetes.io", "numaNode"),
    ("gpu.nvidia.com", "parentIndex"): ("gpu.nvidia.com", "parentUUID"),
}
REMOVED = {
    ("gpu.nvidia.com", "index"): "select by uuid or device.attributes['resource.kubernetes.io'].pciBusID",
    ("gpu.nvidia.com", "minor"): "select by uuid or device.attributes['resource.kubernetes.io'].pciBusID",
}


def located(alternative: Alternative, selector: CompiledSelector | None = None) -> Finding:
    """A finding skeleton pointing at the alternative (and selector); fill it in with ``replace``."""
    return Finding(
        "claim-unsatisfiable",
        "",
        request=alternative.name,
        request_index=alternative.request_index,
        subrequest_index=alternative.subrequest_index,
        device_class=alternative.device_class,
        source=selector.source if selector else "request",
        selector_index=selector.index if selector else None,
    )


def _cel_path(kind: str, domain: str, name: str) -> str:
    return f"device.{kind}['{domain}'].{name}"


def display(value: object) -> str:
    if isinstance(value, cel.Quantity):
        return value.display()
    return repr(value) if isinstance(value, str) else str(value)


def closest_values(
    inventory: Inventory, uses: Iterable[cel.NameUse], devices: Iterable[int], *, limit: int = 6
) -> list[str]:
    """``productName = 'NVIDIA H100 80GB HBM3' (8), ...`` for each name read, over ``devices``."""
    indices = list(devices)
    out = []
    for kind, domain, name in sorted({(u.kind, u.domain, u.name) for u in uses}):
        column = inventory.column(kind, domain, name, presence=False)
        ids = Counter(column[i] for i in indices)
        ids.pop(-1, None)
        if not ids:
            out.append(f"{name}: not published by these devices")
            continue
        first: dict[int, int] = {}
        for i in indices:
            first.setdefault(column[i], i)
        counts = [
            (display(inventory.devices[first[v]].device.get(kind, domain, name)), n) for v, n in ids.most_common()
        ]
        shown = ", ".join(f"{value} ({n})" for value, n in counts[:limit])
        more = f", … {len(counts) - limit} more" if len(counts) > limit else ""
        out.append(f"{name} = {shown}{more}")
    return out


def _cached_values(
    inventory: Inventory,
    uses: Iterable[cel.NameUse],
    in_class: set[int],
    cache: dict[object, object],
    class_key: object,
) -> list[str]:
    """closest_values per name, remembered per DeviceClass (the device set is the class's)."""
    out: list[str] = []
    for use in sorted({(u.kind, u.domain, u.name): u for u in uses}.values(), key=lambda u: (u.kind, u.domain, u.name)):
        key = ("values", class_key, use.kind, use.domain, use.name)
        found = cache.get(key)
        if not isinstance(found, list):
            found = cache[key] = closest_values(inventory, [use], in_class)
        out += found
    return out


def unknown_attributes(inventory: Inventory, alternative: Alternative, match: Match) -> list[Finding]:
    """Selectors reading a name that no device publishes in a domain that exists."""
    findings = []
    for selector in match.selectors:
        for use, hint in unknown_names(inventory, selector.selector):
            line, column = cel.position(selector.expression, use.offset)
            what = "attribute" if use.kind == "attributes" else "capacity"
            findings.append(
                replace(
                    located(alternative, selector),
                    rule="cel-unknown-attribute",
                    message=f"no device publishes {what} {use.domain}/{use.name}; the selector fails with "
                    f"'no such key: {use.name}' and pods stay Pending",
                    hint=hint,
                    offset=use.offset,
                    line=line,
                    column=column,
                )
            )
    return findings


def unknown_names(inventory: Inventory, selector: cel.Selector) -> list[tuple[cel.NameUse, str]]:
    """The names ``selector`` reads unguarded that no device publishes in a domain that exists, each with
    a hint: the current name of a renamed attribute, the domain that has it, or the closest names."""
    found = []
    for use in selector.references.names:
        published = inventory.published(use.kind)
        if use.guarded or use.domain not in published or use.name in published[use.domain]:
            continue
        key = (use.domain, use.name)
        if key in RENAMED:
            domain, name = RENAMED[key]
            hint = f"it is now {domain}/{name}: use {_cel_path(use.kind, domain, name)}"
        elif key in REMOVED:
            hint = f"the driver no longer publishes it; {REMOVED[key]}"
        else:
            others = sorted(published[use.domain])
            close = difflib.get_close_matches(use.name, others, n=3)
            elsewhere = [d for d, names in published.items() if use.name in names]
            if elsewhere:
                hint = f"it is published in domain {elsewhere[0]!r}: use {_cel_path(use.kind, elsewhere[0], use.name)}"
            elif close:
                hint = f"did you mean {', '.join(close)}? published names: {', '.join(others)}"
            else:
                hint = f"published names in {use.domain}: {', '.join(others)}"
        found.append((use, hint))
    return found


def constraint_hint(inventory: Inventory, attribute: str, *, nodes: int) -> str:
    """Why a ``matchAttribute``/``distinctAttribute`` on ``attribute`` fails where the claim fits without it."""
    domain, _, name = attribute.partition("/")
    published = inventory.published("attributes")
    if name not in published.get(domain, set()):
        elsewhere = sorted(d for d, names in published.items() if name in names)
        if elsewhere:
            return (
                f"no device publishes {attribute}; it is published as {elsewhere[0]}/{name}: "
                f"write {elsewhere[0]}/{name} (without the constraint the claim fits on {nodes} nodes)"
            )
        close = difflib.get_close_matches(name, sorted(published.get(domain, set())), n=3)
        if close:
            return f"no device publishes {attribute}; did you mean {', '.join(f'{domain}/{c}' for c in close)}?"
    return (
        f"without it the claim fits on {nodes} nodes; check that the devices publish "
        f"{attribute} and that enough of them share (or differ in) its value on one node"
    )


def _passing(inventory: Inventory, selectors: Sequence[cel.Selector], within: set[int] | None) -> set[int]:
    references = cel.References()
    for selector in selectors:
        references = references.merged(selector.references)
    passing: set[int] = set()
    for projection, indices in inventory.groups(references).items():
        if within is not None and within.isdisjoint(indices):
            continue
        try:
            ok = all(selector.evaluate_projection(projection) for selector in selectors)
        except cel.SelectorRuntimeError:
            ok = False
        if ok:
            passing.update(indices if within is None else within.intersection(indices))
    return passing


def explain_alternative(
    inventory: Inventory, alternative: Alternative, match: Match, *, cache: dict[object, object] | None = None
) -> Finding:
    """Why ``alternative`` fits no node; ``cache`` (per inventory) keeps class-wide work between calls."""
    cache = {} if cache is None else cache
    base = located(alternative)
    class_selectors = [s for s in match.selectors if s.source == "class"]
    class_key = ("class", tuple(s.expression for s in class_selectors))
    in_class = cache.get(class_key)
    if not isinstance(in_class, set):
        in_class = cache[class_key] = _passing(inventory, [s.selector for s in class_selectors], None)
    if not in_class:
        drivers = sorted({d.driver for d in inventory.devices}) or ["none"]
        return replace(
            base,
            message=f"device class {alternative.device_class!r} selects no device in this cluster",
            hint=f"drivers publishing devices: {', '.join(drivers)}; check the class's selectors",
            source="class",
        )
    for selector in (s for s in match.selectors if s.source == "request"):
        for clause in selector.selector.clauses:
            try:
                compiled = cel.compile_selector(clause.text)
            except cel.SelectorCompileError:
                continue
            if _passing(inventory, [compiled], in_class):
                continue
            values = _cached_values(inventory, compiled.references.names, in_class, cache, class_key)
            line, column = cel.position(selector.expression, clause.offset)
            return replace(
                located(alternative, selector),
                message=f"selector #{selector.index} clause `{clause.text}` excludes every device of class "
                f"{alternative.device_class!r} ({len(in_class)} devices)",
                hint="; ".join(values) or "no device has the attributes this clause reads",
                offset=clause.offset,
                line=line,
                column=column,
            )
    refused = capacity_refusals(inventory, alternative, match)
    if refused:
        return replace(
            base,
            message=f"request {alternative.name!r}: capacity.requests fit none of the {len(match.matching)} devices "
            f"it selects: {refused}",
            hint="ask for an amount the device's requestPolicy allows (requests are rounded up to its step or "
            "valid values, never past max) and no more than the device has",
        )
    tainted = _tainted(inventory, match)
    if tainted:
        most = max(match.per_node.values(), default=0)
        shown = ", ".join(f"{node}/{device} ({taint})" for node, device, taint in tainted[:5])
        more = f" and {len(tainted) - 5} more" if len(tainted) > 5 else ""
        keys = sorted({taint.split("=")[0].split(":")[0] for _, _, taint in tainted})
        return replace(
            base,
            rule="claim-unsatisfiable",
            message=f"request {alternative.name!r}: {len(tainted)} device(s) it selects are tainted and the "
            f"request does not tolerate the taint: {shown}{more}"
            + (f"; at most {most} untainted match on one node" if most else ""),
            hint="the driver taints a GPU after an XID error or when it is lost; tolerate it only if the workload "
            "may run there: exactly.tolerations: [{key: " + keys[0] + ", operator: Exists, effect: NoSchedule}], "
            "or wait for the taint to be cleared (kubectl get resourceslice -o yaml shows devices[].taints)",
        )
    if match.matching:
        best = max(match.per_node.items(), key=lambda item: item[1], default=("", 0))
        wanted = "all matching devices" if alternative.all_devices else f"{alternative.count} devices"
        return replace(
            base,
            message=f"request {alternative.name!r} needs {wanted} on one node; at most {best[1]} match on any "
            f"node ({best[0]})",
            hint="lower count, or spread the work over several claims/pods",
        )
    if match.failures:
        failure = match.failures[0]
        return replace(
            base,
            message=f"selector #{failure.index} fails on every candidate device: {failure.message}",
            hint="guard the attribute with has(...) or fix its name",
            source=failure.source,
            selector_index=failure.index,
        )
    uses = [u for s in match.selectors if s.source == "request" for u in s.selector.references.names]
    return replace(
        base,
        message=f"the selectors of request {alternative.name!r} together exclude every "
        f"device of class {alternative.device_class!r}",
        hint="; ".join(_cached_values(inventory, uses, in_class, cache, class_key)),
    )


def capacity_refusals(inventory: Inventory, alternative: Alternative, match: Match) -> str:
    """Why every selected device refuses the request's capacity amounts ("" when some device takes them)."""
    if not alternative.capacity or not match.matching:
        return ""
    requests = dict(alternative.capacity)
    reasons: Counter[str] = Counter()
    for index in match.matching:
        why = capacities.why_not(requests, inventory.devices[index].capacities)
        if not why:
            return ""
        reasons[why] += 1
    return "; ".join(f"{why} ({n} devices)" for why, n in reasons.most_common(3))


def _tainted(inventory: Inventory, match: Match) -> list[tuple[str, str, str]]:
    """(node, device, taint) of the devices the selectors match but an untolerated taint keeps out."""
    if match.grouping is None or not match.tainted_groups:
        return []
    out = []
    for group in sorted(match.tainted_groups):
        for index in match.grouping.indices[group]:
            item = inventory.devices[index]
            for taint in item.taints:
                if taint.get("effect") in ("NoSchedule", "NoExecute"):
                    value = f"={taint['value']}" if taint.get("value") else ""
                    out.append((item.node, item.name, f"{taint.get('key')}{value}:{taint.get('effect')}"))
                    break
    return sorted(out)


def unsatisfiable_together(
    *, requests: Sequence[str], constraint: int | None = None, message: str = "", hint: str = ""
) -> Finding:
    if constraint is not None:
        return Finding("claim-unsatisfiable", message, hint=hint, source="constraint", constraint_index=constraint)
    return Finding(
        "claim-unsatisfiable",
        f"requests {', '.join(requests)} fit one by one but not together on any single node",
        hint="all devices of one claim come from one node; lower the counts or split the claim",
    )


__all__ = [
    "REMOVED",
    "RENAMED",
    "capacity_refusals",
    "closest_values",
    "constraint_hint",
    "display",
    "explain_alternative",
    "located",
    "unknown_attributes",
    "unknown_names",
    "unsatisfiable_together",
]
