"""A run's state, one small dataclass per concern, so ``Sync`` holds a handful of fields.

- ``Found``: what ``start`` read and decided once for the run: the ledger, the live objects, the
  freezes on them, each team's identity, the objects refused before any write, the stages a
  resumed run skips;
- ``Managed``: change management across the run's steps: what classing read, the drains, when
  each held change began to wait;
- ``Meter``: progress while a step writes (for progress bars); executors are given its ``sent``,
  never a method of the ``Sync``, so no reference cycle outlives a run;
- ``Kinds``: the namespaced kinds, discovered once per run when a namespace is to be deleted;
- ``Run``: what a step module (``objectsteps``, ``operatorsteps``) reads and sets of the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from fleet.engine import (
    blockers,
    changesets,
    disruptions,
    drains,
    drifts,
    healths,
    impersonations,
    ledgers,
    listings,
    memories,
    operators,
    plans,
    stages,
)
from fleet.engine.options import Options
from fleet.kube import Client, Kind, KubeError


@dataclass
class Found:
    """What ``start`` read and settled for the whole run."""

    ledger: ledgers.Ledger
    live: listings.LiveIndex = field(default_factory=dict)
    freezes: dict[str, drifts.Freeze] = field(default_factory=dict)
    """The live objects a person froze, by key (``drifts.live_freezes``)."""
    identities: impersonations.Identities = field(default_factory=impersonations.Identities)
    refused: dict[str, changesets.Change] = field(default_factory=dict)
    """Objects fleet may not write (not its own, not to be adopted; Nodes two pools select; a team's
    GPUOperator; what the API server refuses a team), by key, decided ``refuse``."""
    skip: set[str] = field(default_factory=set)
    """Stages a resumed run finished before it was stopped."""
    resumed: bool = False
    """The ledger's progress says the last run did not finish."""


@dataclass
class Managed:
    """Change management across a run's steps (``disruptions``, ``waits``, ``drains``)."""

    reads: disruptions.Reads | None = None
    """What classing read (claims, slices), once for every stage and the prune."""
    drains: drains.Drains | None = None
    """The nodes this run drains for held changes (``spec.disruption.policy: drain``), once one needs it."""
    waiting_since: dict[str, str] = field(default_factory=dict)
    """``Ref.key`` → when its disruptive change began waiting for jobs (ISO 8601): the ledger keeps it."""
    maintenance: tuple[plans.Desired, ...] | None = None
    """The DeviceTaintRules the GPUMaintenances want this run (``maintenancesteps.desired``), once read."""


@dataclass
class Meter:
    """``(step, objects written, objects to write)`` told to ``progress`` as a step writes."""

    progress: Callable[[str, int, int], None] | None = None
    writing: tuple[str, int, int] = ("", 0, 0)

    def start(self, step: str, total: int) -> None:
        self.writing = (step, 0, total)
        if self.progress is not None and total:
            self.progress(step, 0, total)

    def sent(self) -> None:
        step, done, total = self.writing
        self.writing = (step, done + 1, total)
        if self.progress is not None:
            self.progress(step, done + 1, total)


@dataclass
class Kinds:
    """The namespaced kinds to list before deleting a namespace: discovered once per run."""

    client: Client
    found: list[Kind] | None = None

    async def __call__(self) -> list[Kind]:
        if self.found is None:
            self.found = await blockers.namespaced_kinds(client=self.client)
        return self.found


class Run(Protocol):
    """What a step module reads and sets of the run (``applies.Sync``)."""

    client: Client
    plan: plans.Plan
    options: Options
    memory: memories.Memory | None
    reader: healths.Reader | None
    changes: changesets.ChangeSet
    found: Found
    meter: Meter
    stopped: bool
    unavailable: KubeError | None
    operator: operators.Stage | None
    managed: Managed

    def desired(self, stage: stages.Stage) -> list[plans.Desired]: ...

    def new(self, d: plans.Desired) -> bool: ...

    def refusal(self, change: changesets.Change, d: plans.Desired | None) -> changesets.Change: ...

    def wait(self, change: changesets.Change) -> changesets.Change: ...

    async def drain(self, changes: list[changesets.Change]) -> None: ...

    def classing_reads(self) -> disruptions.Reads: ...

    async def classify(self, changes: list[changesets.Change]) -> list[changesets.Change]: ...

    def freeze(self, d: plans.Desired) -> drifts.Freeze | None: ...

    def deleted_outside(self, key: str) -> bool: ...

    def origin(self, key: str) -> ledgers.Origin: ...

    async def save_progress(self) -> None: ...


__all__ = ["Found", "Kinds", "Managed", "Meter", "Run"]
