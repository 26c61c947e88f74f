"""The one driver of a ``Sync``: every caller (``fleetctl apply``, the controller, ``diff``, the
benchmarks and the tests) runs the engine through ``drive``, so the path the tests exercise is
the path production runs.

A driver written three times drifts three ways: a sweep of the no-dry-run cache that only the
test path made left the controller's copy growing with every status update of a managed object.
Here whatever each caller needs beside the steps is a hook (``Hooks``): a progress bar, a line
per finished step, a test's fault injected before a step or its "crash" (an exception raised
from a hook ends the run as a kill would: what was done stays done, and the ledger's progress
says where to resume). What outlives the run (``memories.Memory``) is swept when it ends, however
it ends.

A ``FleetError`` (a health gate's timeout, the operator's refusal, an API server that stopped
answering, an empty plan refused) ends the run and is returned in the ``Outcome`` beside the
ChangeSet of what was done: the caller decides what it means (the CLI's exit code, the
controller's status and backoff). Anything else propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.engine import drifts, operators
from fleet.engine.applies import Sync
from fleet.engine.changesets import Change, ChangeSet
from fleet.errors import FleetError
from fleet.kube import KubeError, Ref
from fleet.kube.errors import UNAVAILABLE


@dataclass(frozen=True)
class Hooks:
    before_step: Callable[[str], None] | None = None
    """Told each step's name before it runs (the first call comes after ``start``)."""
    after_step: Callable[[str, list[Change]], None] | None = None
    """Told each finished step's name and the entries it added."""


@dataclass
class Outcome:
    """A run's result: what it did, and what stopped it, if anything did."""

    changes: ChangeSet
    steps_left: list[str] = field(default_factory=list)
    error: FleetError | None = None
    started: bool = False
    """``start`` finished: the ledger and the live objects were read (``frozen`` is known)."""
    frozen: list[tuple[Ref, drifts.Freeze]] = field(default_factory=list)
    unavailable: KubeError | None = None
    """The API server itself failed (no answer, 5xx, 429): retry the run once it answers."""

    @property
    def complete(self) -> bool:
        """Every step ran and nothing failed."""
        return self.started and self.error is None and not self.changes.failed and not self.steps_left

    @property
    def refused(self) -> Change | None:
        """The operator release's entry when the chart or its values were refused."""
        return self.error.change if isinstance(self.error, operators.OperatorRefused) else None

    def raise_error(self) -> ChangeSet:
        """The ChangeSet, or the error that ended the run raised (for callers that want exceptions)."""
        if self.error is not None:
            raise self.error
        return self.changes


async def drive(sync: Sync, *, hooks: Hooks | None = None) -> Outcome:
    """Run ``sync`` from ``start`` to its last step (or the first failure that stops it)."""
    hooks = hooks or Hooks()
    outcome = Outcome(changes=sync.changes)
    try:
        await sync.start()
        outcome.started = True
        while not sync.done:
            name = sync.steps[0]
            if hooks.before_step is not None:
                hooks.before_step(name)
            before = len(sync.changes.entries)
            await sync.step()
            if hooks.after_step is not None:
                hooks.after_step(name, sync.changes.entries[before:])
    except FleetError as err:
        outcome.error = err
    finally:
        if sync.memory is not None:
            sync.memory.settled.sweep()
        sync.release()  # what holds a method of the Sync goes: no cycle outlives the run
    if outcome.started:
        outcome.frozen = sync.frozen()
    outcome.steps_left = list(sync.steps)
    unavailable = outcome.error if isinstance(outcome.error, UNAVAILABLE) else None
    outcome.unavailable = unavailable or sync.unavailable
    return outcome


__all__ = ["Hooks", "Outcome", "drive"]
