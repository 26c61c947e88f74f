"""GPU device maintenance as DeviceTaintRules walked None → NoSchedule → NoExecute: pure.

A GPUMaintenance (``fleet.manifests.maintenances``) names devices; this module turns it into the
DeviceTaintRules the cluster gets and says, for each rule, the one effect this run writes:

1. **Which devices** (``select``): from the devices the live ResourceSlices publish, those in the
   named pools or nodes that pass every filter (names, uuids, a CEL selector, health taints). A
   device a rule of the maintenance already holds stays in it while the file exists (a health taint
   that clears does not give a GPU back half-repaired).
2. **Which rules** (``rules``): one per device, or one per pool when the maintenance takes every
   device of it (NVIDIA's driver names a node's pool after the node: a whole node is one rule).
   Since 1.35 a DeviceTaintRule selects by driver, pool and device name only. A rule is named
   ``<maintenance>.<pool>[.<device>]`` (another driver's: ``<maintenance>.<driver>.<pool>…``) unless a
   live rule of the maintenance selects the same devices: that one keeps its name (``kept_names``).
   A file annotated ``fleet.gpufleet.dev/adopt: "true"`` (``fleetctl import`` writes it for a rule
   made by hand) takes over, under its own name, a rule of no maintenance that selects what one of
   its rules would, instead of adding a twin.
3. **Which effect now** (``staged``): a new rule starts at ``None``, whose status the API server's
   eviction controller fills with what ``NoExecute`` would evict; each run moves it one step
   toward the maintenance's ``effect``. A lower ``effect`` in git lowers it at once (devices
   return to scheduling: safe); ``direct`` writes the final effect without the steps.
4. **What a step disrupts** (``evictions.disruption``): ``NoSchedule`` takes the devices out of scheduling
   (held by the rollout waves and the maintenance window); ``NoExecute`` evicts the pods of the
   claims allocated on them (held also by the disruption policy: wait, drain or force). Until the
   rule's status shows the API server's preview for its current spec, the step to ``NoSchedule``
   waits for it (``pending``): what ``diff`` then shows is the API server's count, not fleet's guess.
5. **The gate** (``evictions.emptied_problems``): after a ``NoExecute`` write, no claim may stay allocated
   on the rule's devices.

What each step disrupts, and the gate after ``NoExecute``, are ``fleet.engine.evictions``'. The
engine's maintenance stage (``fleet.engine.maintenancesteps``) reads the live state and hands it
here; every function is pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fleet.engine import ownership, stages
from fleet.engine.plans import GPU_DRIVER, Desired, MaintenanceRule
from fleet.lrus import LRU

if TYPE_CHECKING:  # CEL and the inventory load only where a maintenance is expanded, not with a stored plan
    from fleet.inventory.inventories import Inventory, InventoryDevice

LABEL = "fleet.gpufleet.dev/maintenance"
"""On every rule: the GPUMaintenance it belongs to."""
TAINT_KEY = "fleet.gpufleet.dev/maintenance"
"""The taint's key; its value is the maintenance's name."""
REASON = "fleet.gpufleet.dev/reason"
"""The maintenance's ``reason``, as an annotation of the rule."""
EFFECTS = ("None", "NoSchedule", "NoExecute")

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Target:
    """One rule's selection: a whole pool (``device`` "") or one device of it."""

    driver: str
    pool: str
    device: str
    node: str
    devices: tuple[str, ...]
    """The device names it covers (for a pool rule: every device of the pool)."""

    @property
    def where(self) -> str:
        return f"{self.node or self.pool}/{self.device}" if self.device else f"{self.node or self.pool} (all devices)"


# -- which devices ------------------------------------------------------------------------------


def select(rule: MaintenanceRule, inventory: Inventory, *, pool_nodes: Mapping[str, Iterable[str]]) -> list[int]:
    """Indices of ``inventory.devices`` that ``rule`` takes (``fleet.inventory.targets``, which ``validate``
    also asks); ``pool_nodes``: GPUNodePool → its nodes."""
    from fleet.inventory import targets as chosen  # loads CEL: only where a maintenance is expanded

    return chosen.select(rule.targets, inventory, pool_nodes=pool_nodes)


def candidates(
    rule: MaintenanceRule, slices: Sequence[Obj], *, pool_nodes: Mapping[str, Iterable[str]]
) -> Sequence[Obj]:
    """The slices of the pools where ``rule`` may take a device (``fleet.inventory.targets.candidates``):
    ``select`` over their inventory takes what it takes over every slice's."""
    from fleet.inventory import targets as chosen

    return chosen.candidates(rule.targets, slices, pool_nodes=pool_nodes)


@dataclass
class Kept:
    """One inventory and the devices each maintenance took in it, by its targets and their pools' nodes."""

    inventory: Inventory
    taken: LRU[tuple[object, ...], tuple[int, ...]]


class Inventories:
    """The inventories maintenances were expanded over, and what each took there, kept between runs by
    a process that reconciles again and again (``memories.Memory``): converting 8,000 devices for
    CEL, or a selector's CEL over each, takes longer than the rest of a maintenance's run. Keyed by
    the slices' names and resourceVersions (a slice the driver publishes again, a health taint
    added, is a new key) and, within, by the maintenance's ``targets`` and the nodes of the pools they
    name. ``sweep`` after each run keeps only the inventories that run read (their size:
    docs/benchmarks.md); ``LIMIT`` inventories at most, ``TAKEN`` selections in each."""

    LIMIT = 4
    TAKEN = 16

    def __init__(self) -> None:
        self.kept: LRU[tuple[tuple[str, str], ...], Kept] = LRU(self.LIMIT)
        self.read: set[tuple[tuple[str, str], ...]] = set()

    def sweep(self) -> None:
        """Drop the inventories no maintenance read since the last sweep (their slices changed, or the
        maintenance went)."""
        self.kept.retain(self.read.__contains__)
        self.read = set()

    def select(
        self, rule: MaintenanceRule, slices: Sequence[Obj], *, pool_nodes: Mapping[str, Iterable[str]]
    ) -> tuple[Inventory, tuple[int, ...]]:
        """The inventory of ``slices`` and the indices of its devices ``rule`` takes (``select``): kept
        ones, else read (and kept, where every slice has a resourceVersion to tell its next version
        apart)."""
        from fleet.inventory.inventories import Inventory

        key = slices_key(slices)
        kept = self.kept.get(key) if key is not None else None
        if kept is None:
            kept = Kept(Inventory.from_slices(slices), LRU(self.TAKEN))
            if key is not None:
                self.kept[key] = kept
        if key is not None:
            self.read.add(key)
        scope = tuple((p, tuple(sorted(pool_nodes.get(p, ())))) for p in sorted(set(rule.targets.pools)))
        which = (rule.targets, scope)
        taken = kept.taken.get(which)
        if taken is None:
            taken = kept.taken[which] = tuple(select(rule, kept.inventory, pool_nodes=pool_nodes))
        return kept.inventory, taken


def slices_key(slices: Iterable[Obj]) -> tuple[tuple[str, str], ...] | None:
    """(name, resourceVersion) of each slice, sorted; None where one has no resourceVersion."""
    out = []
    for item in slices:
        meta = item.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return None
        out.append((str(meta.get("name", "")), str(version)))
    return tuple(sorted(out))


# -- which rules --------------------------------------------------------------------------------


def targets(inventory: Inventory, chosen: Iterable[int]) -> list[Target]:
    """The rules for the devices ``chosen``: one per pool taken whole, else one per device."""
    by_pool: dict[tuple[str, str], list[InventoryDevice]] = {}
    for i in chosen:
        d = inventory.devices[i]
        by_pool.setdefault((d.driver, d.pool), []).append(d)
    whole: dict[tuple[str, str], int] = {}
    for d in inventory.devices:
        if (d.driver, d.pool) in by_pool:
            whole[(d.driver, d.pool)] = whole.get((d.driver, d.pool), 0) + 1
    out: list[Target] = []
    for (driver, pool), devices in sorted(by_pool.items()):
        node = devices[0].node if all(d.node == devices[0].node for d in devices) else ""
        names = tuple(sorted({d.name for d in devices}))
        if len(names) == whole[(driver, pool)] and len(names) > 1:
            out.append(Target(driver=driver, pool=pool, device="", node=node, devices=names))
        else:
            out += [Target(driver=driver, pool=pool, device=n, node=node, devices=(n,)) for n in names]
    return out


def as_held(found: Iterable[Target], holds: Iterable[Obj]) -> list[Target]:
    """``found`` in the shape of the rules the maintenance holds (``holds``), so no rule of it covers
    another's devices: a pool it holds device by device stays so when it takes the whole pool (the
    rest get device rules), and a pool it holds whole needs no device rule when it takes fewer devices
    (its pool rule stays until the file goes)."""
    held_targets = [target_of(r) for r in holds]
    by_device = {(t.driver, t.pool) for t in held_targets if t.device}
    whole = {(t.driver, t.pool) for t in held_targets if not t.device}
    out: list[Target] = []
    for t in found:
        pool = (t.driver, t.pool)
        if t.device and pool in whole:
            continue
        if not t.device and pool in by_device and pool not in whole:
            out += [replace(t, device=n, devices=(n,)) for n in t.devices]
        else:
            out.append(t)
    return out


def rule_name(maintenance: str, target: Target) -> str:
    """``<maintenance>.<pool>[.<device>]`` for NVIDIA's GPUs, ``<maintenance>.<driver>.<pool>[.<device>]`` for
    another driver's devices (whose pool may bear the node's name too); hashed where that exceeds a
    name's 253 characters."""
    driver = target.driver if target.driver != GPU_DRIVER else ""
    name = ".".join(p for p in (maintenance, driver, target.pool, target.device) if p).lower()
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[:242].rstrip('.-')}.{digest}"


def held(live_rules: Iterable[Obj], maintenance: str) -> list[Obj]:
    """The live rules of ``maintenance`` (its label)."""
    return [r for r in live_rules if ((r.get("metadata") or {}).get("labels") or {}).get(LABEL) == maintenance]


def target_of(rule: Obj) -> Target:
    """What a live rule selects."""
    sel = (rule.get("spec") or {}).get("deviceSelector") or {}
    device = str(sel.get("device") or "")
    return Target(
        driver=str(sel.get("driver") or ""),
        pool=str(sel.get("pool") or ""),
        device=device,
        node="",
        devices=(device,) if device else (),
    )


def owner(rule: Obj | None) -> str:
    """The GPUMaintenance a rule belongs to ("" for none)."""
    return str((((rule or {}).get("metadata") or {}).get("labels") or {}).get(LABEL) or "")


def effect_of(rule: Obj | None) -> str | None:
    """The effect a live rule has (None: no rule)."""
    if rule is None:
        return None
    return str(((rule.get("spec") or {}).get("taint") or {}).get("effect") or "None")


def walking(entries: Iterable[Any], maintenances: Sequence[MaintenanceRule]) -> bool:
    """A rule was written this run below its maintenance's ``effect``: the next step is due as soon as
    the API server answered (``entries``: a ChangeSet's, read for kind, action, error and what the
    decision wrote)."""
    final = {m.name: m.effect for m in maintenances}
    for e in entries:
        if e.ref.kind != "DeviceTaintRule" or e.action not in ("created", "configured") or e.error:
            continue
        written = e.decision.expected if e.decision is not None and e.decision.expected is not None else e.after
        name = owner(written)
        if name in final and effect_of(written) != final[name]:
            return True
    return False


def staged(live: str | None, final: str, *, direct: bool) -> str:
    """The effect this run writes to a rule now at ``live`` (None: absent) for a maintenance going to
    ``final``: one step on, or ``final`` when that is lower (safe) or the maintenance is ``direct``."""
    if direct or (live is not None and EFFECTS.index(live) >= EFFECTS.index(final)):
        return final
    if live is None:
        return "None"
    return EFFECTS[EFFECTS.index(live) + 1]


def body(rule: MaintenanceRule, target: Target, *, effect: str) -> dict[str, Any]:
    """The DeviceTaintRule for ``target`` at ``effect``."""
    selector = {"driver": target.driver, "pool": target.pool}
    if target.device:
        selector["device"] = target.device
    return {
        "apiVersion": rule.api_version,
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": rule_name(rule.name, target),
            "labels": {LABEL: rule.name},
            "annotations": {REASON: rule.reason},
        },
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": TAINT_KEY, "value": rule.name, "effect": effect},
        },
    }


def selection(target: Target) -> tuple[str, str, str]:
    """What a rule's ``deviceSelector`` says: (driver, pool, device; "" for the whole pool)."""
    return (target.driver, target.pool, target.device)


def kept_names(rule: MaintenanceRule, live_rules: Mapping[str, Obj]) -> dict[tuple[str, str, str], str]:
    """The live rule a found target is written as, by ``selection``: one the maintenance holds already,
    whatever its name (a rule ``fleetctl import`` took over keeps the name a person gave it); where the
    maintenance adopts (``MaintenanceRule.adopt``), also one no maintenance holds and fleet does not
    manage. The first by name wins: two rules on the same devices stay two, never merged."""
    out: dict[tuple[str, str, str], str] = {}
    for name, live in sorted(live_rules.items()):
        if owner(live) == rule.name:
            out.setdefault(selection(target_of(live)), name)
    if rule.adopt:
        for name, live in sorted(live_rules.items()):
            if not owner(live) and not ownership.managed(dict(live)):
                out.setdefault(selection(target_of(live)), name)
    return out


def desired(
    rule: MaintenanceRule,
    found: Sequence[Target],
    *,
    live_rules: Mapping[str, Obj],
    cluster: str,
    revision: str,
) -> list[Desired]:
    """The rules of ``rule`` this run applies, each at its staged effect: one per target found (under the
    name of the live rule that selects it already, ``kept_names``), and one per live rule of the
    maintenance no longer found (a device stays in maintenance until the file goes). ``live_rules``:
    the live DeviceTaintRules by name."""
    kept = kept_names(rule, live_rules)
    holds = held(live_rules.values(), rule.name)
    wanted = {kept.get(selection(t)) or rule_name(rule.name, t): t for t in as_held(found, holds)}
    for live in holds:
        name = str((live.get("metadata") or {}).get("name"))
        wanted.setdefault(name, target_of(live))
    stage = stages.by_name("maintenance")
    out: list[Desired] = []
    for name, target in sorted(wanted.items()):
        effect = staged(effect_of(live_rules.get(name)), rule.effect, direct=rule.direct)
        obj = body(rule, target, effect=effect)
        obj["metadata"]["name"] = name
        stamped = ownership.stamp(obj, cluster=cluster, revision=revision, source=rule.source)
        out.append(Desired(body=stamped, stage=stage, source=rule.source, drift=rule.drift))
    return out


__all__ = [
    "EFFECTS",
    "LABEL",
    "REASON",
    "TAINT_KEY",
    "Inventories",
    "Kept",
    "Target",
    "as_held",
    "body",
    "candidates",
    "desired",
    "effect_of",
    "held",
    "kept_names",
    "owner",
    "rule_name",
    "select",
    "selection",
    "slices_key",
    "staged",
    "target_of",
    "targets",
    "walking",
]
