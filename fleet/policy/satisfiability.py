"""Inventory findings (positions inside a claim) → findings at the YAML file's line.

``fleet.inventory`` answers "can this claim be satisfied by the devices of
that cluster?" without knowing about files: its findings name the request,
firstAvailable entry, selector (the request's or its DeviceClass's),
constraint and the line/column inside a CEL expression. This module turns
that address into the path of the field in the claim's (or the class's)
manifest and from there into file:line:col via the manifest's positions.

Compile errors and unknown DeviceClasses are already reported by the static
rules (``cel``, ``unknown-device-class``); the inventory's duplicates of them
(``cel-compile``, ``deviceclass-unknown``) are dropped here so each problem is
reported once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fleet.manifests import ClusterView, Finding, Location, Manifest, Path, Severity
from fleet.policy import walks
from fleet.policy.selectors import locate

if TYPE_CHECKING:
    # Imported where a claim is checked: validating a cluster without devices (no pools, no
    # inventory: ``fleetctl diff`` of most repositories) needs none of the inventory.
    from fleet.inventory import Checker, Inventory, holdings

DUPLICATED_RULES = frozenset({"cel-compile", "deviceclass-unknown"})


class InventoryFinding(Protocol):
    """The fields of ``fleet.inventory.findings.Finding`` this module reads."""

    @property
    def rule(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def hint(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def request_index(self) -> int | None: ...
    @property
    def subrequest_index(self) -> int | None: ...
    @property
    def source(self) -> str: ...
    @property
    def selector_index(self) -> int | None: ...
    @property
    def device_class(self) -> str | None: ...
    @property
    def constraint_index(self) -> int | None: ...
    @property
    def line(self) -> int | None: ...
    @property
    def column(self) -> int | None: ...


@dataclass(frozen=True)
class Satisfaction:
    """How one claim fares on one cluster's devices (``fleetctl validate --inventory``)."""

    cluster: str
    object: str
    location: Location
    nodes: int
    """Nodes on which the whole claim can be allocated."""
    devices: int
    """Devices the claim can use on those nodes."""
    capacity: int
    """Copies of the claim that fit at the same time (pods of a Deployment scaling up)."""
    undecided_nodes: int = 0
    source: str = ""
    """Whose devices: ``declared pools``, ``snapshot FILE`` or ``live context CTX``."""
    now: int | None = None
    """Copies that fit right now, with the devices live claims hold taken out (live cluster only)."""


@dataclass(frozen=True)
class Live:
    """A live cluster's ResourceSlices as published, the devices its allocated claims hold and its nodes."""

    slices: list[dict[str, Any]]
    claims: list[holdings.Holding]
    """The allocated claims and the devices each holds."""
    nodes: Mapping[str, Mapping[str, str]] | None = None
    """Each node's labels, by name: which GPUNodePool a node belongs to (None: the nodes were not read)."""

    @property
    def taken(self) -> frozenset[holdings.DeviceKey]:
        return frozenset().union(*(h.devices for h in self.claims))


MAX_BLOCKERS_CHECKED = 50
"""Claims tried one by one when naming what blocks a template (each try re-checks the template)."""


def evaluate(
    view: ClusterView, *, inventory: Inventory, source: str = "", live: Live | None = None
) -> tuple[list[Finding], list[Satisfaction]]:
    """Check every claim of ``view`` against ``inventory`` (that cluster's ResourceSlices).

    ``source`` says whose devices they are; findings name it, so a reader knows whether a
    prediction comes from the declared pools, a snapshot or the live cluster. With ``live``
    (``--context``), each claim also gets how many copies fit *now*, and a template that fits
    ever but not now is a ``claim-blocked`` warning naming the claims that hold its devices.
    """
    from fleet.inventory import Checker, holdings

    classes = {m.name: m for m in view.device_classes}
    class_data = {name: m.data for name, m in classes.items()}
    checker = Checker(inventory=inventory, classes=class_data)
    now_checker = None
    if live is not None:
        now_checker = Checker(inventory=inventory, classes=class_data, usage=holdings.usage(inventory, live.claims))
    findings: list[Finding] = []
    satisfied: list[Satisfaction] = []
    for claim in view.claims:
        report = _check(checker, claim)
        now = None
        if now_checker is not None and live is not None:
            now = _check(now_checker, claim).capacity
            if report.capacity > 0 and now == 0:
                findings.append(
                    _blocked(
                        claim, live=live, inventory=inventory, classes=class_data, cluster=view.name, source=source
                    )
                )
        for found in report.findings:
            finding = located(found, claim=claim, classes=classes, cluster=view.name, source=source)
            if finding is not None:
                findings.append(finding)
        satisfied.append(
            Satisfaction(
                view.name,
                claim.ref,
                claim.location,
                report.nodes,
                report.devices,
                report.capacity,
                report.undecided_nodes,
                source,
                now,
            )
        )
    return findings, satisfied


def _check(checker: Checker, claim: Manifest) -> Any:
    if claim.kind == "ResourceClaimTemplate":
        return checker.check_template(claim.data)
    return checker.check_claim(claim.data.get("spec") or {})


def _blocked(
    claim: Manifest, *, live: Live, inventory: Inventory, classes: Mapping[str, Any], cluster: str, source: str
) -> Finding:
    """``claim-blocked``: which live claims, freed alone, would let one copy fit."""
    from fleet.inventory import Checker, holdings

    taken = live.taken
    blockers = [
        held.claim
        for held in live.claims[:MAX_BLOCKERS_CHECKED]
        if _check(
            Checker(
                inventory=inventory,
                classes=classes,
                usage=holdings.usage(inventory, [h for h in live.claims if h is not held]),
            ),
            claim,
        ).capacity
        > 0
    ]
    named = ", ".join(blockers[:10]) + (f" and {len(blockers) - 10} more" if len(blockers) > 10 else "")
    held = (
        f"the devices it needs are held by {named}"
        if blockers
        else (f"no single claim frees enough; {len(live.claims)} allocated claim(s) hold {len(taken)} device(s)")
    )
    return Finding(
        claim.location,
        "claim-blocked",
        f"{claim.ref} fits this cluster but no copy fits right now: {held} (devices: {source})",
        severity="warning",
        hint="pods using it stay Pending until those claims are released (or more nodes join)",
        object=claim.ref,
        cluster=cluster,
    )


def located(
    found: InventoryFinding, *, claim: Manifest, classes: Mapping[str, Manifest], cluster: str, source: str = ""
) -> Finding | None:
    """The repository finding for one inventory finding about ``claim`` (None if a duplicate)."""
    if found.rule in DUPLICATED_RULES:
        return None
    where = _location(found, claim=claim, classes=classes)
    severity: Severity = "warning" if found.severity == "warning" else "error"
    message = f"{found.message} (devices: {source})" if source else found.message
    return Finding(where, found.rule, message, severity=severity, hint=found.hint, object=claim.ref, cluster=cluster)


def _location(found: InventoryFinding, *, claim: Manifest, classes: Mapping[str, Manifest]) -> Location:
    name = found.device_class
    if found.source == "class" and name is not None and name in classes and found.selector_index is not None:
        device_class = classes[name]
        path: Path = ("spec", "selectors", found.selector_index, "cel", "expression")
        return _in_expression(device_class, path, found)
    devices = walks.devices_path(claim)
    if found.source == "constraint" and found.constraint_index is not None:
        return claim.positions.at((*devices, "constraints", found.constraint_index))
    if found.request_index is None:
        return claim.positions.at((*devices, "requests"))
    request: Path = (*devices, "requests", found.request_index)
    request = (
        (*request, "exactly")
        if found.subrequest_index is None
        else (*request, "firstAvailable", found.subrequest_index)
    )
    if found.source == "request" and found.selector_index is not None:
        return _in_expression(claim, (*request, "selectors", found.selector_index, "cel", "expression"), found)
    return claim.positions.at(request)


def _in_expression(manifest: Manifest, path: Path, found: InventoryFinding) -> Location:
    if found.line is not None and found.column is not None:
        return locate(manifest, path, line=found.line, col=found.column)
    return locate(manifest, path, line=1, col=1)  # the whole selector: where its text starts


__all__ = ["DUPLICATED_RULES", "InventoryFinding", "Satisfaction", "evaluate", "located"]
