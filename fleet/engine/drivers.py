"""The GPU nodes' driver-upgrade states, read for the operator stage's release entry.

The GPU Operator's upgrade controller walks each GPU node through the states of its
``nvidia.com/gpu-driver-upgrade-state`` label (``upgrade-required``, ``cordon-required``,
``wait-for-jobs-required``, ``pod-restart-required``, ... ``upgrade-done``; ``upgrade-failed``
when it gives up). A node that stays in one state longer than the Fleet's
``spec.upgrade.driverStateTimeout`` is *stuck*: the upgrade waits for something a human
must look at (a job that never ends, a PodDisruptionBudget, a failed driver pod), so it
is reported with the node's recent Events.

The label carries no time, so "since when" is the ``time`` of the managedFields entry
that owns the label: the last write of that field (``label_since``).

The states are read once per run of the operator stage and carried as data on the
release's Change (``ReleaseStatus``): ``fleetctl diff``/``apply`` print them as the
entry's note (``states_text``), the controller's FleetSync ``status.operator`` is built
from the same object, so the two never disagree and nothing re-parses text.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from fleet.kube import Client, Forbidden, timestamps

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
DONE_STATES = frozenset({"upgrade-done", ""})
EVENTS_KEPT = 3
"""Recent Events shown per non-done node (the newest last)."""


@dataclass(frozen=True)
class DriverState:
    """One GPU node's ``nvidia.com/gpu-driver-upgrade-state`` and since when it holds it."""

    node: str
    state: str
    since: datetime.datetime | None
    events: tuple[str, ...] = ()

    def stuck(self, *, now: datetime.datetime, limit: float) -> bool:
        return self.state not in DONE_STATES and self.since is not None and (now - self.since).total_seconds() > limit

    def minutes(self, *, now: datetime.datetime) -> int:
        return int((now - self.since).total_seconds() // 60) if self.since is not None else 0

    def text(self, *, now: datetime.datetime, limit: float) -> str:
        if not self.stuck(now=now, limit=limit):
            return f"{self.node} {self.state}"
        events = f"; events: {' | '.join(self.events)}" if self.events else ""
        return f"{self.node} stuck in {self.state} for {self.minutes(now=now)} min{events}"

    def deadline(self, *, limit: float) -> datetime.datetime | None:
        """When this node counts as stuck if its state does not change (None: done, or no time known)."""
        if self.state in DONE_STATES or self.since is None:
            return None
        return self.since + datetime.timedelta(seconds=limit)


@dataclass(frozen=True)
class ReleaseStatus:
    """What one run of the operator stage saw of the release: carried on its Change (``Change.operator``)."""

    version: str
    """The chart version deployed after the run ('' when none is): the declared one once installed or
    upgraded, the running one when the run changed nothing, was refused or failed (and rolled back)."""
    limit: float
    """The Fleet's ``driverStateTimeout`` (seconds): a node longer than this in one state is stuck."""
    checked: datetime.datetime
    """When the states were read: ``stuck`` is judged at this time, so a status built later says the same."""
    drivers: tuple[DriverState, ...] = ()
    remedied: str = ""
    """What fleet did this run to a release helm had failed or left ``pending-*`` (rolled back,
    uninstalled): a status line and an Event ("" when nothing)."""

    def stuck(self) -> list[DriverState]:
        return [d for d in self.drivers if d.stuck(now=self.checked, limit=self.limit)]

    def next_deadline(self) -> datetime.datetime | None:
        """The earliest time a node not stuck yet becomes stuck (the controller re-checks then)."""
        times = [
            t
            for d in self.drivers
            if not d.stuck(now=self.checked, limit=self.limit) and (t := d.deadline(limit=self.limit)) is not None
        ]
        return min(times, default=None)

    def text(self) -> str:
        return states_text(list(self.drivers), limit=self.limit, now=self.checked)


def label_since(node: dict[str, Any], label: str) -> datetime.datetime | None:
    """When ``label`` was last written: the time of the managedFields entry that owns it."""
    key = f"f:{label}"
    for entry in (node.get("metadata") or {}).get("managedFields") or ():
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        if key in labels and entry.get("time"):
            return timestamps.parse(entry["time"])
    return None


async def driver_states(client: Client) -> list[DriverState]:
    """Every node carrying the operator's driver-upgrade label, with since when, and its recent events."""
    nodes = await client.list_if_served(api_version="v1", kind="Node", label_selector=UPGRADE_STATE)
    out = []
    for n in nodes:
        name = n["metadata"]["name"]
        state = n["metadata"]["labels"][UPGRADE_STATE]
        events: tuple[str, ...] = ()
        if state not in DONE_STATES:
            events = await _node_events(client, name)
        out.append(DriverState(node=name, state=state, since=label_since(n, UPGRADE_STATE), events=events))
    return sorted(out, key=lambda d: d.node)


async def _node_events(client: Client, node: str) -> tuple[str, ...]:
    """The node's newest Events, as ``reason: message``; they only explain, so a role that may
    not list Events (the in-cluster ``fleet-applier``) gets a line saying so, not a failed run."""
    try:
        found = await client.list_if_served(
            api_version="v1",
            kind="Event",
            namespace="default",
            field_selector=f"involvedObject.kind=Node,involvedObject.name={node}",
        )
    except Forbidden:
        return ("(Events not shown: this identity may not list events in namespace default; grant it list)",)
    found.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return tuple(f"{e.get('reason')}: {e.get('message')}" for e in found[-EVENTS_KEPT:])


def states_text(states: list[DriverState], *, limit: float, now: datetime.datetime | None = None) -> str:
    if not states:
        return ""
    now = now or datetime.datetime.now(datetime.UTC)
    return "driver upgrade: " + ", ".join(s.text(now=now, limit=limit) for s in states)


__all__ = [
    "DONE_STATES",
    "UPGRADE_STATE",
    "DriverState",
    "ReleaseStatus",
    "driver_states",
    "label_since",
    "states_text",
]
