"""Who may write: only the replica holding the cluster's Lease reconciles.

``Leader`` is the flag the rest of the controller reads and the switch that stops
writing at once: every reconcile runs inside ``writing()``, a cancel scope that
``lost()`` cancels, so a replica that loses its Lease stops between two requests,
not after its reconcile.

``elect`` is the one function that decides leadership. With ``--no-leader-elect``
the replica leads alone. The per-cluster Lease (``coordination.k8s.io``, acquire,
renew and release with resourceVersion preconditions, controller-runtime's 15 s /
10 s / 2 s timings) is being built in the engine by another branch; until it lands
``elect`` also leads alone and says so in the log, and the Lease plugs in here only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from fleet.kube import Client

logger = logging.getLogger(__name__)


class Leader:
    """Whether this replica leads; ``writing()`` scopes are cancelled when it stops leading."""

    def __init__(self) -> None:
        self._leading = False
        self._gained = anyio.Event()
        self._scopes: set[anyio.CancelScope] = set()
        self.holder = ""

    @property
    def leading(self) -> bool:
        return self._leading

    async def wait(self) -> None:
        """Return once this replica leads."""
        while not self._leading:
            await self._gained.wait()

    def gained(self, *, identity: str) -> None:
        self.holder = identity
        self._leading = True
        self._gained.set()

    def lost(self, *, holder: str = "") -> None:
        """Stop leading: every write in flight is cancelled now."""
        self.holder = holder
        self._leading = False
        self._gained = anyio.Event()
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def writing(self) -> Iterator[anyio.CancelScope]:
        """A scope for writes, cancelled the moment leadership is lost."""
        with anyio.CancelScope() as scope:
            if not self._leading:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)


async def elect(*, client: Client, cluster: str, identity: str, enabled: bool, leader: Leader) -> None:
    """Lead for as long as this runs (the seam for the engine's Lease; see the module docstring)."""
    del client, cluster  # used by the Lease once it lands
    if enabled:
        logger.warning("leader election: the Lease is not available in this build; leading alone as %s", identity)
    leader.gained(identity=identity)
    try:
        await anyio.sleep_forever()
    finally:
        leader.lost()


__all__ = ["Leader", "elect"]
