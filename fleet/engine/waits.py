"""Whether a disruptive change goes now or waits, and for what: pure.

A change that restarts the GPU driver, evicts pods or un-matches allocated claims
(``fleet.engine.disruptions`` says which) is the one a GPU platform fears: it lands under
a training job that has held its GPUs for a week. Safe changes apply at once; a disruptive
one is held back, in this order:

1. **The rollout wave.** With ``spec.rollout.waves`` in ``fleet.yaml``, a cluster of wave
   *k* > 1 applies a revision's disruptive part only once every cluster of the earlier waves
   has posted commit status ``fleet/<cluster>`` = ``success`` for that revision at least
   ``bake`` ago (``Reported`` may carry a descendant's statuses; the controller reads the
   revision's own: docs/change-management.md says why). The git host's commit statuses are the coordination:
   there is no hub, each controller reads the others' statuses (``Reported``, read by the
   controller through ``fleet.hosts.readers``). A ``failure`` in an earlier wave halts the
   later ones until that cluster succeeds; statuses that cannot be read hold the change
   (fail safe). Waves come first because they are the fleet-wide gate: a change an earlier
   wave has not proven is not worth a maintenance window.
2. **The maintenance window.** With ``spec.maintenance.windows`` on the Cluster, it waits
   until one is open (``fleet.manifests.windows``); status says when the next opens, and the
   controller looks again then. Without windows, any time is a window.
3. **The GPU jobs on the nodes it touches** (``spec.disruption.policy``): ``wait`` holds it
   while those nodes hold allocated claims, and reports it overdue once it has waited longer
   than ``deadline`` (it keeps waiting: fleet never cuts a job because a clock ran out);
   ``drain`` holds it while fleet cordons those nodes and evicts the pods through the Eviction
   API (``fleet.engine.drains``); ``force`` applies over them. A GPUMaintenance's ``deadline``
   is a time of day, not a duration: waiting ends then and the change goes (its ``NoExecute``
   evicts what still runs), as the maintenance's author said.

Before the jobs, a change may name what it must see first (``Disruption.pending``): a
maintenance's step to ``NoSchedule`` waits for the API server's eviction preview in its rule's
status (``preview``), looked at again within seconds.

An emergency (a ``Fleet-Emergency:`` commit trailer, ``fleetctl apply --emergency``, the
FleetSync's ``fleet.gpufleet.dev/emergency`` annotation) skips the waves and the window,
never the jobs: an urgent driver fix cannot wait an hour of bake per wave, but it still
waits for, or forces over, running work as the Cluster says.

The same function decides for ``fleetctl diff`` and for the apply, so a preview says
exactly what the apply will hold back. ``fleetctl`` reads no commit statuses
(``reported`` is None): a person applying by hand is the wave.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from fleet.engine.disruptions import Disruption, listed
from fleet.engine.plans import ChangeRules
from fleet.manifests import windows

On = Literal["wave", "window", "preview", "claims"]
PREVIEW_LOOK = timedelta(seconds=2)
"""How soon a change waiting for the API server's eviction preview looks again."""


@dataclass(frozen=True)
class Wait:
    """Why a disruptive change is held back now, and until when (if known)."""

    on: On
    reason: str
    """``wave 1 baking until 2026-12-06 10:00 UTC``, ``the maintenance window (opens 2026-12-12 02:00 CET)``,
    ``2 allocated claims on node a (…)``."""
    until: datetime | None = None
    """When to look again: the bake's end, the window's opening, the deadline; None: when the claims end
    (watched) or an earlier wave reports (read again)."""
    since: datetime | None = None
    """When it began waiting for claims (kept across runs in the ledger), for the deadline."""
    overdue: bool = False
    """Waited longer than the Cluster's ``spec.disruption.deadline``: reported, still held."""

    def __str__(self) -> str:
        return f"waits for {self.reason}" + (" (overdue)" if self.overdue else "")


@dataclass(frozen=True)
class Report:
    """What the git host shows for one cluster of an earlier wave: its ``fleet/<cluster>`` commit status."""

    state: str = ""
    """``success``, ``failure``, ``pending``; "": the cluster posted nothing for the revision."""
    sha: str = ""
    """The commit it was posted on: the revision, or a descendant the cluster applied instead."""
    since: datetime | None = None
    """When the state was first posted (a state posted again keeps the first time): the bake counts from it."""
    description: str = ""
    """The status's text: for a failure, the finding or error (``teams/ml/team.yaml:6:3 schema: …``)."""


@dataclass(frozen=True)
class Reported:
    """What the controller read of the earlier waves' commit statuses for ``revision``."""

    revision: str
    clusters: Mapping[str, Report] = field(default_factory=dict)
    """Cluster name → its status; a cluster missing here posted nothing."""
    error: str = ""
    """The statuses could not be read (why): every disruptive change is held (fail safe)."""


def when(at: datetime) -> str:
    """``2026-12-12 02:00 CET`` in the window's own zone (``at`` carries it)."""
    return at.strftime("%Y-%m-%d %H:%M %Z").strip()


def decide(
    disruption: Disruption | None,
    *,
    rules: ChangeRules,
    now: datetime,
    emergency: str = "",
    since: datetime | None = None,
    reported: Reported | None = None,
) -> Wait | None:
    """What holds ``disruption`` back at ``now`` (None: it goes). ``since``: when it began waiting for claims;
    ``reported``: the earlier waves' commit statuses (None: not read, waves are not checked)."""
    if disruption is None:
        return None
    if reported is not None and not emergency:
        held = wave(rules, reported=reported, now=now)
        if held is not None:
            return held
    if rules.windows and not emergency and windows.open_window(rules.windows, now) is None:
        opens = windows.next_opening(rules.windows, now)
        return Wait(
            on="window",
            reason="the maintenance window" + (f" (opens {when(opens)})" if opens else " (none opens)"),
            until=opens,
        )
    if disruption.pending:
        return Wait(on="preview", reason=disruption.pending, until=now + PREVIEW_LOOK)
    if not disruption.claims or rules.policy == "force":
        return None
    if rules.deadline_at is not None:
        if now >= rules.deadline_at:
            return None
        return Wait(
            on="claims",
            reason=f"{_claims(disruption.claims)} on {_nodes(disruption.nodes)} to end (policy {rules.policy}, "
            f"until the deadline {when(rules.deadline_at.astimezone(UTC))}: then it goes)",
            until=rules.deadline_at,
            since=since or now,
        )
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


def wave(rules: ChangeRules, *, reported: Reported, now: datetime) -> Wait | None:
    """What the earlier waves still owe this cluster for ``reported.revision`` (None: they let it go).

    Every cluster of every earlier wave must show ``success`` standing for ``rules.bake``. A
    failure anywhere halts (it is named first: a halt is what on-call must see), then a
    cluster that has not succeeded, then the bake; ``until`` is the bake's end, when known."""
    if rules.wave <= 1 or not rules.earlier:
        return None
    sha = reported.revision[:12]
    if reported.error:
        return Wait(
            on="wave",
            reason=f"wave {rules.wave - 1} ({listed(rules.earlier[-1])}): the git host's commit statuses "
            f"cannot be read ({reported.error}): held until they can",
        )
    for number, names in enumerate(rules.earlier, start=1):
        for name in names:
            report = reported.clusters.get(name) or Report()
            if report.state == "failure":
                said = f' "{report.description}"' if report.description else ""
                on = f" on {report.sha[:12]}" if report.sha and report.sha != reported.revision else ""
                return Wait(on="wave", reason=f"wave {number} failed: {name} failure{said}{on}: later waves halt")
    for number, names in enumerate(rules.earlier, start=1):
        for name in names:
            report = reported.clusters.get(name) or Report()
            if report.state != "success" or report.since is None:
                now_says = f' ({report.state}: "{report.description}")' if report.state else ""
                return Wait(
                    on="wave",
                    reason=f"wave {number} ({listed(names)}): {name} has not reported success for {sha}{now_says}",
                )
    bake = timedelta(seconds=rules.bake)
    ends = [
        (number, (reported.clusters[name].since or now) + bake)
        for number, names in enumerate(rules.earlier, start=1)
        for name in names
    ]
    number, until = max(ends, key=lambda e: e[1])
    if now < until:
        return Wait(on="wave", reason=f"wave {number} baking until {when(until.astimezone(UTC))}", until=until)
    return None


def _claims(claims: Sequence[str]) -> str:
    return f"{len(claims)} allocated claim{'s' if len(claims) != 1 else ''} ({listed(claims)})"


def _nodes(nodes: frozenset[str]) -> str:
    if not nodes:
        return "the nodes it touches"
    return f"node{'s' if len(nodes) != 1 else ''} {listed(sorted(nodes))}"


def emergency_skips(rules: ChangeRules, *, now: datetime) -> bool:
    """Whether an emergency lets a disruptive change go sooner than it would: the cluster follows
    earlier rollout waves, or its maintenance windows are all closed at ``now``."""
    return bool(rules.earlier) or (bool(rules.windows) and windows.open_window(rules.windows, now) is None)


def next_look(waits: Sequence[Wait], *, now: datetime) -> float | None:
    """Seconds until the earliest ``until`` of ``waits`` (a window opening, a deadline); None when none has one."""
    times = [w.until for w in waits if w.until is not None]
    if not times:
        return None
    return max(0.0, (min(times) - now).total_seconds())


__all__ = ["On", "Report", "Reported", "Wait", "decide", "emergency_skips", "next_look", "wave", "when"]
