"""A cluster's GPU maintenances as people follow them: the FleetSync, ``fleetctl status``, the console.

A GPUMaintenance (``fleet.manifests.maintenances``) is, in the cluster, DeviceTaintRules labelled with
its name (``fleet.engine.maintenances.LABEL``) that fleet's engine moves one effect per run. What a
person asks of it is not a rule's effect but where the repair stands, on which devices, for whose
pods, and what it waits for. ``read`` answers that per maintenance, from the live rules grouped by
the label, the claims allocated on their devices (``fleet.engine.evictions.device_claims``, whose
``reservedFor`` pods are the pods waited on, each with its team) and the FleetSync's
``status.waiting`` rows (what a held step waits for and until when):

- ``Previewing`` (rules at ``None``): the devices are marked; the API server's eviction controller
  writes in each rule's status what ``NoExecute`` would evict (``preview``).
- ``Waiting``: the next step is held for an earlier rollout wave or the maintenance window
  (``waiting``: for what, until when).
- ``Out of scheduling`` (``NoSchedule``): nothing new lands there; the pods on the devices run on,
  waited on or drained before ``NoExecute``.
- ``Emptying`` (``NoExecute``): claims are still allocated there; the eviction controller evicts
  their pods.
- ``Emptied`` (``NoExecute``): no claim is left on the devices; the repair may start.

A maintenance whose rules stand at different effects is as far as its least advanced rule. The
controller writes each one into its FleetSync (``document``) every reconcile, and ``fleetctl
status``, which reads only the FleetSync, reads it back (``from_status``); the console reads the
live rules. ``marks`` says which maintenance's taint each device carries (the console's node page),
as ``fleet.inventory.taintrules`` merges the rules into the slices for the scheduler's view.
Pure: no API call, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fleet.engine import evictions
from fleet.engine.disruptions import claim_name, holders, listed
from fleet.engine.maintenances import EFFECTS, REASON, TAINT_KEY, effect_of, owner, target_of
from fleet.inventory import taintrules
from fleet.inventory.leftovers import taint_text

Obj = Mapping[str, Any]
Phase = Literal["Previewing", "Waiting", "Out of scheduling", "Emptying", "Emptied"]
PHASES: tuple[Phase, ...] = ("Previewing", "Waiting", "Out of scheduling", "Emptying", "Emptied")
KIND = "DeviceTaintRule"
HELD_FIRST = ("wave", "window", "claims", "preview")
"""Which wait a maintenance shows when its rules wait for several things: what holds it longest first."""


@dataclass(frozen=True)
class Pod:
    """A pod that holds a claim allocated on a device under maintenance."""

    namespace: str
    name: str
    team: str = ""
    """The fleet team of its namespace ("" when none)."""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Device:
    """One device under maintenance, and the effect its rule has now."""

    node: str
    """The node that publishes it (the pool's name when no slice says)."""
    name: str
    """"" for a rule taking a whole pool that no slice publishes now."""
    effect: str
    rule: str = field(default="", compare=False)
    """The DeviceTaintRule that takes it ("" when read back from a FleetSync, which does not name rules)."""

    def __str__(self) -> str:
        return f"{self.node}/{self.name}" if self.name else f"{self.node} (all devices)"


@dataclass(frozen=True)
class Waiting:
    """What the maintenance's next step waits for (a ``status.waiting`` row of one of its rules)."""

    on: str
    """``wave``, ``window``, ``claims`` or ``preview`` (``fleet.engine.waits.On``)."""
    reason: str
    until: str = ""
    """When fleet looks again (RFC 3339): the window's opening, the deadline; "" when open-ended."""
    overdue: bool = False


@dataclass(frozen=True)
class Mark:
    """A maintenance's taint on one device, as the device's node page shows it."""

    maintenance: str
    effect: str
    taint: str
    """``fleet.gpufleet.dev/maintenance=repair:NoSchedule``."""


@dataclass(frozen=True)
class Maintenance:
    """One GPUMaintenance as the cluster holds it."""

    name: str
    phase: Phase
    effect: str
    """The effect of its rules; the least advanced one when they differ."""
    reason: str
    where: str
    """The devices in words: ``every device of node h100x8-02``, ``device gpu-3 of node a`` (``where``)."""
    devices: tuple[Device, ...]
    device_count: int
    pods: tuple[Pod, ...]
    """The pods waited on: those the claims allocated on the devices are reserved for."""
    pod_count: int
    waiting: Waiting | None = None
    preview: str = ""
    """What the API server's eviction controller says in the rules' status (a ``None`` rule's preview
    of what ``NoExecute`` would evict, a ``NoExecute`` rule's progress)."""

    def counts(self) -> dict[str, int]:
        """Devices per effect, every effect named (``fleet_maintenance_devices``)."""
        out = dict.fromkeys(EFFECTS, 0)
        for device in self.devices:
            out[device.effect] = out.get(device.effect, 0) + 1
        return out

    def document(self, *, listed: int) -> dict[str, Any]:
        """The FleetSync's ``status.maintenances`` item: lists cut at ``listed`` items, the counts beside them."""
        out: dict[str, Any] = {
            "name": self.name,
            "phase": self.phase,
            "effect": self.effect,
            "reason": self.reason[:1000],
            "where": self.where,
            "devices": [str(d) for d in self.devices[:listed]],
            "deviceCount": self.device_count,
            "podsWaitedOn": [{"namespace": p.namespace, "name": p.name, "team": p.team} for p in self.pods[:listed]],
            "podCount": self.pod_count,
            "preview": self.preview[:1000],
        }
        if self.waiting is not None:
            w = self.waiting
            out["waiting"] = {"on": w.on, "reason": w.reason[:1000], "until": w.until, "overdue": w.overdue}
        return out


def where(devices: Sequence[Device], *, whole: bool = False) -> str:
    """``every device of node a`` (``whole``: rules that take whole pools), ``device gpu-3 of node a``,
    ``3 devices of node a (gpu-0, gpu-1, gpu-2)``, ``16 devices of nodes a, b``."""
    nodes = sorted({d.node for d in devices})
    if not devices:
        return "no device"
    if len(nodes) > 1:
        return f"{len(devices)} devices of nodes {listed(nodes)}"
    if whole:
        return f"every device of node {nodes[0]}"
    if len(devices) == 1:
        return f"device {devices[0].name} of node {nodes[0]}"
    return f"{len(devices)} devices of node {nodes[0]} ({listed([d.name for d in devices])})"


def _published(slices: Iterable[Obj], wanted: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """(driver, pool) → (its node, its device names), for the pools ``wanted``."""
    out: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        if key not in wanted:
            continue
        names = out.setdefault(key, (str(spec.get("nodeName") or key[1]), []))[1]
        names += [str(d.get("name")) for d in spec.get("devices") or ()]
    return out


def _devices(rule: Obj, pools: Mapping[tuple[str, str], tuple[str, list[str]]]) -> list[Device]:
    target, name = target_of(rule), _name(rule)
    effect = effect_of(rule) or "None"
    node, names = pools.get((target.driver, target.pool), (target.pool, []))
    if target.device:
        return [Device(node, target.device, effect, name)]
    return [Device(node, n, effect, name) for n in sorted(set(names))] or [Device(node, "", effect, name)]


def _waiting(rows: Iterable[Obj], names: set[str]) -> Waiting | None:
    found = [
        Waiting(
            on=str(r.get("waitsFor") or ""),
            reason=str(r.get("reason") or ""),
            until=str(r.get("until") or ""),
            overdue=bool(r.get("overdue")),
        )
        for r in rows
        if r.get("kind") == KIND and r.get("name") in names
    ]
    ranked = sorted(found, key=lambda w: HELD_FIRST.index(w.on) if w.on in HELD_FIRST else len(HELD_FIRST))
    return ranked[0] if ranked else None


def _preview(rules: Sequence[Obj], devices: Mapping[str, list[Device]]) -> str:
    said: list[tuple[str, str]] = []
    for rule in rules:
        found = evictions.preview(rule)
        if found is not None and found.said and found.reason != "OtherEffect":
            said.append((where(devices[_name(rule)], whole=not target_of(rule).device), found.said))
    if len({text for _, text in said}) <= 1:
        return said[0][1] if said else ""
    return "; ".join(f"{at}: {text}" for at, text in said)


def _pod(claim: Obj, name: str, teams: Mapping[str, str]) -> Pod:
    namespace = str((claim.get("metadata") or {}).get("namespace") or "")
    return Pod(namespace, name, teams.get(namespace, ""))


def _name(rule: Obj) -> str:
    return str((rule.get("metadata") or {}).get("name") or "")


def phase_of(effect: str, *, waiting: Waiting | None, claims: int) -> Phase:
    """The phase of a maintenance whose least advanced rule is at ``effect``."""
    if waiting is not None and waiting.on in ("wave", "window"):
        return "Waiting"
    if effect == "None":
        return "Previewing"
    if effect == "NoSchedule":
        return "Out of scheduling"
    return "Emptying" if claims else "Emptied"


def read(
    *,
    rules: Iterable[Obj],
    claims: Iterable[Obj],
    slices: Iterable[Obj],
    teams: Mapping[str, str],
    waiting: Iterable[Obj] = (),
) -> list[Maintenance]:
    """Every GPUMaintenance the live DeviceTaintRules ``rules`` carry out, by name; ``teams``: namespace →
    team; ``waiting``: the FleetSync's ``status.waiting`` rows."""
    grouped: dict[str, list[Obj]] = {}
    for rule in rules:
        if rule.get("kind", KIND) == KIND and owner(rule):
            grouped.setdefault(owner(rule), []).append(rule)
    if not grouped:
        return []
    wanted = {(target_of(r).driver, target_of(r).pool) for group in grouped.values() for r in group}
    pools = _published(slices, wanted)
    by_device = evictions.device_claims(claims)
    rows = list(waiting)
    out: list[Maintenance] = []
    for name, group in sorted(grouped.items()):
        group.sort(key=_name)
        devices = {_name(r): _devices(r, pools) for r in group}
        held: dict[str, Obj] = {}
        for rule in group:
            held.update((claim_name(c), c) for c in evictions.claims_on(target_of(rule), by_device))
        pods = sorted({_pod(c, pod, teams) for c in held.values() for pod in holders(c)}, key=str)
        effect = min((effect_of(r) or "None" for r in group), key=EFFECTS.index)
        wait = _waiting(rows, set(devices))
        everything = tuple(d for r in group for d in devices[_name(r)])
        out.append(
            Maintenance(
                name=name,
                phase=phase_of(effect, waiting=wait, claims=len(held)),
                effect=effect,
                reason=str(((group[0].get("metadata") or {}).get("annotations") or {}).get(REASON) or ""),
                where=where(everything, whole=all(not target_of(r).device for r in group)),
                devices=everything,
                device_count=len(everything),
                pods=tuple(pods),
                pod_count=len(pods),
                waiting=wait,
                preview=_preview(group, devices),
            )
        )
    return out


def from_status(rows: Iterable[Obj]) -> list[Maintenance]:
    """The maintenances a FleetSync's ``status.maintenances`` lists (what the controller last saw)."""
    out: list[Maintenance] = []
    for row in rows:
        effect = str(row.get("effect") or "None")
        devices = tuple(_device(str(d), effect) for d in row.get("devices") or ())
        pods = tuple(
            Pod(str(p.get("namespace") or ""), str(p.get("name") or ""), str(p.get("team") or ""))
            for p in row.get("podsWaitedOn") or ()
        )
        held = row.get("waiting") or {}
        phase = row.get("phase")
        out.append(
            Maintenance(
                name=str(row.get("name") or ""),
                phase=next((p for p in PHASES if p == phase), "Previewing"),
                effect=effect,
                reason=str(row.get("reason") or ""),
                where=str(row.get("where") or ""),
                devices=devices,
                device_count=int(row.get("deviceCount") or len(devices)),
                pods=pods,
                pod_count=int(row.get("podCount") or len(pods)),
                waiting=Waiting(
                    on=str(held.get("on") or ""),
                    reason=str(held.get("reason") or ""),
                    until=str(held.get("until") or ""),
                    overdue=bool(held.get("overdue")),
                )
                if held
                else None,
                preview=str(row.get("preview") or ""),
            )
        )
    return out


def _device(text: str, effect: str) -> Device:
    if text.endswith(" (all devices)"):
        return Device(text.removesuffix(" (all devices)"), "", effect)
    node, _, name = text.rpartition("/")
    return Device(node, name, effect)


def marks(rules: Iterable[Obj], slices: Sequence[Obj]) -> dict[str, tuple[Mark, ...]]:
    """Device id (``driver/pool/device``) → the maintenances' taints it carries, as the scheduler merges
    the rules into the slices (``fleet.inventory.taintrules``)."""
    mine = [r for r in rules if r.get("kind", KIND) == KIND and owner(r)]
    if not mine:
        return {}
    out: dict[str, tuple[Mark, ...]] = {}
    for item in taintrules.tainted(slices, mine):
        spec = item.get("spec") or {}
        where = f"{spec.get('driver')}/{(spec.get('pool') or {}).get('name')}"
        for device in spec.get("devices") or ():
            found = tuple(
                Mark(str(t.get("value") or ""), str(t.get("effect") or "None"), taint_text(t))
                for t in device.get("taints") or ()
                if t.get("key") == TAINT_KEY
            )
            if found:
                out[f"{where}/{device.get('name')}"] = found
    return out


__all__ = [
    "PHASES",
    "Device",
    "Maintenance",
    "Mark",
    "Phase",
    "Pod",
    "Waiting",
    "from_status",
    "marks",
    "phase_of",
    "read",
    "where",
]
