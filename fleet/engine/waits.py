"""Whether a disruptive change goes now or waits, and for what: pure.

A change that restarts the GPU driver, evicts pods or un-matches allocated claims
(``fleet.engine.disruptions`` says which) is the one a GPU platform fears: it lands under
a training job that has held its GPUs for a week. Safe changes apply at once; a disruptive
one is held back, in this order:

1. **The maintenance window.** With ``spec.maintenance.windows`` on the Cluster, it waits
   until one is open (``fleet.manifests.windows``); status says when the next opens, and the
   controller looks again then. Without windows, any time is a window.
2. **The GPU jobs on the nodes it touches** (``spec.disruption.policy``): ``wait`` holds it
   while those nodes hold allocated claims, and reports it overdue once it has waited longer
   than ``deadline`` (it keeps waiting: fleet never cuts a job because a clock ran out);
   ``drain`` holds it while fleet cordons those nodes and evicts the pods through the Eviction
   API (``fleet.engine.drains``); ``force`` applies over them.

An emergency (a ``Fleet-Emergency:`` commit trailer, ``fleetctl apply --emergency``, the
FleetSync's ``fleet.gpufleet.dev/emergency`` annotation) skips the window, never the jobs:
an urgent driver fix still waits for, or forces over, running work as the Cluster says.

The same function decides for ``fleetctl diff`` and for the apply, so a preview says
exactly what the apply will hold back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol

from fleet.engine.plans import ChangeRules
from fleet.manifests import windows

On = Literal["window", "claims"]


class Disruptive(Protocol):
    """What ``fleet.engine.disruptions`` says of a disruptive change."""

    @property
    def reason(self) -> str: ...
    @property
    def nodes(self) -> frozenset[str]: ...
    @property
    def claims(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Wait:
    """Why a disruptive change is held back now, and until when (if known)."""

    on: On
    reason: str
    """``the maintenance window (opens 2026-12-12 02:00 CET)``, ``2 allocated claims on node a (…)``."""
    until: datetime | None = None
    """When to look again: the window's opening, the deadline; None: when the claims end (watched)."""
    since: datetime | None = None
    """When it began waiting for claims (kept across runs in the ledger), for the deadline."""
    overdue: bool = False
    """Waited longer than the Cluster's ``spec.disruption.deadline``: reported, still held."""

    def __str__(self) -> str:
        return f"waits for {self.reason}" + (" (overdue)" if self.overdue else "")


def when(at: datetime) -> str:
    """``2026-12-12 02:00 CET`` in the window's own zone (``at`` carries it)."""
    return at.strftime("%Y-%m-%d %H:%M %Z").strip()


def decide(
    disruption: Disruptive | None,
    *,
    rules: ChangeRules,
    now: datetime,
    emergency: str = "",
    since: datetime | None = None,
) -> Wait | None:
    """What holds ``disruption`` back at ``now`` (None: it goes). ``since``: when it began waiting for claims."""
    if disruption is None:
        return None
    if rules.windows and not emergency and windows.open_window(rules.windows, now) is None:
        opens = windows.next_opening(rules.windows, now)
        return Wait(
            on="window",
            reason="the maintenance window" + (f" (opens {when(opens)})" if opens else " (none opens)"),
            until=opens,
        )
    if not disruption.claims or rules.policy == "force":
        return None
    started = since or now
    deadline = started + timedelta(seconds=rules.deadline)
    drain = ": fleet drains them" if rules.policy == "drain" else ""
    return Wait(
        on="claims",
        reason=f"{_claims(disruption.claims)} on {_nodes(disruption.nodes)} to end (policy {rules.policy}{drain})",
        until=None if now >= deadline else deadline,
        since=started,
        overdue=now >= deadline,
    )


def _claims(claims: Sequence[str], shown: int = 3) -> str:
    names = ", ".join(claims[:shown]) + (f" and {len(claims) - shown} more" if len(claims) > shown else "")
    return f"{len(claims)} allocated claim{'s' if len(claims) != 1 else ''} ({names})"


def _nodes(nodes: frozenset[str], shown: int = 3) -> str:
    if not nodes:
        return "the nodes it touches"
    names = sorted(nodes)
    text = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
    return f"node{'s' if len(names) != 1 else ''} {text}"


def next_look(waits: Sequence[Wait], *, now: datetime) -> float | None:
    """Seconds until the earliest ``until`` of ``waits`` (a window opening, a deadline); None when none has one."""
    times = [w.until for w in waits if w.until is not None]
    if not times:
        return None
    return max(0.0, (min(times) - now).total_seconds())


__all__ = ["Disruptive", "On", "Wait", "decide", "next_look", "when"]
