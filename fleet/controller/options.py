"""The controller's options: what ``mains`` derives from the settings, read by every concern.

``Options`` is built once (``mains.build``, the tests' ``running``) and never copied field by
field: the loop's timings are read by ``controllers``, the source's by ``intakes``, the held
changes' by ``holds`` (``Looks``), and what a reconcile passes to the engine by
``settings.engine_options``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet import helm
from fleet.controller.holds import Looks
from fleet.engine import impersonations
from fleet.engine.options import DriftPolicy
from fleet.kube import Kind


@dataclass(frozen=True)
class Watching:
    """How the controller's watch cache watches."""

    timeout: int = 240
    """Seconds the API server keeps each watch open (``timeoutSeconds``) before it is resumed."""
    extra: dict[Kind, str] = field(default_factory=dict)
    """Kinds kept for the console, with field selectors (``consoles.extra_kinds``)."""


@dataclass
class Options:
    cluster: str
    interval: float = 60.0
    resync: float = 600.0
    health_timeout: float = 120.0
    drift_policy: DriftPolicy | None = None
    """Overrides the repository's Fleet default (``--drift-policy``); None keeps the repository's."""
    jitter: float = 0.1
    """Each poll starts up to this fraction of the interval early (drawn anew each time), never
    late: replicas and clusters spread over the interval, and a commit is still found within one."""
    lag_interval: float = 0.5
    settle_every: float = 0.5
    """Seconds between ``heaps.settle`` calls while the loop runs (also after each reconcile): a settle
    collects what was allocated since the last, so the shorter the period the shorter each pause."""
    helm: helm.Settings | None = None
    """How the operator stage runs helm; None skips the stage (reported as skipped)."""
    team_impersonation: impersonations.Mode = "optional"
    """As whom each team's objects are written (``--team-impersonation``, ``fleet.engine.impersonations``)."""
    force_conflicts: bool = False
    """Take fields other field managers own under every policy (``--force-conflicts``); default: ``enforce``
    takes back the fields fleet declares, ``report`` reports them as conflicts."""
    watching: Watching = field(default_factory=lambda: Watching())
    """How the watch cache watches (``caches.Cache``)."""
    commit_status_target_url: str = ""
    """The link posted with each commit status (``{sha}`` and ``{cluster}`` replaced); "" for none."""
    store_after: float = 10.0
    """Seconds without a newer plan before the last one is put in the plan store (and at shutdown)."""
    looks: Looks = field(default_factory=Looks)
    """How often held changes are looked at again (``holds``)."""


__all__ = ["Options", "Watching"]
