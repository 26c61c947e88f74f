"""How one run goes: the engine's options, every one a front door can set.

Each front door (``fleetctl``'s ``pipelines.run_options``, the controller's ``settings.engine_options``,
``fleetctl import``) makes them once from its flags or settings; the engine reads nothing else, so
``fleetctl diff`` previews the controller's behaviour with the same flags (the drift policy included).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from fleet import helm
from fleet.engine import impersonations, ledgers, waits

DriftPolicy = Literal["enforce", "report", "ignore"]


@dataclass(frozen=True)
class Options:
    """How one run goes. Each front door (``fleetctl``'s ``pipelines.run_options``, the controller's
    ``settings.engine_options``, ``fleetctl import``) makes it once from its flags or settings; everything
    after derives from it with ``dataclasses.replace``, so no option is dropped on the way."""

    prune: bool = False
    dry_run: bool = False
    force_conflicts: bool = False
    allow_empty: bool = False
    concurrency: int = 16
    health_timeout: float = 120.0
    ignore_managers: tuple[str, ...] = ()
    helm: helm.Settings | None = None
    """How to run helm for the operator stage; None: the stage reports the release as skipped."""
    impersonation: impersonations.Mode = "optional"
    """As whom a team's objects are written (``fleet.engine.impersonations``; ``--team-impersonation``)."""
    emergency: str = ""
    """Why this revision's disruptive changes may skip the rollout waves and the maintenance window (a
    ``Fleet-Emergency:`` trailer, ``--emergency``, the FleetSync's annotation); they still wait for running jobs."""
    reported: waits.Reported | None = None
    """The earlier rollout waves' commit statuses for the plan's revision, as the controller read them
    from the git host; None: waves are not checked (``fleetctl``: a person applying by hand)."""
    drift_policy: DriftPolicy | None = None
    """``--drift-policy``: the policy of every object whose repository left it at the default (``enforce``);
    None keeps the repository's (``drift``)."""
    handover: Mapping[str, ledgers.Origin] = field(default_factory=dict)
    """``Ref.key`` → origin: live objects ``fleetctl import`` hands to fleet. They are taken over
    without a conflict, and the ledger records the origin given here (``created``: pruning deletes)."""

    def previewed(self) -> Options:
        """These options for ``engine.diff``: every stage dry-run, deletions shown, an empty plan previewed;
        every other option as given (a preview under other options would show another run)."""
        return dataclasses.replace(self, prune=True, dry_run=True, allow_empty=True)

    def drift(self, declared: str) -> str:
        """The drift policy an object declared with ``declared`` runs under: ``drift_policy`` replaces the default."""
        return self.drift_policy if self.drift_policy is not None and declared == "enforce" else declared


__all__ = ["DriftPolicy", "Options"]
