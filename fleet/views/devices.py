"""Who holds which GPU, and what is left: the figures of ``fleetctl inventory`` and the console's GPUs page.

``picture(slices, claims)`` reads the published ResourceSlices and the ResourceClaims once and
gives every device with its model, memory, MIG profile, uuid, taints, state, holder (claim,
pods, namespace) and what its driver reports in the claim's ``status.devices`` (conditions,
network data: ``fleet.inventory.statuses``), plus the per-model tally (total, allocated, shared,
blocked, tainted, free).
A device's state is ``fleet.inventory.leftovers.state``: the same rule ``fleetctl validate``'s
fit checks count free devices by. Pure: no API call, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.inventory import Inventory, capacities, holdings, leftovers, pendings, statuses
from fleet.inventory.allocations import Usage

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Device:
    """One published device as people look for it."""

    id: str
    """``driver/pool/device``: what a claim's allocation names."""
    node: str
    pool: str
    name: str
    model: str
    """productName, with ``MIG <profile>`` for a MIG device."""
    memory: str
    uuid: str
    state: str
    """allocated, shared, blocked, tainted or free (``leftovers.STATES``)."""
    claim: str = ""
    """``namespace/name`` of the claim holding it; "" when none does."""
    pods: tuple[str, ...] = ()
    team: str = ""
    taints: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    """What the driver reports for it in its claim's ``status.devices``: ``Ready=False (reason: message)``."""

    @property
    def namespace(self) -> str:
        return self.claim.partition("/")[0] if self.claim else ""


@dataclass(frozen=True)
class Tally:
    """Devices of one model by state."""

    model: str
    total: int = 0
    allocated: int = 0
    shared: int = 0
    blocked: int = 0
    tainted: int = 0
    free: int = 0


@dataclass(frozen=True)
class Picture:
    """Every device of a cluster, the per-model tally, and the inventory and usage they came from."""

    devices: tuple[Device, ...]
    tallies: tuple[Tally, ...]
    inventory: Inventory
    usage: Usage
    held: tuple[pendings.Held, ...] = ()
    """Every held device by id, published or not (a claim may hold a device whose slice is gone):
    what ``fleetctl explain`` names too."""


def _published(slices: Sequence[Obj]) -> dict[str, tuple[str, str, str, str]]:
    """Device id → (node, model, memory, uuid) from the raw slices."""
    out: dict[str, tuple[str, str, str, str]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name")
        for d in spec.get("devices") or ():
            attrs = d.get("attributes") or {}
            model = str((attrs.get("productName") or {}).get("string", ""))
            profile = (attrs.get("profile") or {}).get("string")
            if profile:
                model = f"{model} MIG {profile}"
            memory = str(((d.get("capacity") or {}).get("memory") or {}).get("value", ""))
            uuid = str((attrs.get("uuid") or {}).get("string", ""))
            out[f"{spec.get('driver')}/{pool}/{d.get('name')}"] = (
                str(spec.get("nodeName") or pool),
                model,
                memory,
                uuid,
            )
    return out


def picture(slices: Sequence[Obj], claims: Sequence[Obj], *, teams: Mapping[str, str] | None = None) -> Picture:
    """Every device of the cluster with its holder and state, and the per-model tally; ``teams``
    (namespace → team, ``fleet.views.teams.namespace_teams``) names the team of each holder."""
    teams = teams or {}
    published = _published(slices)
    held = pendings.allocated_devices(claims)
    pods = pendings.holders(claims)
    inventory = Inventory.from_slices(slices)
    usage = holdings.usage(inventory, holdings.holdings(claims))
    reports = statuses.device_statuses(claims)
    devices: list[Device] = []
    totals: dict[str, dict[str, int]] = {}
    for index, item in enumerate(inventory.devices):
        node, model, memory, uuid = published.get(item.id, (item.node, "?", "", ""))
        state = leftovers.state(inventory, usage, index)
        claim = held.get(item.id, "")
        devices.append(
            Device(
                id=item.id,
                node=node,
                pool=item.pool,
                name=item.name,
                model=model,
                memory=memory,
                uuid=uuid,
                state=state,
                claim=claim,
                pods=tuple(pods.get(claim, ())),
                team=teams.get(claim.partition("/")[0], "") if claim else "",
                taints=tuple(leftovers.taint_text(t) for t in item.taints),
                conditions=tuple(reports[item.id].texts()) if item.id in reports else (),
            )
        )
        entry = totals.setdefault(model, dict.fromkeys(("total", *leftovers.STATES), 0))
        entry["total"] += 1
        entry[state] += 1
    tallies = tuple(Tally(model=m, **t) for m, t in sorted(totals.items()))
    return Picture(tuple(devices), tallies, inventory, usage, tuple(pendings.held_devices(claims, slices, teams=teams)))


def amount(nanos: int, counter: str) -> str:
    """A counter's amount as people read it: memory in binary units, the rest as a plain number."""
    return capacities.show(nanos) if counter == "memory" else f"{nanos / capacities.NANO:g}"


__all__ = ["Device", "Picture", "Tally", "amount", "picture"]
