"""The result of every diff and apply: a ChangeSet, one entry per object.

A ``Change`` is immutable: what its step found (the proposal), its one ``decision``, and what its
execution found (the result: ``error``, ``duration``, an outcome's ``reason``). Each step makes a
new value where it used to set a field (``replaced``, ``decided``, ``held_for``), and the
ChangeSet takes the executed entry in place of the decided one (``ChangeSet.settle``).

As in Flux's ssa package, every verb returns the same shape, so the CLI prints one
table, the controller records one status and the trace carries one set of
attributes, whatever happened. ``action`` is one of created, configured, unchanged,
deleted, skipped; ``before``/``after`` are the normalised objects (``None`` when
absent or not worth keeping, e.g. for unchanged objects); ``error`` says why an entry
failed or was skipped. ``conflicts`` lists the fields another field manager owns
(a diff shows them beside the change instead of stopping: the apply needs
``--force-conflicts`` or the other owner's agreement).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fleet.engine import waits
from fleet.engine.decisions import LEAVE, Decision
from fleet.engine.disruptions import Disruption
from fleet.engine.drifts import FieldRepair, Freeze
from fleet.engine.drivers import ReleaseStatus
from fleet.kube import Ref


class Action(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class FieldConflict:
    """A field fleet would set that another field manager owns."""

    manager: str
    field: str

    def __str__(self) -> str:
        return f"{self.field} (owned by {self.manager})" if self.manager else self.field


@dataclass(frozen=True)
class Change:
    ref: Ref
    stage: str
    action: Action
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    duration: float = 0.0
    error: str = ""
    reason: str = ""
    replace: bool = False
    """The change touches immutable fields: applied as delete + create."""
    refused: bool = False
    """Failed because fleet refused it for safety (not fleet's object, a claim in use, a namespace
    others use), not because a request failed: ``diff`` shows it as a difference it cannot apply."""
    release: bool = False
    """A deletion that keeps the object: fleet only gives back what it set (adopted objects, pool Nodes)."""
    drift: bool = False
    """Configured although git did not change the object: the cluster drifted."""
    conflicts: tuple[FieldConflict, ...] = ()
    """Fields other managers own that this change would take: apply fails on them without force
    (unless ``forced``)."""
    forced: bool = False
    """The apply takes ``conflicts`` with force: the object's drift policy is ``enforce`` (git wins)."""
    repairs: tuple[FieldRepair, ...] = ()
    """For drift put back under ``enforce``: each declared field that differed, who had changed it,
    its value before and after (``fleet.engine.drifts``)."""
    frozen: Freeze | None = None
    """A person froze the live object, or its manifest sets its drift policy (``fleet.engine.drifts``)."""
    waiting: waits.Wait | None = None
    """A disruptive change held back (for the maintenance window, for the jobs on its nodes): skipped
    now, ``intended`` once it goes (``fleet.engine.waits``)."""
    intended: Action | None = None
    """What a waiting change will do when it goes (created, configured, deleted)."""
    operator: ReleaseStatus | None = None
    """On the operator stage's release entry: the chart version deployed and the GPU nodes'
    driver-upgrade states the run saw (``fleet.engine.drivers``); None on every other entry."""
    disruption: Disruption | None = None
    """Why writing this entry disrupts GPU work (``fleet.engine.disruptions``); None: safe."""
    decision: Decision | None = field(default=None, repr=False)
    """What fleet does with it this run, as whom, and what the gates verify (``fleet.engine.decisions``),
    decided once before anything of it is written (None only until then: ``decided``)."""

    @classmethod
    def unchanged(cls, ref: Ref, stage: str) -> Change:
        """An entry that needs nothing (the no-op's 10,000 of them), decided ``leave`` as it is made: no
        hold, policy, freeze or wait acts on an unchanged entry, so ``proposals.decide_write`` keeps it as
        it is and a no-op makes one value per object, not two."""
        return cls(ref=ref, stage=stage, action=Action.UNCHANGED, decision=LEAVE)

    def replaced(self, **fields: Any) -> Change:
        """This change with ``fields`` changed (a new value: a Change is never changed in place)."""
        return dataclasses.replace(self, **fields)

    def decided(self, decision: Decision) -> Change:
        """This change with its one decision; a second decision raises: no step decides again."""
        if self.decision is not None:
            raise AttributeError(f"{self.ref}: decided once already ({self.decision.verdict}); no step decides again")
        return self.replaced(decision=decision)

    @property
    def verdict(self) -> str:
        """The decision's verdict (``""`` before the decision): what consumers read, never the action."""
        return self.decision.verdict if self.decision is not None else ""

    @property
    def held(self) -> waits.Wait | None:
        """What the change waits for, as decided (``hold``); None when it is not held."""
        decided = self.decision
        return decided.wait if decided is not None and decided.verdict == "hold" else None

    @classmethod
    def refusal(cls, ref: Ref, *, stage: str, error: str, **more: Any) -> Change:
        """What fleet refused for safety before writing: skipped, ``refused``, with why and what to do."""
        return cls(ref=ref, stage=stage, action=Action.SKIPPED, refused=True, error=error, **more)

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "object": {
                "apiVersion": self.ref.api_version,
                "kind": self.ref.kind,
                "namespace": self.ref.namespace,
                "name": self.ref.name,
            },
            "stage": self.stage,
            "action": str(self.action),
            "duration": round(self.duration, 4),
            "error": self.error,
            "refused": self.refused,
            "reason": self.reason,
            "conflicts": [{"manager": c.manager, "field": c.field} for c in self.conflicts],
        }
        if self.forced:
            out["forced"] = True
        if self.repairs:
            out["repairs"] = [dataclasses.asdict(r) for r in self.repairs]
        if self.frozen is not None:
            out["frozen"] = dataclasses.asdict(self.frozen)
        if self.waiting is not None:
            out["waiting"] = {
                "on": self.waiting.on,
                "reason": self.waiting.reason,
                "until": self.waiting.until.isoformat() if self.waiting.until else None,
                "since": self.waiting.since.isoformat() if self.waiting.since else None,
                "overdue": self.waiting.overdue,
                "intended": str(self.intended) if self.intended else None,
            }
        out["disruption"] = self.disruption.to_json() if self.disruption is not None else None
        if self.decision is not None:
            out["decision"] = self.decision.to_json()
        return out

    def held_for(self, wait: waits.Wait) -> Change:
        """This disruptive change held back: skipped now, saying what it would do and what it waits for."""
        why = self.disruption.reason if self.disruption is not None else "disruptive"
        return dataclasses.replace(
            self, waiting=wait, intended=self.action, action=Action.SKIPPED, reason=f"disruptive ({why}): {wait}"
        )


@dataclass
class StageRun:
    """How one stage of a run went: how long it took, and its health gate."""

    stage: str
    seconds: float = 0.0
    gate: str = ""
    """The gate checked after the stage's writes (``stages.Gate``); "" when none ran (nothing written)."""
    gate_seconds: float = 0.0
    healthy: bool | None = None
    """The gate's outcome: True passed, False timed out, None not checked."""


@dataclass
class ChangeSet:
    cluster: str
    revision: str
    entries: list[Change] = field(default_factory=list)
    runs: dict[str, StageRun] = field(default_factory=dict)
    """By stage, in the order the stages ran: durations and health gates (the FleetSync's stages)."""

    def run_of(self, stage: str) -> StageRun:
        """The stage's record of this run, made at its first mention."""
        return self.runs.setdefault(stage, StageRun(stage))

    @property
    def failed(self) -> list[Change]:
        return [e for e in self.entries if e.failed]

    @property
    def conflicted(self) -> list[Change]:
        """Entries with fields other managers own that the apply does not take (not decided with force)."""
        return [e for e in self.entries if e.conflicts and not e.forced and not (e.decision and e.decision.force)]

    @property
    def changed(self) -> list[Change]:
        return [
            e for e in self.entries if e.action in (Action.CREATED, Action.CONFIGURED, Action.DELETED) and not e.failed
        ]

    @property
    def waiting(self) -> list[Change]:
        """Disruptive changes decided ``hold`` (a wave, a window, running jobs): the cluster still differs from git."""
        return [e for e in self.entries if e.waiting is not None and e.held is not None]  # most wait for nothing

    @property
    def disruptive(self) -> list[Change]:
        """Entries whose write disrupts GPU work (``Change.disruption``), in ChangeSet order."""
        return [e for e in self.entries if e.disruption is not None]

    def summary(self) -> dict[str, Counter[str]]:
        """Per stage, how many entries of each action (stages in first-seen order)."""
        table: dict[str, Counter[Action]] = {}
        for entry in self.entries:
            table.setdefault(entry.stage, Counter())[entry.action] += 1
        return {stage: Counter({str(a): n for a, n in counts.items()}) for stage, counts in table.items()}

    def settle(self, pairs: Iterable[tuple[Change, Change]]) -> None:
        """Each ``(decided, executed)``: the executed entry takes the decided one's place (by identity)."""
        moved = {id(old): new for old, new in pairs if new is not old}
        if moved:
            self.entries = [moved.get(id(e), e) for e in self.entries]

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "revision": self.revision, "entries": [e.to_json() for e in self.entries]}


__all__ = [
    "Action",
    "Change",
    "ChangeSet",
    "FieldConflict",
    "StageRun",
]
