"""What a GPUMaintenance's step disrupts, read from the API server: pure.

A DeviceTaintRule's step to ``NoSchedule`` takes devices out of scheduling; its step to ``NoExecute``
evicts the pods of the claims allocated on them (kube-controller-manager's device-taint-eviction
controller deletes them). ``disruption`` classes a rule's write as ``fleet.engine.disruptions``
classes every other kind, from the allocated claims (their ``status.allocation`` names driver,
pool and device) and the live rule's status: the eviction controller writes there, for a rule at
``None``, how many pods ``NoExecute`` would evict in how many namespaces. That count is the API
server's; fleet adds whose pods they are (a claim's ``reservedFor``, its namespace's team). Until
the status speaks for the rule's current spec, the step to ``NoSchedule`` waits for it
(``Disruption.pending``). ``emptied_problems`` is the maintenance stage's health gate.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.engine.disruptions import Disruption, allocation, claim_name, holders, listed
from fleet.engine.maintenances import EFFECTS, Target, effect_of, target_of

EVICTION = "EvictionInProgress"
"""The condition KEP-5055's eviction controller sets on a DeviceTaintRule."""

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Preview:
    """What the API server's eviction controller says in a rule's status."""

    message: str
    current: bool
    reason: str = ""
    """The condition's reason: ``NoEffect`` (a ``None`` rule's preview), ``OtherEffect`` (``NoSchedule``:
    nothing to say), else the eviction's progress."""
    """Written for the rule's current spec (``observedGeneration`` = ``generation``)."""

    @property
    def said(self) -> str:
        """The message without the controller's note on how to refresh it (fleet's steps change the spec)."""
        return self.message.split(" This information will not be updated again", 1)[0].strip()


def preview(rule: Obj | None) -> Preview | None:
    """The rule's ``EvictionInProgress`` condition, if the eviction controller wrote one."""
    if rule is None:
        return None
    conditions = (rule.get("status") or {}).get("conditions") or ()
    found = next((c for c in conditions if c.get("type") == EVICTION), None)
    if found is None:
        return None
    generation = (rule.get("metadata") or {}).get("generation")
    observed = found.get("observedGeneration")
    return Preview(
        message=str(found.get("message") or ""),
        current=generation is None or observed == generation,
        reason=str(found.get("reason") or ""),
    )


DeviceClaims = Mapping[tuple[str, str], Mapping[str, list[Obj]]]
"""Allocated claims by the (driver, pool) then the device they hold."""


def device_claims(
    claims: Iterable[Obj], *, pools: Collection[tuple[str, str]] | None = None
) -> dict[tuple[str, str], dict[str, list[Obj]]]:
    """Allocated claims by the (driver, pool), then the device, they hold (``pools``: in those only)."""
    out: dict[tuple[str, str], dict[str, list[Obj]]] = {}
    for claim in claims:
        allocated = allocation(claim)
        if not allocated:
            continue
        for result in (allocated.get("devices") or {}).get("results") or ():
            key = (str(result.get("driver")), str(result.get("pool")))
            if pools is None or key in pools:
                out.setdefault(key, {}).setdefault(str(result.get("device")), []).append(claim)
    return out


def claims_on(target: Target, by_device: DeviceClaims) -> list[Obj]:
    """The allocated claims on ``target``'s devices (a pool rule: on any device of the pool)."""
    devices = by_device.get((target.driver, target.pool)) or {}
    found = devices.get(target.device, []) if target.device else [c for cs in devices.values() for c in cs]
    unique = {claim_name(c): c for c in found}
    return [unique[k] for k in sorted(unique)]


def pods_of(claims: Iterable[Obj], *, teams: Mapping[str, str]) -> str:
    """``team ml-research: pods a, b; namespace x: pod c`` for the pods the claims are reserved for."""
    by_owner: dict[str, list[str]] = {}
    for claim in claims:
        namespace = str((claim.get("metadata") or {}).get("namespace", ""))
        owner = f"team {teams[namespace]}" if namespace in teams else f"namespace {namespace}"
        by_owner.setdefault(owner, []).extend(f"{namespace}/{p}" for p in holders(claim))
    parts = [
        f"{owner}: pod{'s' if len(pods) != 1 else ''} {listed(sorted(pods))}"
        for owner, pods in sorted(by_owner.items())
        if pods
    ]
    return "; ".join(parts)


def disruption(
    *,
    before: Obj | None,
    after: Obj,
    claims: DeviceClaims,
    teams: Mapping[str, str],
    direct: bool = False,
) -> Disruption | None:
    """What writing ``after`` over the live rule ``before`` disrupts (None: nothing; lowering the effect
    or a first ``None`` is safe). ``teams``: namespace → team, to name whose pods."""
    old, new = effect_of(before) or "None", effect_of(after) or "None"
    if EFFECTS.index(new) <= EFFECTS.index(old):
        return None
    target = target_of(after)
    node = target.pool
    affected = claims_on(target, claims)
    said = preview(before)
    server = f"; the API server: {said.said}" if said is not None and said.said and said.reason != "OtherEffect" else ""
    pending = ""
    if new == "NoSchedule" and not direct and (said is None or not said.current):
        pending = "the API server's eviction preview (the rule's status), before the devices leave scheduling"
    pods = pods_of(affected, teams=teams)
    whose = f" ({pods})" if pods else ""
    held = f"{len(affected)} allocated claim{'s' if len(affected) != 1 else ''}"
    if new == "NoSchedule":
        running = f"; {held} {'keeps' if len(affected) == 1 else 'keep'} running{whose}" if affected else ""
        return Disruption(
            reason=f"takes {target_text(target)} out of scheduling{running}{server}",
            nodes=frozenset({node}),
            pending=pending,
        )
    if not affected:
        return Disruption(
            reason=f"empties {target_text(target)}: no claim is allocated there{server}", nodes=frozenset({node})
        )
    return Disruption(
        reason=f"evicts the pods of {held} on {target_text(target)}{whose}{server}",
        nodes=frozenset({node}),
        claims=tuple(claim_name(c) for c in affected),
    )


def target_text(target: Target) -> str:
    return f"device {target.device} of pool {target.pool}" if target.device else f"every device of pool {target.pool}"


# -- the gate -----------------------------------------------------------------------------------


def emptied_problems(expected: Iterable[Obj], *, claims: Iterable[Obj]) -> list[str]:
    """For each rule written with ``NoExecute``: the claims still allocated on its devices."""
    by_device = device_claims(claims)
    out: list[str] = []
    for rule in expected:
        if rule.get("kind") != "DeviceTaintRule" or effect_of(rule) != "NoExecute":
            continue
        left = claims_on(target_of(rule), by_device)
        if left:
            name = (rule.get("metadata") or {}).get("name")
            out.append(
                f"DeviceTaintRule {name}: {len(left)} claim{'s' if len(left) != 1 else ''} still allocated on "
                f"{target_text(target_of(rule))} ({listed([claim_name(c) for c in left])})"
            )
    return out


__all__ = [
    "EVICTION",
    "DeviceClaims",
    "Preview",
    "claims_on",
    "device_claims",
    "disruption",
    "emptied_problems",
    "pods_of",
    "preview",
    "target_text",
]
