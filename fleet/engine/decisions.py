"""One decision per change: what fleet does with it this run, as whom, and what the cluster shows after.

fleet's features each have a say in a change's fate: the drift policy and a person's freeze
(``holds``), safety refusals (``adoptions``, ``blockers``), the team's identity
(``impersonations``), change management (``disruptions``, ``waits``). When each of them also
*acted* on what it said, at its own time, they contradicted each other: a Node label held for
the maintenance window was then demanded by the pools health gate, which read the plan, not
what the run had written; a team's file of an unexpected kind was written with the
controller's rights because the identity was chosen by kind.

So the fate of a change is decided once, after its diff, its classing and its holds, and
before anything is written, into one immutable ``Decision``:

- ``verdict``: ``write`` (create, configure, delete or release), ``hold`` (a disruptive change waiting for the
  wave, the window or the jobs: ``wait`` says for what and until when), ``refuse`` (a safety
  refusal or an error: the entry says why) or ``leave`` (nothing to do: unchanged, reported
  drift, a freeze);
- ``verb``: what the executor does: ``apply``, ``replace``, ``node-write``, ``delete``,
  ``release``, ``helm-upgrade``, ``helm-uninstall``, ``cordon``, ``evict`` or ``uncordon`` (for a
  ``hold`` or a ``refuse``, what it would do; ``""`` for a plain ``leave``), with ``force``
  (the apply takes fields other managers own);
- ``user``: as whom it is written (``""``: the controller's own identity), and ``as_fleet`` why a
  team's object goes as fleet when it does (``impersonations.identity``, the one rule);
- ``disruption``: why writing it disrupts GPU work, if it does;
- ``expected``: the object the cluster must show once the run wrote it, the health gates'
  evidence (None: the run does not write it, so a gate must not demand it).

Every later step reads the decision and none decides again. The executors (the writer, the
pruner, helm, the drainer) take only decisions (``require``: an executor given none refuses to
run) and record the outcome on the entry; what they find at write time (a 403, a conflict, a
claim reserved since the plan) is an outcome, never a second verdict. The health gates read
``expected`` (they verify what this run wrote, never a held object's declared state); the ledger,
status, metrics and holds read the verdict (via the ChangeSet: ``Change.verdict``, ``Change.held``),
as do ``fleetctl diff`` in text, JSON and markdown and the pull-request comment. ``decide`` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from fleet.kube import Ref

if TYPE_CHECKING:
    from fleet.engine.disruptions import Disruption
    from fleet.engine.waits import Wait

Verdict = Literal["write", "hold", "refuse", "leave"]
Verb = Literal[
    "",
    "apply",
    "replace",
    "node-write",
    "delete",
    "release",
    "helm-upgrade",
    "helm-uninstall",
    "cordon",
    "evict",
    "uncordon",
]
VERBS: tuple[Verb, ...] = get_args(Verb)
WRITTEN = ("created", "configured", "deleted")
"""The actions that send a write (a deletion, or a release of what fleet set, included)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What fleet does with one change this run (see the module's docstring)."""

    verdict: Verdict
    verb: Verb = ""
    """What the executor does (for ``hold`` and ``refuse``: what it would do)."""
    force: bool = False
    """The apply takes the fields other field managers own (``--force-conflicts``, drift repair, adoption)."""
    user: str = ""
    """The identity the write and its dry-run use ("" for the controller's own)."""
    as_fleet: str = ""
    """Why an object of a team's folder goes as fleet, when it does ("" otherwise)."""
    wait: Wait | None = None
    """With ``hold``: what the change waits for, and until when."""
    disruption: Disruption | None = None
    expected: Mapping[str, Any] | None = None
    """With ``write``: the object the run writes, which the health gates verify (None for a deletion)."""

    def to_json(self) -> dict[str, Any]:
        """``verdict``, ``verb``, and for what is sent or would be, ``as`` (the user, or ``fleet``), ``asFleet``
        and ``force``."""
        out: dict[str, Any] = {"verdict": self.verdict}
        if self.verb:
            out["verb"] = self.verb
        if self.force:
            out["force"] = True
        if self.verdict != "leave" or self.user or self.as_fleet:
            out["as"] = self.user or "fleet"
        if self.as_fleet:
            out["asFleet"] = self.as_fleet
        return out


LEAVE = Decision(verdict="leave")
"""What most changes get: nothing to do, as nobody."""


class Undecided(RuntimeError):
    """An executor was handed a change with no decision, or one that is not ``write``: a bug in fleet."""


def require(decision: Decision | None, *, what: object) -> Decision:
    """The ``write`` decision an executor obeys; anything else makes it refuse to run (``Undecided``)."""
    if decision is None or decision.verdict != "write":
        found = "no decision" if decision is None else f"a {decision.verdict!r} decision"
        raise Undecided(f"{what}: an executor was handed {found}; only a 'write' decision is executed")
    return decision


def decide(
    *,
    action: str,
    verb: Verb = "",
    force: bool = False,
    error: str = "",
    wait: Wait | None = None,
    disruption: Disruption | None = None,
    user: str = "",
    as_fleet: str = "",
    obj: Mapping[str, Any] | None = None,
) -> Decision:
    """The one decision for a change whose diff says ``action`` (``error``: why it failed or was
    refused), held for ``wait``, classed ``disruption``, going as ``user`` (``as_fleet``: why fleet's
    own identity) by ``verb`` (``force``: taking others' fields): ``obj`` is what a write sends, the
    gates' evidence."""
    if not (error or wait or disruption or user or as_fleet or force) and action not in WRITTEN:
        return LEAVE  # the common case, shared: a no-op of 10,000 objects makes no 10,000 values
    if error:
        verdict: Verdict = "refuse"
    elif wait is not None:
        verdict = "hold"
    elif action in WRITTEN:
        verdict = "write"
    else:
        verdict = "leave"
    return Decision(
        verdict=verdict,
        verb=verb if verdict != "leave" else "",
        force=force and verdict != "leave",
        user=user,
        as_fleet=as_fleet,
        wait=wait,
        disruption=disruption,
        expected=obj if verdict == "write" else None,
    )


def expected(decided: Iterable[Decision | None]) -> dict[str, Mapping[str, Any]]:
    """What the run's writes leave in the cluster, by ``Ref.key``: the objects the gates verify."""
    return {Ref.of(dict(d.expected)).key: d.expected for d in decided if d is not None and d.expected is not None}


__all__ = ["LEAVE", "VERBS", "Decision", "Undecided", "Verb", "Verdict", "decide", "expected", "require"]
